/**
 * "Ask parks the run" (issue 31 item 3) with the real pinned Claude Code under a real `warden
 * serve`, confined, against the scripted model. The policy asks before `rm -rf`: the run's hook is
 * answered `defer`, Claude Code stops with the call unrun, and the run parks (`awaiting_approval`,
 * no agent process). An operator's approval resumes the same CLI session in the same run; a denial
 * ends it with the call refused; a node killed while a run is parked leaves it parked; an approval
 * that waits past its deadline is a denial.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { ScriptedModelServer } from "../../src/scripted-model/index.js";
import { wardenInProcess } from "../support/cli.js";
import { httpCall, repo, startNode, type NodeProcess, type CliRun, runJournal, assertRunVerified } from "../support/node.js";
import { tempDir } from "../support/temp.js";
import { ASK_POLICY, ASK_REASON, ASK_SCRIPT, scriptedProvider, scriptedNodeEnv } from "./policy-support.js";
import { launchChromium, seriousViolations } from "../support/browser.js";
import { buildConsole, logInWithToken, UI_WAIT_MS } from "../e2e/console-support.js";

const TOKEN = "ask-agents-operator-token-0123456789abcdef";
const POLICY = ASK_POLICY;
const SCRIPT = ASK_SCRIPT;

interface Entry {
  entry: { seq: number; event: { type: string; effect_id?: string; call_id?: string; kind?: string; decision?: string; outcome?: string; by?: { name: string; role: string }; reason?: string; session?: string } };
}
interface View {
  status: string;
  run_id?: string;
  result?: { refused?: { tool: string; reason: string }[]; error?: { code: string }; answer?: string };
  parked?: { call_id: string; tool: string; policies: string[]; deadline: string };
  code?: string;
}

const cli = join(repo, "node_modules", ".bin", "claude");
const skip = existsSync(cli) ? false : `${cli} is not installed (npm install puts the pinned CLI there)`;
/** How long a test waits for a run to reach a state (a loaded machine runs the real CLI slowly). */
const STATE_WAIT_MS = 240_000;

describe("real claude: ask parks the run", { skip }, () => {
  const root = tempDir("agents-ask");
  let model: ScriptedModelServer;

  const config = (home: string, workspace: string, extra: Record<string, unknown> = {}): Record<string, unknown> => ({
    workspaces: { governed: workspace },
    defaultWorkspace: "governed",
    workspacePermissions: { governed: "full" },
    policies: { governed: "repo.cedar" },
    providers: { claude: scriptedProvider(cli, model.url) },
    logLevel: "warn",
    ...extra,
  });
  const start = async (name: string, extra: Record<string, unknown> = {}): Promise<{ node: NodeProcess; home: string; workspace: string }> => {
    const home = join(root, `${name}-home`);
    const workspace = join(root, `${name}-ws`);
    mkdirSync(join(workspace, "build"), { recursive: true });
    writeFileSync(join(workspace, "build", "out.txt"), "built\n");
    mkdirSync(home, { mode: 0o700 });
    writeFileSync(join(home, "repo.cedar"), POLICY, { mode: 0o600 });
    const node = await startNode({ home, config: config(home, workspace, extra), env: nodeEnv(), timeoutMs: 60_000 });
    return { node, home, workspace };
  };
  const nodeEnv = (): Record<string, string> => (scriptedNodeEnv(root, TOKEN));

  const invoke = async (node: NodeProcess, prompt: string): Promise<{ scope: string; id: string; run_id: string }> => {
    const id = randomUUID();
    const reply = await httpCall(node.url, TOKEN, "POST", "/v1/invocations", { headers: { "idempotency-key": id }, body: { provider: "claude", prompt } });
    assert.equal(reply.status, 202, JSON.stringify(reply.body));
    return { scope: String(reply.body.scope), id, run_id: String(reply.body.run_id) };
  };
  const view = async (node: NodeProcess, scope: string, id: string): Promise<View> =>
    (await httpCall(node.url, TOKEN, "GET", `/v1/invocations/${encodeURIComponent(scope)}/${id}`)).body as unknown as View;
  /** Polls the invocation until `done` says so; fails naming the state it waited for and the last one seen. */
  const until = async (node: NodeProcess, scope: string, id: string, what: string, done: (v: View) => boolean): Promise<View> => {
    const deadline = Date.now() + STATE_WAIT_MS;
    let last: View | undefined;
    while (Date.now() < deadline) {
      last = await view(node, scope, id);
      if (done(last)) return last;
      await new Promise((r) => setTimeout(r, 200));
    }
    throw new Error(`waited ${STATE_WAIT_MS} ms for ${scope}/${id} to be ${what}; last seen ${JSON.stringify(last)}\n${node.stderr()}`);
  };
  const parkedOf = async (node: NodeProcess, scope: string, id: string): Promise<View> => {
    const state = await until(node, scope, id, "past in_progress", (v) => v.status !== "in_progress");
    assert.equal(state.status, "awaiting_approval", JSON.stringify(state));
    return state;
  };
  const endedOf = (node: NodeProcess, scope: string, id: string): Promise<View> => until(node, scope, id, "recorded", (v) => v.status === "recorded" || v.status === "unresolved");
  const approve = (node: NodeProcess, scope: string, id: string, body: Record<string, unknown>) =>
    httpCall(node.url, TOKEN, "POST", `/v1/invocations/${encodeURIComponent(scope)}/${id}/approval`, { body });
  const warden = (node: NodeProcess, args: readonly string[]): Promise<CliRun> => wardenInProcess(args, { env: { WARDEN_URL: node.url, WARDEN_TOKEN: TOKEN }, cwd: root });
  const events = async (node: NodeProcess, runId: string): Promise<Entry["entry"]["event"][]> => (await runJournal<Entry>(node.url, TOKEN, runId)).map((e) => e.entry.event);

  before(async () => {
    mkdirSync(join(root, "agent-home"), { recursive: true });
    model = await ScriptedModelServer.start({ script: { turns: [] } });
    // Before the nodes start: they serve the console they find built then.
    buildConsole();
  });
  after(async () => {
    await model.close();
  });

  it("parks on the ask (listed, no agent left), and an approval in the console (Chromium) resumes the same session to completion: build/ removed, one continuation", async () => {
    const { node, workspace } = await start("approve");
    try {
      model.load({ turns: SCRIPT });
      const from = model.requests.length;
      const run = await invoke(node, "clean the build");
      const parked = await parkedOf(node, run.scope, run.id);
      assert.equal(parked.run_id, run.run_id);
      assert.equal(parked.parked?.tool, "Bash");
      assert.deepEqual(parked.parked?.policies, ["ask-rm"]);
      assert.ok(existsSync(join(workspace, "build", "out.txt")), "the asked call ran before its approval");
      const listed = await httpCall(node.url, TOKEN, "GET", "/v1/invocations?status=awaiting_approval");
      assert.deepEqual((listed.body.items as { id: string }[]).map((i) => i.id), [run.id]);
      const queue = await httpCall(node.url, TOKEN, "GET", "/v1/invocations?status=unresolved");
      assert.deepEqual(queue.body.items, [], "a parked run is not unresolved");
      assert.equal(model.requests.length - from, 1);

      const browser = await launchChromium();
      try {
        const page = await (await browser.newContext({ viewport: { width: 1280, height: 860 } })).newPage();
        await logInWithToken(page, node.url, TOKEN);
        // The work queue beside Unresolved lists the parked run.
        await page.goto(`${node.url}/ui/invocations`);
        await page.getByRole("link", { name: "Awaiting approval" }).click();
        const row = page.getByRole("link", { name: new RegExp(run.id) });
        await row.waitFor({ timeout: UI_WAIT_MS });
        assert.deepEqual(await seriousViolations(page), []);
        await row.click();
        const card = page.getByRole("region", { name: "Awaiting approval" });
        await card.waitFor({ timeout: UI_WAIT_MS });
        assert.match((await card.textContent()) ?? "", /Bash call its policy asks about \(ask-rm\)/);
        assert.deepEqual(await seriousViolations(page), []);
        await card.getByLabel(/Reason/).fill("build/ is generated");
        await card.getByRole("button", { name: "Approve" }).click();
        await card.waitFor({ state: "detached", timeout: UI_WAIT_MS });
      } finally {
        await browser.close();
      }
      const ended = await endedOf(node, run.scope, run.id);
      assert.equal(ended.status, "recorded", `${JSON.stringify(ended)}\n${JSON.stringify(await events(node, run.run_id))}\n${JSON.stringify((await httpCall(node.url, TOKEN, "GET", `/v1/runs/${run.run_id}/verification`)).body)}`);
      assert.equal(ended.run_id, run.run_id, "the approval went on in another run");
      assert.equal(ended.result?.answer, "Removed build/.");
      assert.equal(existsSync(join(workspace, "build")), false, "build/ is still there");
      assert.equal(model.requests.length - from, 2, "the model did not see exactly one continuation");

      const journal = await events(node, run.run_id);
      const types = journal.map((e) => e.type);
      const decision = types.indexOf("policy.decision");
      const parkedAt = types.indexOf("run.parked");
      const approval = types.indexOf("policy.approval");
      const callStart = journal.findIndex((e) => e.type === "effect.started" && e.kind === "tool");
      assert.ok(decision >= 0 && decision < parkedAt && parkedAt < approval && approval < callStart, types.join(" "));
      assert.equal(journal[decision]!.decision, "ask");
      assert.deepEqual(journal[approval]!.by, { name: "operator", role: "operator" });
      assert.equal(journal[approval]!.reason, "build/ is generated");
      assert.equal(journal.find((e) => e.type === "effect.finished" && e.effect_id === journal[callStart]!.effect_id)?.outcome, "succeeded");
      await assertRunVerified(node.url, TOKEN, run.run_id);

      // The same answer again is a replay; a different one is refused.
      assert.equal((await approve(node, run.scope, run.id, { decision: "allow" })).status, 200);
      const other = await approve(node, run.scope, run.id, { decision: "deny" });
      assert.equal(other.status, 409);
      assert.equal(other.body.code, "approval-conflict");
    } finally {
      await node.kill();
    }
  });

  it("a denial (warden deny) ends the run with the call refused: build/ still there, a recorded failure", async () => {
    const { node, workspace } = await start("deny");
    try {
      model.load({ turns: SCRIPT });
      const from = model.requests.length;
      const run = await invoke(node, "clean the build");
      await parkedOf(node, run.scope, run.id);
      const listed = await warden(node, ["invocations", "--status", "awaiting_approval"]);
      assert.equal(listed.code, 0, listed.stderr);
      assert.match(listed.stdout, new RegExp(`^awaiting_approval +${run.scope} ${run.id}`, "m"));
      const shown = await warden(node, ["invocations", "show", run.scope, run.id]);
      assert.match(shown.stdout, /waits for +an operator's approval of Bash/);
      const denied = await warden(node, ["deny", run.scope, run.id, "--reason", "keep it"]);
      assert.equal(denied.code, 0, denied.stdout + denied.stderr);
      assert.match(denied.stdout, /\(denied\)/);
      const ended = await endedOf(node, run.scope, run.id);
      assert.equal(ended.status, "recorded", JSON.stringify(ended));
      assert.equal(ended.result?.error?.code, "approval-denied");
      assert.match(ended.result?.refused?.[0]?.reason ?? "", /policy ask: denied by operator: keep it/);
      assert.ok(existsSync(join(workspace, "build", "out.txt")), "the denied call ran");
      assert.equal(model.requests.length - from, 1, "the denied run went on with the model");
      const journal = await events(node, run.run_id);
      assert.equal(journal.find((e) => e.type === "policy.approval")?.decision, "deny");
      assert.equal(journal.filter((e) => e.type === "effect.started" && e.kind === "tool").length, 0);
      await assertRunVerified(node.url, TOKEN, run.run_id);
    } finally {
      await node.kill();
    }
  });

  it("kill -9 of the node while parked: after restart still parked, and approving completes it exactly once", async () => {
    const { node, home, workspace } = await start("restart");
    let second: NodeProcess | undefined;
    try {
      model.load({ turns: SCRIPT });
      const from = model.requests.length;
      const run = await invoke(node, "clean the build");
      await parkedOf(node, run.scope, run.id);
      await node.kill();
      second = await startNode({ home, config: config(home, workspace), env: nodeEnv(), timeoutMs: 60_000 });
      const still = await view(second, run.scope, run.id);
      assert.equal(still.status, "awaiting_approval", JSON.stringify(still));
      const queue = await httpCall(second.url, TOKEN, "GET", "/v1/invocations?status=unresolved");
      assert.deepEqual(queue.body.items, [], "the restarted node calls the parked run unresolved");
      assert.ok(existsSync(join(workspace, "build", "out.txt")));
      const approved = await approve(second, run.scope, run.id, { decision: "allow" });
      assert.equal(approved.status, 202, JSON.stringify(approved.body));
      const ended = await endedOf(second, run.scope, run.id);
      assert.equal(ended.status, "recorded", JSON.stringify(ended));
      assert.equal(existsSync(join(workspace, "build")), false);
      assert.equal(model.requests.length - from, 2, "not exactly one continuation");
      assert.equal((await approve(second, run.scope, run.id, { decision: "allow" })).status, 200);
      assert.equal(model.requests.length - from, 2, "a replayed approval ran the agent again");
      await assertRunVerified(second.url, TOKEN, run.run_id);
    } finally {
      await second?.kill();
      await node.kill().catch(() => undefined);
    }
  });

  it("in a git workspace the approved run goes on in its own worktree: the call runs there, the change set shows it, the workspace is untouched", async () => {
    const { node, workspace } = await start("git");
    try {
      const git = (...args: string[]): string =>
        execFileSync("git", ["-c", "user.name=t", "-c", "user.email=t@example.invalid", ...args], { cwd: workspace, encoding: "utf8", env: { ...process.env, GIT_CONFIG_NOSYSTEM: "1", HOME: root } });
      git("init", "-q", "-b", "main");
      git("add", "-A");
      git("commit", "-q", "-m", "built");
      model.load({ turns: SCRIPT });
      const run = await invoke(node, "clean the build");
      await parkedOf(node, run.scope, run.id);
      const approved = await approve(node, run.scope, run.id, { decision: "allow" });
      assert.equal(approved.status, 202, JSON.stringify(approved.body));
      const ended = await endedOf(node, run.scope, run.id);
      assert.equal(ended.status, "recorded", `${JSON.stringify(ended)}\n${node.stderr()}`);
      assert.ok(existsSync(join(workspace, "build", "out.txt")), "the run wrote to the workspace instead of its worktree");
      const stat = await httpCall(node.url, TOKEN, "GET", `/v1/runs/${run.run_id}/changes?stat`);
      assert.equal(stat.status, 200, JSON.stringify(stat.body));
      assert.deepEqual((stat.body.files as { path: string; status: string }[]).map((f) => [f.path, f.status]), [["build/out.txt", "deleted"]]);
      await assertRunVerified(node.url, TOKEN, run.run_id);
    } finally {
      await node.kill();
    }
  });

  it("an approval that waits past its deadline is a denial, journaled as the node's", async () => {
    const { node, workspace } = await start("deadline", { approvalDeadlineS: 2 });
    try {
      model.load({ turns: SCRIPT });
      const run = await invoke(node, "clean the build");
      const ended = await endedOf(node, run.scope, run.id);
      assert.equal(ended.status, "recorded", JSON.stringify(ended));
      assert.equal(ended.result?.error?.code, "approval-denied", JSON.stringify(ended));
      assert.ok(existsSync(join(workspace, "build", "out.txt")));
      const journal = await events(node, run.run_id);
      assert.ok(journal.some((e) => e.type === "run.parked"), "the run never parked");
      assert.deepEqual(journal.find((e) => e.type === "policy.approval")?.by, { name: "deadline", role: "node" });
      await assertRunVerified(node.url, TOKEN, run.run_id);
    } finally {
      await node.kill();
    }
  });
});
