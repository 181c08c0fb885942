/**
 * The Run page's Changes, in a real Chromium against a real node (`warden serve`) whose workspace
 * is a git repository and whose agent edits its worktree: the page shows the change-set digest the
 * journal's `run.changes` signs (checked in the browser against the served manifest), every changed
 * file with its status and line counts, and the patch's hunks.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as path from "node:path";
import { randomUUID } from "node:crypto";
import type { Browser, Page } from "playwright-core";
import { httpCall, startNode, type NodeProcess } from "../support/node.js";
import { launchChromium, seriousViolations } from "../support/browser.js";
import { waitFor } from "../support/wait.js";
import { buildConsole, logInWithToken, UI_WAIT_MS } from "./console-support.js";
import { tempDir } from "../support/temp.js";
import { b64, editingAgent, makeRepo, prompt, type Op } from "../changes/helpers.js";

const TOKEN = "console-changes-operator-token-0123456789";

const OPS: Op[] = [
  { op: "write", path: "a.txt", base64: b64("one\ntwo, changed\nthree\nfour\n") },
  { op: "rm", path: "gone.txt" },
  { op: "write", path: "notes/new.md", base64: b64("# new\n") },
];

describe("the Run page shows what the run changed (real Chromium, real node, git workspace)", () => {
  let root: string;
  let node: NodeProcess;
  let browser: Browser;
  let page: Page;
  const call = (method: string, route: string, body?: unknown, headers?: Record<string, string>) =>
    httpCall(node.url, TOKEN, method, route, { ...(body === undefined ? {} : { body }), ...(headers === undefined ? {} : { headers }) });

  before(async () => {
    buildConsole();
    root = tempDir("e2e-console-changes");
    const repo = path.join(root, "repo");
    makeRepo(repo);
    const agent = editingAgent(path.join(root, "agents"));
    node = await startNode({
      home: path.join(root, "home"),
      args: ["--provider", `claude=${agent}`, "--workspace", `repo=${repo}`, "--log-level", "warn"],
      env: { WARDEN_TOKEN: TOKEN },
      timeoutMs: 90_000,
    });
    browser = await launchChromium();
    page = await (await browser.newContext({ viewport: { width: 1280, height: 900 } })).newPage();
    await logInWithToken(page, node.url, TOKEN);
  });
  after(async () => {
    await browser?.close();
    await node?.stop();
    if (root !== undefined) fs.rmSync(root, { recursive: true, force: true });
  });

  it("names the signed digest, lists the files and shows the hunks", async () => {
    const id = randomUUID();
    const started = await call("POST", "/v1/invocations", { provider: "claude", prompt: prompt(OPS), workspace: "repo" }, { "idempotency-key": id });
    assert.equal(started.status, 202, JSON.stringify(started.body));
    const runId = String(started.body.run_id);
    await waitFor("the run to be recorded", async () => {
      const status = (await call("GET", `/v1/invocations/api:operator/${id}`)).body.status;
      assert.ok(status === "in_progress" || status === "recorded", `the run ended ${String(status)}`);
      return status === "recorded" ? true : undefined;
    });
    const changes = (await call("GET", `/v1/runs/${runId}/changes`)).body as { change_set: string };

    await page.goto(`${node.url}/ui/invocations/api%3Aoperator/${id}`);
    const badge = page.getByTestId("changes-badge");
    await badge.waitFor({ timeout: UI_WAIT_MS });
    assert.match((await badge.textContent()) ?? "", /✓ the served change set hashes to the digest the journal signs/);
    assert.equal(await page.getByTestId("change-set-digest").textContent(), changes.change_set);

    const rows = page.getByTestId("changed-file");
    assert.deepEqual(
      await rows.evaluateAll((trs) => trs.map((tr) => [...tr.querySelectorAll("td")].map((td) => (td.textContent ?? "").trim()).filter((t) => t !== "").join(" "))),
      ["modified a.txt +2 −1", "deleted gone.txt +0 −1", "added notes/new.md +1 −0"],
    );
    const files = page.getByTestId("patch-file");
    assert.equal(await files.count(), 3);
    const hunks = (await page.getByTestId("hunk").allTextContents()).join("\n");
    assert.match(hunks, /^@@ -1,3 \+1,4 @@/m);
    assert.match(hunks, /^-two$/m);
    assert.match(hunks, /^\+two, changed$/m);
    assert.match(hunks, /^\+# new$/m);
    assert.deepEqual(await seriousViolations(page), []);
  });

  it("shows the bidirectional overrides and escapes an agent put in its file names and lines as visible stand-ins", async () => {
    // "evil\u202Etxt.sh" would read "evilhs.txt"; the line would hide what follows its carriage return.
    const id = randomUUID();
    const ops: Op[] = [{ op: "write", path: "evil\u202etxt.sh", base64: b64("echo safe\r\u001b[2Krm -rf ~ \u2066hidden\u2069\n") }];
    const started = await call("POST", "/v1/invocations", { provider: "claude", prompt: prompt(ops), workspace: "repo" }, { "idempotency-key": id });
    assert.equal(started.status, 202, JSON.stringify(started.body));
    await waitFor("the run to be recorded", async () => {
      const status = (await call("GET", `/v1/invocations/api:operator/${id}`)).body.status;
      assert.ok(status === "in_progress" || status === "recorded", `the run ended ${String(status)}`);
      return status === "recorded" ? true : undefined;
    });
    await page.goto(`${node.url}/ui/invocations/api%3Aoperator/${id}`);
    await page.getByTestId("changes-badge").waitFor({ timeout: UI_WAIT_MS });
    const row = (await page.getByTestId("changed-file").allTextContents()).join("\n");
    assert.match(row, /evil\\u\{202e\}txt\.sh/, row);
    const hunks = (await page.getByTestId("hunk").allTextContents()).join("\n");
    assert.ok(hunks.includes("echo safe\u240d\u241b[2Krm -rf ~ \\u{2066}hidden\\u{2069}"), hunks);
    const shown = await page.locator("main").innerText();
    for (const char of ["\u202e", "\u2066", "\u2069", "\u001b", "\r"]) assert.ok(!shown.includes(char), `the page shows U+${char.codePointAt(0)!.toString(16)} as it is`);
  });
});
