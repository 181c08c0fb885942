/**
 * What the console tells an operator and an auditor, in a real Chromium against a real node, held
 * against what the node and the CLI really do: the Bundles page's providers are the
 * materializer's own answer; a killed run's "Why" uses the CLI's words; its timeline's notes read
 * as words, not JSON; once reconciled, the Overview's recent failures say so and its page shows
 * the whole signed receipt on load; and the Keys page's policy file is one `warden journal verify
 * --policy` accepts, for that reconciled run.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as path from "node:path";
import { createHash, randomUUID } from "node:crypto";
import type { Browser, Page } from "playwright-core";
import { httpCall, repo, startNode, warden, type NodeProcess } from "../support/node.js";
import { launchChromium, seriousViolations } from "../support/browser.js";
import { waitFor } from "../support/wait.js";
import { buildConsole, FIXTURE_PROVIDER_ARGS, fixtureAgentPath, logInWithToken, UI_WAIT_MS } from "./console-support.js";
import { tempDir } from "../support/temp.js";

const TOKEN = "console-audit-operator-token-0123456789ab";

describe("what the console says is what the node and the CLI do (real Chromium, real node)", () => {
  let root: string;
  let node: NodeProcess;
  let browser: Browser;
  let page: Page;
  let killed: { id: string; runId: string };

  const call = (method: string, route: string, body?: unknown, headers?: Record<string, string>) =>
    httpCall(node.url, TOKEN, method, route, { ...(body === undefined ? {} : { body }), ...(headers === undefined ? {} : { headers }) });
  const ui = (p: string): string => `${node.url}/ui${p}`;
  const text = async (selector: string): Promise<string> => ((await page.locator(selector).first().textContent()) ?? "").replace(/\s+/g, " ").trim();
  const cli = (args: string[]) => warden([...args, "--url", node.url], { env: { WARDEN_TOKEN: TOKEN } });

  before(async () => {
    buildConsole();
    root = tempDir("e2e-console-audit");
    const workspace = path.join(root, "workspace");
    fs.mkdirSync(workspace);
    node = await startNode({
      home: path.join(root, "home"),
      args: [...FIXTURE_PROVIDER_ARGS, "--workspace", `main=${workspace}`, "--log-level", "warn"],
      env: { WARDEN_TOKEN: TOKEN, ...fixtureAgentPath(root) },
      timeoutMs: 90_000,
    });
    const pushed = await cli(["push", path.join(repo, "examples", "review-bundle")]);
    assert.equal(pushed.code, 0, pushed.stderr);
    browser = await launchChromium();
    page = await (await browser.newContext({ viewport: { width: 1280, height: 860 } })).newPage();
    await logInWithToken(page, node.url, TOKEN);
  });
  after(async () => {
    await browser?.close();
    await node?.stop();
    fs.rmSync(root, { recursive: true, force: true });
  });

  it("the Bundles page says, per provider, what the materializer answers for the example", async () => {
    const revision = String(((await call("GET", "/v1/bundles/review-bundle")).body.revisions as { revision: string }[])[0]!.revision);
    await page.goto(ui("/bundles/review-bundle"));
    await page.getByRole("button", { name: "Files" }).click();
    await page.locator(".providers li").first().waitFor({ timeout: UI_WAIT_MS });
    assert.equal(await text(".providers p"), "Materializes for: claude, codex");
    for (const provider of ["claude", "codex", "kimi"]) {
      const shown = await text(`.providers li[data-provider=${provider}]`);
      const made = await call("POST", `/v1/bundles/review-bundle/${revision}/materializations`, { provider });
      if (made.status === 201) {
        assert.doesNotMatch(shown, /refused/, `${provider}: ${shown}`);
        await call("DELETE", `/v1/materializations/${String(made.body.session)}`);
      } else {
        assert.equal(made.status, 422, JSON.stringify(made.body));
        assert.match(shown, new RegExp(`^${provider}: refused, ${String(made.body.code)}:`), `${provider}: the console names the refusal a materialization answers`);
      }
    }
    assert.deepEqual(await seriousViolations(page), []);
  });

  it("a killed run: Why and Termination in the CLI's words, notes as words, and it leaves the Overview's failures as unresolved", async () => {
    const id = randomUUID();
    const started = await call("POST", "/v1/invocations", { provider: "claude", prompt: "die mid-run #kill" }, { "idempotency-key": id });
    assert.equal(started.status, 202, JSON.stringify(started.body));
    killed = { id, runId: String(started.body.run_id) };
    await waitFor("the killed run to read unresolved", async () => ((await call("GET", `/v1/invocations/api:operator/${id}`)).body.status === "unresolved" ? true : undefined));

    await page.goto(ui(`/invocations/api%3Aoperator/${id}`));
    await page.getByTestId("termination").waitFor({ timeout: UI_WAIT_MS });
    const why = await text("[data-testid=why]");
    const termination = await text("[data-testid=termination]");
    assert.match(why, /^released: the node ended the run without recording a result/);
    assert.match(termination, /^crashed: the agent was killed or died before it finished$/);
    // The CLI says the same, word for word.
    const shown = await cli(["invocations", "show", "api:operator", id]);
    assert.ok(shown.stdout.includes(why), `\`invocations show\` says "${why}":\n${shown.stdout}`);
    const inspected = await cli(["inspect", "api:operator", id]);
    assert.ok(inspected.stdout.includes(termination), `\`inspect\` says "${termination}":\n${inspected.stdout}`);

    // Notes read as words: the agent's process, no JSON braces or quotes.
    const notes = await page.locator("[data-testid=timeline] li.ev-note .ev-detail").allTextContents();
    assert.ok(notes.length > 0, "the run's journal has notes");
    for (const note of notes) assert.doesNotMatch(note, /[{}"]/, `a note shown as JSON: ${note}`);
    assert.ok(notes.some((n) => /^process: host \S+, permission workspace, pid \d+$/.test(n)), notes.join("\n"));

    await page.goto(ui("/"));
    const row = page.locator("tr", { has: page.locator(`a[href$="${id}"]`) });
    await row.waitFor({ timeout: UI_WAIT_MS });
    assert.equal(((await row.locator(".status").textContent()) ?? "").trim(), "unresolved");
  });

  it("reconciled: the Overview says so, and the run's page shows the whole signed receipt on load", async () => {
    const { snapshot_hash } = (await call("GET", `/v1/invocations/api:operator/${killed.id}/inspection`)).body as { snapshot_hash: string };
    const review = {
      snapshot_hash,
      outcome: "no_effects",
      rationale: "the agent died before its first write; git status of the workspace is clean",
      evidence: [{ reference: "git-status.txt", sha256: `sha256:${createHash("sha256").update("nothing to commit\n").digest("hex")}` }],
      effects_stopped: true,
    };
    const reconciled = await call("POST", `/v1/invocations/api:operator/${killed.id}/reconciliation`, review);
    assert.equal(reconciled.status, 201, JSON.stringify(reconciled.body));
    const receipt = reconciled.body.receipt as { sig: string; key_id: string };

    await page.goto(ui("/"));
    const row = page.locator("tr", { has: page.locator(`a[href$="${killed.id}"]`) });
    await row.waitFor({ timeout: UI_WAIT_MS });
    assert.equal(((await row.locator(".status").textContent()) ?? "").trim(), "reconciled", "no red unresolved badge on a run since reconciled");

    await page.goto(ui(`/invocations/api%3Aoperator/${killed.id}`));
    await page.getByTestId("receipt-view").waitFor({ timeout: UI_WAIT_MS });
    const shown = await text("[data-testid=receipt-view]");
    for (const part of ["no effects", review.rationale, "git-status.txt", review.evidence[0]!.sha256, receipt.key_id, receipt.sig, "operator"]) {
      assert.ok(shown.includes(part), `the receipt shows "${part}": ${shown}`);
    }
    assert.deepEqual(await seriousViolations(page), []);
  });

  it("the Keys page's policy file is one `journal verify --policy` accepts, for the reconciled run and a recorded one", async () => {
    const id = randomUUID();
    const started = await call("POST", "/v1/invocations", { provider: "claude", prompt: "say hello" }, { "idempotency-key": id });
    const recordedRun = String(started.body.run_id);
    await waitFor("the run to be recorded and logged", async () => ((await call("GET", `/v1/log/runs/${recordedRun}`)).status === 200 ? true : undefined));
    await waitFor("the reconciliation to be logged", async () => ((await call("GET", `/v1/log/reconciliations/${killed.runId}`)).status === 200 ? true : undefined));

    await page.goto(ui("/keys"));
    await page.getByTestId("log-policy").waitFor({ timeout: UI_WAIT_MS });
    const policy = (await page.getByTestId("log-policy").textContent()) ?? "";
    const vkey = String((await call("GET", "/v1/log")).body.vkey);
    assert.equal(policy.split("\n")[0], `log ${vkey}`);
    const file = path.join(root, "policy.txt");
    fs.writeFileSync(file, policy);

    const recorded = await cli(["journal", "verify", recordedRun, "--policy", file]);
    assert.equal(recorded.code, 0, recorded.stdout + recorded.stderr);
    assert.match(recorded.stdout, new RegExp(`^LOGGED run ${recordedRun}: `, "m"));
    const reconciled = await cli(["journal", "verify", killed.runId, "--policy", file]);
    assert.equal(reconciled.code, 0, reconciled.stdout + reconciled.stderr);
    assert.match(reconciled.stdout, new RegExp(`^LOGGED reconciliation of run ${killed.runId} by operator: `, "m"));
    assert.deepEqual(await seriousViolations(page), []);
  });
});
