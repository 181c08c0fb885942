/**
 * "Ask parks the run" on a fleet (issue 31): the real pinned Claude Code under two real `warden
 * serve --postgres` nodes on one throwaway PostgreSQL, confined, against the scripted model. A run
 * parks on node A; A is killed (SIGKILL); the approval is posted to node B, which takes the run up
 * (its claim, its journal, its session transcript, all from the database) and resumes the same CLI
 * session to completion, exactly once. A git workspace's run, whose worktree stays on its parker, is
 * refused an approval elsewhere and denied there.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { ScriptedModelServer } from "../../src/scripted-model/index.js";
import { httpCall, repo, startNode, type NodeProcess, assertRunVerified, runJournal } from "../support/node.js";
import { startTestPostgres, type TestPostgres } from "../support/postgres.js";
import { tempDir } from "../support/temp.js";
import { ASK_POLICY, ASK_SCRIPT, scriptedProvider, scriptedNodeEnv } from "./policy-support.js";

const TOKEN = "ask-fleet-operator-token-0123456789abcdef";
const POLICY = ASK_POLICY;
const SCRIPT = ASK_SCRIPT;
/** How long the test waits for a run to reach a state (a loaded machine runs the real CLI slowly). */
const STATE_WAIT_MS = 240_000;

interface View {
  status: string;
  run_id?: string;
  parked?: { call_id: string };
}

const cli = join(repo, "node_modules", ".bin", "claude");
const skip = existsSync(cli) ? false : `${cli} is not installed (npm install puts the pinned CLI there)`;

describe("real claude on a fleet: a run parked on a killed node is approved on another", { skip }, () => {
  const root = tempDir("agents-ask-fleet");
  const workspace = join(root, "ws");
  let model: ScriptedModelServer;
  let pg: TestPostgres;
  let url: string;

  const gitWorkspace = join(root, "git-ws");
  const start = (name: string): Promise<NodeProcess> => {
    const home = join(root, `${name}-home`);
    mkdirSync(home, { mode: 0o700 });
    writeFileSync(join(home, "repo.cedar"), POLICY, { mode: 0o600 });
    return startNode({
      home,
      args: ["--postgres", url],
      config: {
        // One workspace path for both nodes, as a fleet's nodes share the repository they work on.
        workspaces: { governed: workspace, repo: gitWorkspace },
        defaultWorkspace: "governed",
        workspacePermissions: { governed: "full", repo: "full" },
        policies: { governed: "repo.cedar", repo: "repo.cedar" },
        providers: { claude: scriptedProvider(cli, model.url) },
        logLevel: "warn",
      },
      env: scriptedNodeEnv(root, TOKEN),
      timeoutMs: 60_000,
    });
  };
  const view = async (node: NodeProcess, scope: string, id: string): Promise<View> =>
    (await httpCall(node.url, TOKEN, "GET", `/v1/invocations/${encodeURIComponent(scope)}/${id}`)).body as unknown as View;
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
  const approve = (node: NodeProcess, scope: string, id: string) =>
    httpCall(node.url, TOKEN, "POST", `/v1/invocations/${encodeURIComponent(scope)}/${id}/approval`, { body: { decision: "allow" } });

  before(async () => {
    mkdirSync(join(root, "agent-home"), { recursive: true });
    mkdirSync(join(workspace, "build"), { recursive: true });
    writeFileSync(join(workspace, "build", "out.txt"), "built\n");
    mkdirSync(join(gitWorkspace, "build"), { recursive: true });
    writeFileSync(join(gitWorkspace, "build", "out.txt"), "built\n");
    const git = (...args: string[]): string =>
      execFileSync("git", ["-c", "user.name=t", "-c", "user.email=t@example.invalid", ...args], { cwd: gitWorkspace, encoding: "utf8", env: { ...process.env, GIT_CONFIG_NOSYSTEM: "1", HOME: root } });
    git("init", "-q", "-b", "main");
    git("add", "-A");
    git("commit", "-q", "-m", "built");
    pg = await startTestPostgres();
    url = await pg.createDatabase("ask-fleet");
    model = await ScriptedModelServer.start({ script: { turns: [] } });
  });
  after(async () => {
    await model.close();
    await pg.stop();
  });

  it("parks on A, A is kill -9ed, B's approval resumes it: recorded once, one continuation, journal verified", async () => {
    const [a, b] = await Promise.all([start("a"), start("b")]);
    try {
      model.load({ turns: SCRIPT });
      const from = model.requests.length;
      const id = randomUUID();
      const reply = await httpCall(a.url, TOKEN, "POST", "/v1/invocations", { headers: { "idempotency-key": id }, body: { provider: "claude", prompt: "clean the build" } });
      assert.equal(reply.status, 202, JSON.stringify(reply.body));
      const scope = String(reply.body.scope);
      const runId = String(reply.body.run_id);
      const parked = await until(a, scope, id, "past in_progress", (v) => v.status !== "in_progress");
      assert.equal(parked.status, "awaiting_approval", JSON.stringify(parked));
      assert.equal(model.requests.length - from, 1);
      await a.kill();
      assert.equal((await view(b, scope, id)).status, "awaiting_approval", "B does not see the run A parked as parked");
      assert.ok(existsSync(join(workspace, "build", "out.txt")), "the asked call ran before its approval");

      const approved = await approve(b, scope, id);
      assert.equal(approved.status, 202, JSON.stringify(approved.body));
      const ended = await until(b, scope, id, "recorded", (v) => v.status === "recorded" || v.status === "unresolved");
      assert.equal(ended.status, "recorded", `${JSON.stringify(ended)}\n${b.stderr()}`);
      assert.equal(existsSync(join(workspace, "build")), false, "the approved call did not run");
      assert.equal(model.requests.length - from, 2, "not exactly one continuation");
      assert.equal((await approve(b, scope, id)).status, 200, "the same answer again is not a replay");
      assert.equal(model.requests.length - from, 2, "a replayed approval ran the agent again");
      const events = (await runJournal<{ entry: { event: { type: string; by?: { name: string } } } }>(b.url, TOKEN, runId)).map((e) => e.entry.event);
      assert.equal(events.filter((e) => e.type === "run.parked").length, 1);
      assert.equal(events.filter((e) => e.type === "policy.approval").length, 1);
      await assertRunVerified(b.url, TOKEN, runId);
    } finally {
      await b.kill();
      await a.kill().catch(() => undefined);
    }
  });

  it("a git workspace's run parked on a killed node: B refuses to approve it without its worktree (nothing written, still parked), and B's denial ends it", async () => {
    const [a, b] = await Promise.all([start("git-a"), start("git-b")]);
    try {
      model.load({ turns: SCRIPT });
      const from = model.requests.length;
      const id = randomUUID();
      const reply = await httpCall(a.url, TOKEN, "POST", "/v1/invocations", { headers: { "idempotency-key": id }, body: { provider: "claude", prompt: "clean the build", workspace: "repo" } });
      assert.equal(reply.status, 202, JSON.stringify(reply.body));
      const scope = String(reply.body.scope);
      const runId = String(reply.body.run_id);
      const parked = await until(a, scope, id, "past in_progress", (v) => v.status !== "in_progress");
      assert.equal(parked.status, "awaiting_approval", JSON.stringify(parked));
      await a.kill();
      const before = await runJournal<{ entry: { event: { type: string } } }>(b.url, TOKEN, runId);

      const refused = await approve(b, scope, id);
      assert.equal(refused.status, 409, JSON.stringify(refused.body));
      assert.equal(refused.body.code, "approval-worktree-elsewhere");
      assert.equal((await view(b, scope, id)).status, "awaiting_approval", "a refused approval moved the run");
      assert.equal((await runJournal(b.url, TOKEN, runId)).length, before.length, "a refused approval wrote to the journal");
      assert.equal(model.requests.length - from, 1, "a refused approval ran the agent");
      assert.ok(existsSync(join(gitWorkspace, "build", "out.txt")), "the workspace itself was changed");

      const denied = await httpCall(b.url, TOKEN, "POST", `/v1/invocations/${encodeURIComponent(scope)}/${id}/approval`, { body: { decision: "deny", reason: "not on this node" } });
      assert.equal(denied.status, 202, JSON.stringify(denied.body));
      const ended = await until(b, scope, id, "recorded", (v) => v.status === "recorded" || v.status === "unresolved");
      assert.equal(ended.status, "recorded", `${JSON.stringify(ended)}\n${b.stderr()}`);
      assert.equal(model.requests.length - from, 1, "a denial ran the agent");
      assert.ok(existsSync(join(gitWorkspace, "build", "out.txt")));
      await assertRunVerified(b.url, TOKEN, runId);
    } finally {
      await b.kill();
      await a.kill().catch(() => undefined);
    }
  });
});
