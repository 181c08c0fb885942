/**
 * The decision point attacked from inside a real confined run (issue 31): the real pinned Claude
 * Code against the scripted model, whose Bash command runs test/fixtures/attacks/decide-port.cjs
 * in the sandbox. Through the run's own decision port (127.0.0.2:3129, the bridge to its decide
 * socket) it replays a decided call id and names another run's, registers an allow ahead of the
 * model for the call ids it may use next, floods the port, and tries it as a way to anything else.
 * Then the model issues `git push`, which the policy denies: it must still be denied.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { randomUUID } from "node:crypto";
import { copyFileSync, existsSync, mkdirSync, readFileSync, realpathSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { wardenInProcess } from "../support/cli.js";
import { bash, gitIn, makeRepository, remoteHeadOf, toolCalls, type PolicyEntry, scriptedProvider, scriptedNodeEnv } from "./policy-support.js";
import { ScriptedModelServer } from "../../src/scripted-model/index.js";
import { httpCall, repo, startNode, type CliRun, type NodeProcess, runJournal, assertRunVerified } from "../support/node.js";
import { tempDir } from "../support/temp.js";

const TOKEN = "decide-attacks-operator-token-0123456789abcdef";
const RUN_WAIT_S = 180;
const PUSH_REASON = "pushing is for humans, not agents";
const ASK_REASON = "cleaning the build needs a human";
const POLICY = `@id("ask-rm")
@ask
@reason("${ASK_REASON}")
forbid(principal, action == Action::"shell", resource) when { resource.command like "*rm -rf build*" };

@id("no-push")
@reason("${PUSH_REASON}")
forbid(principal, action == Action::"shell", resource) when { resource.command like "*git push*" };

@id("operators")
permit(principal, action, resource) when { principal.role == "operator" };
`;

const cli = join(repo, "node_modules", ".bin", "claude");
const bwrapUsable = ["/usr/bin/bwrap", "/bin/bwrap"].some((p) => existsSync(p) && spawnSync(p, ["--unshare-all", "--ro-bind", "/", "/", "true"]).status === 0);
const skip = !existsSync(cli) ? `${cli} is not installed` : !bwrapUsable ? "bubblewrap cannot start here: no confined run to attack from" : false;

interface Attacks {
  error?: string;
  replayOwn: string;
  otherRun: { status: string };
  preRegistered: { id: string; reply: string }[];
  flood: { huge: string; during: { status: string; answer: string } };
  connect: string;
  absolute: string;
  absoluteDecide: string;
  otherPath: string;
  hostHeader: string;
}

describe("the decision port attacked from inside a confined claude run", { skip }, () => {
  const root = tempDir("decide-attacks");
  const home = join(root, "home");
  const governed = join(root, "governed");
  let model: ScriptedModelServer;
  let node: NodeProcess | undefined;
  const git = gitIn(root);
  const warden = (args: readonly string[]): Promise<CliRun> => wardenInProcess(args, { env: { WARDEN_URL: node!.url, WARDEN_TOKEN: TOKEN }, cwd: root });
  const invoke = (prompt: string): Promise<CliRun> =>
    warden(["invoke", "--id", randomUUID(), "--provider", "claude", "--workspace", "governed", "--wait", String(RUN_WAIT_S), "--json", "--", prompt]);

  before(async () => {
    makeRepository(git, governed);
    copyFileSync(join(repo, "test", "fixtures", "attacks", "decide-port.cjs"), join(governed, "attack.cjs"));
    mkdirSync(home, { mode: 0o700 });
    writeFileSync(join(home, "repo.cedar"), POLICY, { mode: 0o600 });
    model = await ScriptedModelServer.start({ script: { turns: [] } });
    node = await startNode({
      home,
      config: {
        workspaces: { governed },
        defaultWorkspace: "governed",
        workspacePermissions: { governed: "full" },
        policies: { governed: "repo.cedar" },
        providers: { claude: scriptedProvider(cli, model.url) },
        logLevel: "warn",
      },
      env: scriptedNodeEnv(root, TOKEN),
      timeoutMs: 60_000,
    });
  });
  after(async () => {
    await node?.kill();
    await model.close();
    rmSync(root, { recursive: true, force: true });
  });

  it("replay, another run's call, a pre-registered allow, a flood, and other targets: the run's own calls are decided, the denied push stays denied, nothing else answers", async () => {
    // Another run first: a call id of its own for the attack to name.
    model.load({ turns: [bash("echo first > first.txt"), { text: "Done." }] });
    const first = await invoke("write a file");
    assert.equal(first.code, 0, first.stdout + first.stderr);
    const firstRun = (JSON.parse(first.stdout) as { run_id: string }).run_id;
    const firstEntries = await runJournal<PolicyEntry>(node!.url, TOKEN, firstRun);
    const otherCall = toolCalls(firstEntries)[0]!.id;

    const from = model.requests.length;
    // The scripted model names a tool call `toolu_scripted_<request seq>`: the attack's call is the
    // next request's, and the push one of the few after it.
    const own = `toolu_scripted_${from}`;
    const next = [1, 2, 3, 4].map((i) => `toolu_scripted_${from + i}`);
    const node20 = realpathSync(process.execPath);
    const remoteBefore = remoteHeadOf(git, governed);
    model.load({
      turns: [bash(`'${node20}' attack.cjs attacks.json ${own} ${otherCall.replace(/^[a-z]+:/, "")} ${next.join(",")}`), bash("cd work && git push origin main"), { text: "Done." }],
    });
    const run = await invoke("attack the decision point, then publish");
    assert.equal(run.code, 0, run.stdout + run.stderr);
    const view = JSON.parse(run.stdout) as { run_id: string; result: { refused?: { tool: string; reason: string }[] } };
    const attacks = JSON.parse(readFileSync(join(governed, "attacks.json"), "utf8")) as Attacks;
    assert.equal(attacks.error, undefined, attacks.error);

    // (a) a decided call is decided once; another run's call id decides nothing there.
    assert.match(attacks.replayOwn, /"permissionDecision":"deny".*decided already/, JSON.stringify(attacks));
    assert.equal(attacks.otherRun.status, "200");
    assert.equal((await runJournal<PolicyEntry>(node!.url, TOKEN, firstRun)).length, firstEntries.length, "the other run's journal changed");
    // (b) the pre-registered allow did not cover the push: the remote is unchanged, the call refused, its denial journaled.
    assert.equal(remoteHeadOf(git, governed), remoteBefore, "the push reached the remote");
    assert.ok(view.result.refused?.some((r) => r.tool === "Bash"), run.stdout);
    const entries = await runJournal<PolicyEntry>(node!.url, TOKEN, view.run_id);
    const push = toolCalls(entries).find((c) => c.started !== undefined && c.id !== `claude:${own}`);
    assert.ok(push !== undefined, `no effect of the push in the journal: ${JSON.stringify(toolCalls(entries))}`);
    assert.notEqual(push.finished?.event.outcome, "succeeded", JSON.stringify(push));
    // (c) under the flood, the run's own call was decided; the node still serves.
    assert.equal(attacks.flood.during.status, "200", JSON.stringify(attacks.flood));
    assert.match(attacks.flood.huge, /"permissionDecision":"deny".*over 16777216 bytes/, attacks.flood.huge);
    assert.equal((await httpCall(node!.url, TOKEN, "GET", "/healthz")).status, 200);
    // (d) nothing but the decide endpoint answers: no tunnel, no proxying, no other service.
    assert.doesNotMatch(attacks.connect, /^HTTP\/1\.1 2/, attacks.connect);
    for (const status of [attacks.absolute, attacks.absoluteDecide, attacks.otherPath, attacks.hostHeader]) assert.match(status, /^(4\d\d|none)$/, JSON.stringify(attacks));
    await assertRunVerified(node!.url, TOKEN, view.run_id);
  });

  it("a forged ask (a call the CLI never made) does not take the place of the CLI's own: the run parks on the call the CLI stopped on", async () => {
    mkdirSync(join(governed, "build"), { recursive: true });
    writeFileSync(join(governed, "build", "out.txt"), "built\n");
    const from = model.requests.length;
    const node20 = realpathSync(process.execPath);
    model.load({ turns: [bash(`'${node20}' attack.cjs forge forged.json toolu_forged_1 build`), bash("rm -rf build"), { text: "Cleaned." }] });
    const id = randomUUID();
    const posted = await httpCall(node!.url, TOKEN, "POST", "/v1/invocations", { headers: { "idempotency-key": id }, body: { provider: "claude", workspace: "governed", prompt: "clean the build" } });
    assert.equal(posted.status, 202, JSON.stringify(posted.body));
    const scope = String(posted.body.scope);
    const deadline = Date.now() + RUN_WAIT_S * 1000;
    let state: { status?: string; parked?: { call_id: string } } = {};
    while (Date.now() < deadline) {
      state = (await httpCall(node!.url, TOKEN, "GET", `/v1/invocations/${encodeURIComponent(scope)}/${id}`)).body as typeof state;
      if (state.status !== "in_progress") break;
      await new Promise((r) => setTimeout(r, 200));
    }
    // The forged ask was answered (defer) and journaled: it is the agent's to ask, not the CLI's to act on.
    assert.match(readFileSync(join(governed, "forged.json"), "utf8"), /defer/);
    assert.equal(state.status, "awaiting_approval", `waited ${RUN_WAIT_S} s for the run to park; last seen ${JSON.stringify(state)}`);
    assert.equal(state.parked?.call_id, `claude:toolu_scripted_${from + 1}`, JSON.stringify(state));
    assert.ok(existsSync(join(governed, "build", "out.txt")), "the asked call ran before its approval");
  });
});
