/**
 * Budgets (DESIGN.md "Spend") with the real pinned Claude Code under a real `warden serve`, against
 * the scripted model (100 input tokens a turn): a run whose budget is smaller than what the
 * script makes it spend is stopped after the turn that crossed it, between tool calls — outcome
 * `stopped`, reason `budget`, every tool call finished with a known outcome, a signed and verified
 * `run.spend` — and its workspace's day, spent now, refuses the next run before any claim, also
 * after the node is killed with SIGKILL and started again.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { existsSync, mkdirSync, rmSync } from "node:fs";
import { join } from "node:path";
import { ScriptedModelServer, SCRIPTED_USAGE, type ScriptTurn } from "../../src/scripted-model/index.js";
import { canonicalDigest } from "../../src/core/canonical.js";
import { httpCall, repo, startNode, type HttpReply, type NodeProcess, runJournal } from "../support/node.js";
import { tempDir } from "../support/temp.js";
import { launchChromium, seriousViolations } from "../support/browser.js";
import { buildConsole, logInWithToken, UI_WAIT_MS } from "../e2e/console-support.js";

const TOKEN = "spend-operator-token-0123456789abcdef";
const KEY_VAR = "SCRIPTED_MODEL_KEY";
const CLI = join(repo, "node_modules", ".bin", "claude");
const PRICES = { "scripted-model": { input_per_mtok: 3, output_per_mtok: 15 } };

interface Entry {
  entry: { seq: number; event: { type: string; effect_id?: string; kind?: string; outcome?: string; reason?: string } & Record<string, unknown> };
}

const bash = (command: string): ScriptTurn => ({ tool: { name: "Bash", input: { command, description: "run a command" } } });

describe("budgets with the real claude", { skip: existsSync(CLI) ? false : `${CLI} is not installed` }, () => {
  const root = tempDir("spend");
  const home = join(root, "home");
  const workspace = join(root, "workspace");
  const other = join(root, "other");
  let model: ScriptedModelServer;
  let node: NodeProcess | undefined;
  /** the invocation the budget stopped, for the console's Run page */
  let stoppedId: string | undefined;

  const config = (): Record<string, unknown> => ({
    workspaces: { main: workspace, other },
    defaultWorkspace: "main",
    providers: { claude: { command: CLI, model: { baseUrl: model.url, apiKeyEnv: KEY_VAR, name: "scripted-model", retries: 0 } } },
    spend: {
      prices: PRICES,
      run: { input_tokens: 100_000, turns: 50 },
      // One run of two turns spends the workspace's day.
      workspaceDay: { input_tokens: 2 * SCRIPTED_USAGE.input_tokens },
    },
    logLevel: "warn",
  });
  const start = (): Promise<NodeProcess> =>
    startNode({ home, config: config(), env: { WARDEN_TOKEN: TOKEN, [KEY_VAR]: "sk-scripted", HOME: join(root, "agent-home") }, timeoutMs: 60_000 });
  const invoke = (key: string, body: Record<string, unknown>): Promise<HttpReply> =>
    httpCall(node!.url, TOKEN, "POST", "/v1/invocations", { headers: { "idempotency-key": key, prefer: "wait=120" }, body });
  const journal = (runId: string): Promise<Entry[]> => runJournal<Entry>(node!.url, TOKEN, runId);

  before(async () => {
    for (const d of [workspace, other, join(root, "agent-home")]) mkdirSync(d, { recursive: true });
    mkdirSync(home, { mode: 0o700 });
    model = await ScriptedModelServer.start({ script: { turns: [] } });
    // Before the node starts: it serves the console it finds built then.
    buildConsole();
    node = await start();
  });
  after(async () => {
    await node?.kill();
    await model.close();
    rmSync(root, { recursive: true, force: true });
  });

  it("a request may only lower the node's budget", async () => {
    const key = randomUUID();
    const refused = await invoke(key, { provider: "claude", prompt: "spend more", budget: { input_tokens: 200_000 } });
    assert.equal(refused.status, 422, refused.text);
    assert.equal(refused.body.code, "budget-over-limit");
    // Nothing was claimed: the id is free.
    assert.equal((await httpCall(node!.url, TOKEN, "GET", `/v1/invocations/api:operator/${key}`)).status, 404);
  });

  it("a budget smaller than the script's usage: stopped after the crossing turn, between tool calls; run.spend signed and verified", async () => {
    const from = model.requests.length;
    // Turn 1 spends 100 input tokens, turn 2 crosses 150 with a tool call in flight: it is let
    // finish, then the agent is stopped before the third turn's answer can be taken.
    model.load({ turns: [bash("echo one > one.txt"), bash("echo two > two.txt"), bash("echo three > three.txt"), { text: "Done." }] });
    const key = randomUUID();
    const reply = await invoke(key, { provider: "claude", prompt: "write three files", budget: { input_tokens: 150 } });
    assert.equal(reply.status, 200, reply.text);
    assert.equal(reply.body.status, "recorded", reply.text);
    const result = reply.body.result as { stopped?: { reason: string; limit: string }; exit_code: number | null };
    assert.deepEqual(result.stopped, { reason: "budget", limit: "input_tokens" });
    assert.ok(model.requests.length - from >= 2, `the model was asked ${model.requests.length - from} times`);
    const entries = await journal(reply.body.run_id as string);
    const events = entries.map((e) => e.entry.event);
    const terminated = events.at(-1)!;
    assert.equal(terminated.type, "run.terminated");
    assert.equal(terminated.reason, "stopped");
    // Every tool call it started finished with a known outcome: none was cut.
    const tools = events.filter((e) => e.type === "effect.started" && e.kind === "tool");
    assert.ok(tools.length >= 2, JSON.stringify(events));
    for (const t of tools) {
      const finish = events.find((e) => e.type === "effect.finished" && e.effect_id === t.effect_id);
      assert.ok(finish !== undefined && finish.outcome !== "unknown", `tool ${t.effect_id} finished ${finish?.outcome}`);
    }
    assert.ok(existsSync(join(workspace, "two.txt")), "the crossing turn's tool call did not run to its end");
    // The spend entry: signed like every line, before the end, with the price table's digest.
    const spendAt = events.findIndex((e) => e.type === "run.spend");
    assert.ok(spendAt > 0 && spendAt < events.length - 1, JSON.stringify(events.map((e) => e.type)));
    const spend = events[spendAt] as unknown as { tokens: { input: number; output: number }; cost_usd_micros: number; turns: number; wall_ms: number; prices: string; breached: string };
    assert.ok(spend.tokens.input >= 2 * SCRIPTED_USAGE.input_tokens, JSON.stringify(spend));
    assert.ok(spend.turns >= 2, JSON.stringify(spend));
    assert.equal(spend.breached, "input_tokens");
    assert.equal(spend.prices, canonicalDigest(PRICES));
    assert.equal(spend.cost_usd_micros, spend.tokens.input * 3 + spend.tokens.output * 15);
    assert.ok(spend.wall_ms > 0);
    const verification = await httpCall(node!.url, TOKEN, "GET", `/v1/runs/${reply.body.run_id as string}/verification`);
    assert.equal(verification.status, 200);
    assert.equal(verification.body.ok, true, verification.text);
    assert.equal(verification.body.requires_reconciliation, false, verification.text);
    stoppedId = key;
  });

  it("the console's Run page shows the run's spend and that its budget stopped it (real Chromium)", async () => {
    assert.ok(stoppedId !== undefined, "the stopped run of the test before");
    const browser = await launchChromium();
    try {
      const page = await (await browser.newContext({ viewport: { width: 1280, height: 860 } })).newPage();
      await logInWithToken(page, node!.url, TOKEN);
      await page.goto(`${node!.url}/ui/invocations/api%3Aoperator/${stoppedId}`);
      const card = page.getByTestId("spend");
      await card.waitFor({ timeout: UI_WAIT_MS });
      assert.match((await page.getByTestId("spend-tokens").textContent()) ?? "", /^\d+ in, \d+ out$/);
      assert.match((await page.getByTestId("spend-cost").textContent()) ?? "", /^\$0\.\d{6}$/);
      assert.equal(((await page.getByTestId("spend-breached").textContent()) ?? "").trim(), "input_tokens reached");
      assert.match((await page.getByTestId("termination").textContent()) ?? "", /^stopped: /);
      assert.deepEqual(await seriousViolations(page), []);
      // The Overview: today's spend of the workspace and of the principal, from the day's counters.
      await page.goto(`${node!.url}/ui/`);
      for (const row of ["spend-workspace-main", "spend-principal-api:operator"]) {
        const cells = page.getByTestId(row).locator("td");
        await cells.first().waitFor({ timeout: UI_WAIT_MS });
        const input = Number(((await cells.first().textContent()) ?? "").replace(/,/g, ""));
        assert.ok(input >= 2 * SCRIPTED_USAGE.input_tokens, `${row}: ${input} input tokens`);
      }
      assert.deepEqual(await seriousViolations(page), []);
    } finally {
      await browser.close();
    }
  });

  it("the next run in the spent workspace is refused with its code before any claim, also after kill -9 and a restart", async () => {
    const refusedHere = async (): Promise<void> => {
      const key = randomUUID();
      const refused = await invoke(key, { provider: "claude", prompt: "one more" });
      assert.equal(refused.status, 429, refused.text);
      assert.equal(refused.body.code, "budget-day-spent");
      assert.equal(refused.body.workspace, "main", refused.text);
      assert.equal((await httpCall(node!.url, TOKEN, "GET", `/v1/invocations/api:operator/${key}`)).status, 404);
    };
    const asked = model.requests.length;
    await refusedHere();
    // Another workspace's day is its own.
    model.load({ turns: [{ text: "Elsewhere." }] });
    const elsewhere = await invoke(randomUUID(), { provider: "claude", prompt: "hello", workspace: "other" });
    assert.equal(elsewhere.body.status, "recorded", elsewhere.text);
    await node!.kill();
    node = await start();
    await refusedHere();
    assert.equal(model.requests.length - asked, 1, "a refused run reached the model");
  });
});
