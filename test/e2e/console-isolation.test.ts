/**
 * The Run page's Isolation, in a real Chromium against a real node with two workspaces, one
 * confined (the default) and one configured `workspaceIsolation: "none"`: a confined run shows its
 * sandbox profile's kind and egress allowlist, no "unconfined" badge; an unconfined run shows the
 * red "unconfined" badge. Both name the profile digest the journal's `run.started` recorded, the
 * one `warden journal verify` prints.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as path from "node:path";
import { randomUUID } from "node:crypto";
import type { Browser, Page } from "playwright-core";
import { httpCall, startNode, warden, type NodeProcess } from "../support/node.js";
import { launchChromium, seriousViolations } from "../support/browser.js";
import { waitFor } from "../support/wait.js";
import { buildConsole, FIXTURE_PROVIDER_ARGS, fixtureAgentPath, logInWithToken, UI_WAIT_MS } from "./console-support.js";
import { tempDir } from "../support/temp.js";

const TOKEN = "console-isolation-operator-token-0123456789";
/** An egress pair of the documentation range: named in the confined profile, never dialled here. */
const EGRESS = "198.51.100.7:443";

interface Recorded {
  readonly profile: { readonly kind: string; readonly egress?: { readonly allow?: readonly string[] } };
  readonly digest: string;
}

describe("the Run page shows a run's confinement, and flags one configured unconfined (real Chromium, real node)", () => {
  let root: string;
  let node: NodeProcess;
  let browser: Browser;
  let page: Page;

  const call = (method: string, route: string, body?: unknown, headers?: Record<string, string>) =>
    httpCall(node.url, TOKEN, method, route, { ...(body === undefined ? {} : { body }), ...(headers === undefined ? {} : { headers }) });
  const cli = (args: string[]) => warden([...args, "--url", node.url], { env: { WARDEN_TOKEN: TOKEN } });

  /** Starts a run in `workspace`, waits for it to finish, and returns its ids and the isolation its run.started recorded. */
  async function finishedRun(workspace: string): Promise<{ id: string; runId: string; isolation: Recorded }> {
    const id = randomUUID();
    const started = await call("POST", "/v1/invocations", { provider: "claude", prompt: "say hello", workspace }, { "idempotency-key": id });
    assert.equal(started.status, 202, JSON.stringify(started.body));
    const runId = String(started.body.run_id);
    await waitFor(`the run in ${workspace} to be recorded`, async () => {
      const status = (await call("GET", `/v1/invocations/api:operator/${id}`)).body.status;
      assert.ok(status === "in_progress" || status === "recorded", `the run in ${workspace} ended ${String(status)}`);
      return status === "recorded" ? true : undefined;
    });
    const journal = await fetch(`${node.url}/v1/runs/${runId}/journal`, { headers: { authorization: `Bearer ${TOKEN}` } });
    assert.equal(journal.status, 200);
    const first = JSON.parse((await journal.text()).split("\n", 1)[0]!) as { entry: { seq: number; event: { type: string; isolation?: Recorded } } };
    assert.equal(first.entry.event.type, "run.started");
    assert.ok(first.entry.event.isolation !== undefined, `run.started records no isolation: ${JSON.stringify(first.entry)}`);
    return { id, runId, isolation: first.entry.event.isolation };
  }

  async function isolationShown(id: string): Promise<{ text: string; title: string | null; red: boolean }> {
    await page.goto(`${node.url}/ui/invocations/api%3Aoperator/${id}`);
    const badge = page.getByTestId("isolation-badge");
    await badge.waitFor({ timeout: UI_WAIT_MS });
    return {
      text: ((await badge.textContent()) ?? "").replace(/\s+/g, " ").trim(),
      title: await badge.getAttribute("title"),
      red: await badge.evaluate((el) => el.classList.contains("badge-bad")),
    };
  }

  before(async () => {
    buildConsole();
    root = tempDir("e2e-console-isolation");
    for (const ws of ["confined", "loose"]) fs.mkdirSync(path.join(root, ws));
    node = await startNode({
      home: path.join(root, "home"),
      args: [...FIXTURE_PROVIDER_ARGS, "--workspace", `confined=${path.join(root, "confined")}`, "--workspace", `loose=${path.join(root, "loose")}`, "--log-level", "warn"],
      config: { workspaceIsolation: { loose: "none" }, sandbox: { egress: [EGRESS] } },
      env: { WARDEN_TOKEN: TOKEN, ...fixtureAgentPath(root) },
      timeoutMs: 90_000,
    });
    browser = await launchChromium();
    page = await (await browser.newContext({ viewport: { width: 1280, height: 860 } })).newPage();
    await logInWithToken(page, node.url, TOKEN);
  });
  after(async () => {
    await browser?.close();
    await node?.stop();
    if (root !== undefined) fs.rmSync(root, { recursive: true, force: true });
  });

  it("a confined run: its sandbox and egress allowlist, the journal's digest, no unconfined badge", async () => {
    const run = await finishedRun("confined");
    assert.notEqual(run.isolation.profile.kind, "none");
    const allow = run.isolation.profile.egress?.allow ?? [];
    assert.ok(allow.includes(EGRESS), `the configured egress is in the profile: ${JSON.stringify(allow)}`);

    const shown = await isolationShown(run.id);
    assert.equal(shown.text, `${run.isolation.profile.kind}; egress to ${allow.join(", ")}`);
    assert.equal(shown.title, run.isolation.digest);
    assert.equal(shown.red, false, "a confined run is not flagged");
    assert.equal(await page.getByText("unconfined", { exact: true }).count(), 0, "no unconfined badge on a confined run's page");

    const verified = await cli(["journal", "verify", run.runId]);
    assert.equal(verified.code, 0, verified.stdout + verified.stderr);
    assert.match(verified.stdout, new RegExp(`^isolation: ${run.isolation.profile.kind} profile ${run.isolation.digest}; egress to ${allow.join(", ")};`, "m"));
    assert.doesNotMatch(verified.stdout, /WARNING/);
    assert.deepEqual(await seriousViolations(page), []);
  });

  it("an unconfined run: the red unconfined badge, naming the digest journal verify warns of", async () => {
    const run = await finishedRun("loose");
    assert.equal(run.isolation.profile.kind, "none");

    const shown = await isolationShown(run.id);
    assert.equal(shown.text, "unconfined");
    assert.equal(shown.red, true, "the unconfined badge is the red one");
    assert.equal(shown.title, run.isolation.digest);

    const verified = await cli(["journal", "verify", run.runId]);
    assert.equal(verified.code, 0, verified.stdout + verified.stderr);
    const warning = /^WARNING: isolation none: .*\(profile (sha256:[0-9a-f]{64})\)$/m.exec(verified.stdout);
    assert.ok(warning !== null, `journal verify warns of the unconfined run:\n${verified.stdout}`);
    assert.equal(shown.title, warning[1], "the page names the profile digest journal verify prints");
    assert.deepEqual(await seriousViolations(page), []);
  });
});
