/**
 * The real Claude Code and Codex CLIs (pinned devDependencies) run under a real `warden serve`
 * against the scripted model server on loopback (src/scripted-model), driven by the real
 * `warden invoke` and `warden push`. Nothing leaves loopback: the node's model endpoint is the
 * scripted server, non-essential traffic is off, and each run has a private HOME of its own.
 *
 * The node user's home holds a planted Claude and Codex configuration (hooks that write markers,
 * instructions with a marker, a rule that would let Claude read any file), and the workspaces hold
 * a repository's own (`.claude/settings.json` hooks, `.mcp.json`, `CLAUDE.md`, `.codex/`): none of
 * it may run or reach the model, except the trusted workspace's own. Everything lives under the
 * temporary directory, where Codex refused to create its sandbox helper before each run had a
 * TMPDIR of its own.
 *
 * One scenario list for both CLIs (claude.test.ts, codex.test.ts); what differs is the shell
 * tool's name and input, and where the skill appears in the model's request.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { wardenInProcess } from "../support/cli.js";
import { ScriptedModelServer, type ScriptTurn } from "../../src/scripted-model/index.js";
import { httpCall, repo, startNode, type CliRun, type NodeProcess, runJournal, assertRunVerified } from "../support/node.js";
import { identityOf, isAlive, killIfStillRecorded, type ProcessIdentity } from "../support/processes.js";
import { waitFor } from "../support/wait.js";
import { tempDir } from "../support/temp.js";

export type RealProvider = "claude" | "codex";

const TOKEN = "real-agents-operator-token-0123456789abcdef";
const KEY_VAR = "SCRIPTED_MODEL_KEY";
const KEY = "sk-scripted-not-a-secret";
const SKILL_DESCRIPTION = "Greets the rehearsal operator by name, warmly and briefly.";
/** Generous: a real CLI on a machine at load 8 starts in seconds, not tens of seconds. */
const RUN_WAIT_S = 120;

/**
 * The shell tool call of each CLI's model-facing tool set. `yieldMs`: codex hands a command still
 * running back to the model after `yield_time_ms` (default 10 s, at most 30 s), a model request of
 * the CLI itself that a test of requests after a node's death must not see. Only where needed:
 * codex 0.171 prints no command_execution item for a quick command that fails in its sandbox when
 * the call names a yield_time_ms.
 */
function shell(provider: RealProvider, command: string, yieldMs?: number): ScriptTurn {
  return provider === "claude"
    ? { tool: { name: "Bash", input: { command, description: "run a command" } } }
    : { tool: { name: "exec_command", input: { cmd: command, ...(yieldMs === undefined ? {} : { yield_time_ms: yieldMs }) } } };
}

interface JournalEntry {
  entry: { seq: number; event: { type: string; effect_id?: string; kind?: string; name?: string; outcome?: string; reason?: string; detail?: Record<string, unknown> } & Record<string, unknown> };
}

export function describeRealAgent(provider: RealProvider): void {
  const cli = join(repo, "node_modules", ".bin", provider);
  const skip = existsSync(cli) ? false : `${cli} is not installed (npm install puts the pinned CLI there)`;

  describe(`real ${provider} under warden against a scripted model`, { skip }, () => {
    const root = tempDir(`agents-${provider}`);
    const home = join(root, "home");
    const workspace = join(root, "workspace");
    const readOnly = join(root, "read-only");
    const agentHome = join(root, "agent-home");
    const trustedWorkspace = join(root, "trusted");
    // Hooks and MCP servers write their markers relative to their working directory, the run's
    // workspace: the one place a confined run can write, so a marker missing means "did not run".
    const markers = (dir: string): string => join(dir, MARKERS);
    const markersFound = (): string[] => [workspace, trustedWorkspace].flatMap((d) => readdirSync(markers(d)));
    const bundleDir = join(root, "rehearsal");
    let model: ScriptedModelServer;
    let node: NodeProcess | undefined;
    /** processes a failed test may leave behind */
    /** processes a test saw running that may outlive it, as they were then */
    const leftovers: ProcessIdentity[] = [];

    const config = (): Record<string, unknown> => ({
      workspaces: { main: workspace, ro: readOnly, trusted: trustedWorkspace },
      trustedWorkspaces: ["trusted"],
      defaultWorkspace: "main",
      workspacePermissions: { ro: "read-only" },
      providers: {
        [provider]: {
          command: cli,
          // One retry: a dropped connection is retried once, then the CLI reports the error.
          model: { baseUrl: provider === "claude" ? model.url : `${model.url}/v1`, apiKeyEnv: KEY_VAR, name: "scripted-model", retries: 1 },
        },
      },
      logLevel: "warn",
    });
    const start = async (): Promise<NodeProcess> =>
      startNode({
        home,
        config: config(),
        env: { WARDEN_TOKEN: TOKEN, [KEY_VAR]: KEY, HOME: agentHome, XDG_CONFIG_HOME: join(agentHome, ".config") },
        timeoutMs: 60_000,
      });
    const warden = (args: readonly string[]): Promise<CliRun> => wardenInProcess(args, { env: { WARDEN_URL: node!.url, WARDEN_TOKEN: TOKEN }, cwd: root });
    const invoke = (id: string, prompt: string, extra: readonly string[] = []): Promise<CliRun> =>
      warden(["invoke", "--id", id, "--provider", provider, "--wait", String(RUN_WAIT_S), ...extra, "--json", "--", prompt]);
    const journal = (runId: string): Promise<JournalEntry[]> => runJournal<JournalEntry>(node!.url, TOKEN, runId);
    const verified = (runId: string): Promise<void> => assertRunVerified(node!.url, TOKEN, runId);
    const tools = (entries: JournalEntry[]): { name: string; outcome: string | undefined; detail: Record<string, unknown> | undefined }[] =>
      entries
        .filter((e) => e.entry.event.type === "effect.started" && e.entry.event.kind === "tool")
        .map((e) => {
          const finish = entries.find((f) => f.entry.event.type === "effect.finished" && f.entry.event.effect_id === e.entry.event.effect_id);
          return { name: e.entry.event.name as string, outcome: finish?.entry.event.outcome, detail: finish?.entry.event.detail };
        });
    const requestText = (from: number): string => JSON.stringify(model.requests.slice(from).map((r) => r.body));

    before(async () => {
      for (const d of [workspace, readOnly, agentHome, markers(workspace), markers(trustedWorkspace), join(bundleDir, ".claude-plugin"), join(bundleDir, "skills", "greet")]) mkdirSync(d, { recursive: true });
      plantOperatorConfig(agentHome);
      for (const [name, dir] of [["main", workspace], ["trusted", trustedWorkspace]] as const) plantWorkspaceConfig(dir, name);
      mkdirSync(home, { mode: 0o700 });
      writeFileSync(join(bundleDir, ".claude-plugin", "plugin.json"), JSON.stringify({ name: "rehearsal", version: "1.0.0", description: "rehearsal bundle" }));
      writeFileSync(join(bundleDir, "skills", "greet", "SKILL.md"), `---\nname: greet\ndescription: ${SKILL_DESCRIPTION}\n---\nSay hello to the operator.\n`);
      model = await ScriptedModelServer.start({ script: { turns: [] } });
      node = await start();
      const pushed = await warden(["push", bundleDir, "--no-progress"]);
      assert.equal(pushed.code, 0, pushed.stderr);
    });
    after(async () => {
      await node?.kill();
      for (const p of leftovers) killIfStillRecorded(p);
      await model.close();
      rmSync(root, { recursive: true, force: true });
    });

    it("the bundle's skill reaches the model, a scripted shell call runs in the workspace and is journaled, the answer is the script's; a retry asks the model nothing", async () => {
      const from = model.requests.length;
      model.load({ turns: [shell(provider, "echo hi > out.txt"), { text: "Wrote out.txt for the operator." }] });
      const id = randomUUID();
      const run = await invoke(id, "write the greeting file", ["--bundle", "rehearsal"]);
      assert.equal(run.code, 0, run.stdout + run.stderr);
      const view = JSON.parse(run.stdout) as { status: string; run_id: string; result: { answer?: string; usage?: Record<string, number>; exit_code: number } };
      assert.equal(view.status, "recorded");
      assert.equal(view.result.answer, "Wrote out.txt for the operator.");
      assert.equal(view.result.usage?.output_tokens, 20);
      // The tool really ran, in the workspace.
      assert.equal(readFileSync(join(workspace, "out.txt"), "utf8"), "hi\n");
      // The skill was in what the CLI sent the model.
      assert.ok(requestText(from).includes(SKILL_DESCRIPTION), "the skill's description is not in the model's requests");
      assert.ok(requestText(from).includes(provider === "claude" ? "rehearsal:greet" : "greet"));
      assert.equal(model.requests.length - from, 2);
      const entries = await journal(view.run_id);
      const calls = tools(entries);
      assert.equal(calls.length, 1, JSON.stringify(calls));
      assert.equal(calls[0]?.name, provider === "claude" ? "Bash" : "command_execution");
      assert.equal(calls[0]?.outcome, "succeeded");
      await verified(view.run_id);
      // The model key reached the CLI (the scripted server answered it) and nothing kept it.
      assert.ok(!JSON.stringify(entries).includes(KEY), "the model key is in the journal");
      assert.ok(!node!.stderr().includes(KEY) && !node!.stdout().includes(KEY), "the model key is in the node's log");

      const text = await warden(["invoke", "--id", id, "--provider", provider, "--bundle", "rehearsal", "--", "write the greeting file"]);
      assert.equal(text.code, 0, text.stderr);
      // The human view prints the agent's answer, not raw stream lines.
      assert.match(text.stdout, /replayed/);
      assert.match(text.stdout, /answer:\nWrote out\.txt for the operator\.\n/);
      assert.doesNotMatch(text.stdout, /"type":/);
      assert.equal(model.requests.length - from, 2, "the replay asked the model again");
    });

    it("neither the node user's configuration nor the workspace's runs or reaches the model; a trusted workspace's does", async () => {
      const from = model.requests.length;
      model.load({ turns: [shell(provider, "echo ok > checked.txt"), { text: "Checked." }] });
      const run = await invoke(randomUUID(), "check the workspace");
      assert.equal(run.code, 0, run.stdout + run.stderr);
      assert.equal(readFileSync(join(workspace, "checked.txt"), "utf8"), "ok\n");
      const untrustedText = requestText(from);
      // No hook ran: neither the node user's (SessionStart, PreToolUse) nor the repository's.
      assert.deepEqual(markersFound(), []);
      for (const marker of [OPERATOR_MARKER, `${WORKSPACE_MARKER}-main`]) assert.ok(!untrustedText.includes(marker), `${marker} reached the model`);

      const trustedFrom = model.requests.length;
      model.load({ turns: [{ text: "Trusted." }] });
      const trustedRun = await invoke(randomUUID(), "check the trusted workspace", ["--workspace", "trusted"]);
      assert.equal(trustedRun.code, 0, trustedRun.stdout + trustedRun.stderr);
      const trustedText = requestText(trustedFrom);
      // The trusted workspace's own configuration is in force: what the untrusted one could have done.
      if (provider === "claude") assert.ok(existsSync(join(markers(trustedWorkspace), "workspace-session-start-trusted")), markersFound().join(", "));
      assert.ok(trustedText.includes(`${WORKSPACE_MARKER}-trusted`), "the trusted workspace's instructions did not reach the model");
      assert.ok(!trustedText.includes(OPERATOR_MARKER), "the node user's instructions reached the model");
      assert.ok(!markersFound().some((m) => m.startsWith("operator-")), markersFound().join(", "));
    });

    it("a prompt that looks like an option or a subcommand reaches the model as the prompt", async () => {
      // Issue 27: `--provider codex -- review` ran `codex exec review`; `--help` printed the CLI's help.
      for (const prompt of ["review", "--help", "-m x", "resume"]) {
        const from = model.requests.length;
        model.load({ turns: [{ text: `Answered ${prompt}.` }] });
        const run = await invoke(randomUUID(), prompt);
        assert.equal(run.code, 0, `${JSON.stringify(prompt)}: ${run.stdout}${run.stderr}`);
        const view = JSON.parse(run.stdout) as { status: string; result: { answer?: string } };
        assert.equal(view.result.answer, `Answered ${prompt}.`, run.stdout);
        assert.equal(model.requests.length - from, 1);
        // The user's turn the CLI sent is the prompt itself, whole.
        assert.ok(requestText(from).includes(`"text":${JSON.stringify(prompt)}`), `${JSON.stringify(prompt)} is not a text of the model's request`);
      }
    });

    it("a call the permission mode refuses is journaled, printed and answered as refused", async () => {
      const from = model.requests.length;
      model.load({ turns: [shell(provider, "echo no > refused.txt"), { text: "I was not allowed to write." }] });
      const run = await invoke(randomUUID(), "try to write", ["--workspace", "ro"]);
      const view = JSON.parse(run.stdout) as { status: string; run_id: string; result: { answer?: string; refused?: { tool: string }[] } };
      assert.equal(view.status, "recorded", run.stdout);
      assert.equal(existsSync(join(readOnly, "refused.txt")), false);
      const calls = tools(await journal(view.run_id));
      const stdout = readFileSync(join(home, "outputs", `${view.run_id}.stdout`), "utf8");
      if (provider === "claude") {
        // Claude Code refused it before running anything: warden says so.
        assert.equal(calls.length, 1, stdout);
        assert.equal(calls[0]?.outcome, "failed");
        assert.ok(typeof calls[0]?.detail?.refused === "string", JSON.stringify(calls[0]));
        assert.equal(view.result.refused?.[0]?.tool, "Bash");
      } else {
        // Codex ran it inside its read-only sandbox, where it failed with the shell's exit code.
        // codex-cli 0.171 does not always print the command_execution item of a command that fails
        // in its sandbox (the gap issue 23 met): every item it prints is journaled, none of it
        // as a success.
        assert.ok(calls.length <= 1, stdout);
        assert.equal(calls.length, (stdout.match(/"type":"item.started","item":\{[^}]*"type":"command_execution"/g) ?? []).length, stdout);
        for (const call of calls) {
          assert.equal(call.outcome, "failed");
          assert.notEqual(call.detail?.exit_code, 0);
        }
      }
      assert.equal(view.result.answer, "I was not allowed to write.");
      assert.equal(model.requests.length - from, 2);
      await verified(view.run_id);
    });

    it("a model connection dropped mid-stream ends as the CLI reports it: never a success", async () => {
      const from = model.requests.length;
      // The drop, then the CLI's one retry meets the end of the script (a 400 it does not retry).
      model.load({ turns: [{ text: "I was about to", drop: true }] });
      const run = await invoke(randomUUID(), "answer me");
      assert.equal(run.code, 1, run.stdout + run.stderr);
      const view = JSON.parse(run.stdout) as { status: string; run_id: string; result: { error?: { code: string }; exit_code: number | null } };
      assert.equal(view.status, "recorded");
      assert.ok(view.result.exit_code !== 0 || view.result.error !== undefined, run.stdout);
      const entries = await journal(view.run_id);
      assert.equal(entries.at(-1)?.entry.event.reason, "failed");
      assert.ok(model.requests.length - from >= 2, "the CLI did not retry");
      await verified(view.run_id);
    });

    it("the invoke timeout kills a CLI stuck on a slow model: unresolved, the CLI gone", async () => {
      const from = model.requests.length;
      model.load({ turns: [{ text: "too late", delay_ms: 600_000 }] });
      const id = randomUUID();
      const run = await invoke(id, "answer slowly", ["--timeout", "5"]);
      assert.equal(run.code, 2, run.stdout + run.stderr);
      assert.equal((JSON.parse(run.stdout) as { error: { code: string } }).error.code, "unresolved");
      const view = (await httpCall(node!.url, TOKEN, "GET", `/v1/invocations/api:operator/${id}`)).body as { status: string; run_id: string };
      assert.equal(view.status, "unresolved");
      const entries = await journal(view.run_id);
      assert.equal(entries.at(-1)?.entry.event.reason, "timeout");
      const pid = entries.find((e) => e.entry.event.type === "note" && e.entry.event.process !== undefined)?.entry.event.process as { pid: number };
      assert.equal(isAlive(pid.pid), false);
      assert.equal(model.requests.length - from, 1);
      await verified(view.run_id);
    });

    it("kill -9 of the node while the CLI is inside a tool call: unresolved, CLI and tool reaped on restart, the model asked nothing more", async () => {
      const from = model.requests.length;
      const marker = "tool-started.marker";
      const seconds = provider === "claude" ? 3171 : 3172;
      model.load({ turns: [shell(provider, `echo up > ${marker}; sleep ${seconds}`, 30_000), { text: "never reached" }] });
      const id = randomUUID();
      const started = await warden(["invoke", "--id", id, "--provider", provider, "--wait", "0", "--json", "--", "sleep in a tool"]);
      assert.equal(started.code, 2, started.stdout + started.stderr);
      const runId = (JSON.parse(started.stdout) as { run_id: string }).run_id;
      await waitFor("the tool call to start in the workspace", () => (existsSync(join(workspace, marker)) ? true : undefined), 120_000);
      const sleeper = await waitFor("the tool's sleep process", () => pidOf(`sleep\0${seconds}`), 30_000);
      const entries = await journal(runId);
      const agentPid = (entries.find((e) => e.entry.event.type === "note" && e.entry.event.process !== undefined)?.entry.event.process as { pid: number }).pid;
      assert.ok(isAlive(agentPid) && isAlive(sleeper));
      for (const pid of [agentPid, sleeper]) {
        const running = identityOf(pid);
        if (running !== undefined) leftovers.push(running);
      }
      const asked = model.requests.length;
      await node!.kill();
      node = await start();
      await waitFor("the orphaned CLI and its tool to be reaped", () => (!isAlive(agentPid) && !isAlive(sleeper) ? true : undefined), 60_000);
      const status = await httpCall(node.url, TOKEN, "GET", `/v1/invocations/api:operator/${id}`);
      assert.equal(status.body.status, "unresolved");
      assert.equal(model.requests.length, asked, "the model was asked again after the node died");
      assert.equal(asked - from, 1);
      const v = await httpCall(node.url, TOKEN, "GET", `/v1/runs/${runId}/verification`);
      assert.equal(v.body.ok, true);
      assert.equal(v.body.requires_reconciliation, true);
    });
  });
}

/** The pid of the process whose NUL-separated command line contains `needle`. */
function pidOf(needle: string): number | undefined {
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    try {
      if (readFileSync(`/proc/${name}/cmdline`, "utf8").includes(needle)) return Number(name);
    } catch {
      // gone meanwhile
    }
  }
  return undefined;
}

const OPERATOR_MARKER = "operator-marker-3f9c1d";
const WORKSPACE_MARKER = "workspace-marker-8b27e4";

/** Where hooks and MCP servers leave their markers, relative to the run's workspace. */
const MARKERS = ".markers";

/** A Claude hook entry that writes `<workspace>/.markers/<name>` when it runs. */
function markerHook(name: string): unknown {
  return [{ hooks: [{ type: "command", command: `touch ${MARKERS}/${name}` }] }];
}

/**
 * The node user's own configuration, as an operator's machine has it: hooks, instructions, a rule
 * letting Claude read any file, a Codex configuration with instructions of its own.
 */
function plantOperatorConfig(home: string): void {
  mkdirSync(join(home, ".claude"), { recursive: true });
  writeFileSync(
    join(home, ".claude", "settings.json"),
    JSON.stringify({
      permissions: { allow: ["Read(//**)"] },
      hooks: { SessionStart: markerHook("operator-session-start"), PreToolUse: markerHook("operator-pre-tool-use") },
    }),
  );
  writeFileSync(join(home, ".claude", "CLAUDE.md"), `Always mention ${OPERATOR_MARKER}.\n`);
  mkdirSync(join(home, ".codex"), { recursive: true });
  writeFileSync(join(home, ".codex", "config.toml"), `developer_instructions = "Always mention ${OPERATOR_MARKER}."\n`);
  writeFileSync(join(home, ".codex", "AGENTS.md"), `Always mention ${OPERATOR_MARKER}.\n`);
}

/** A repository's own agent configuration: settings hooks, an MCP server, instructions. */
function plantWorkspaceConfig(dir: string, name: string): void {
  mkdirSync(join(dir, ".claude"), { recursive: true });
  writeFileSync(
    join(dir, ".claude", "settings.json"),
    JSON.stringify({ hooks: { SessionStart: markerHook(`workspace-session-start-${name}`), PreToolUse: markerHook(`workspace-pre-tool-use-${name}`) } }),
  );
  writeFileSync(join(dir, ".mcp.json"), JSON.stringify({ mcpServers: { repo: { command: "touch", args: [`${MARKERS}/workspace-mcp-${name}`] } } }));
  writeFileSync(join(dir, "CLAUDE.md"), `Always mention ${WORKSPACE_MARKER}-${name}.\n`);
  mkdirSync(join(dir, ".codex"), { recursive: true });
  writeFileSync(
    join(dir, ".codex", "config.toml"),
    `developer_instructions = "Always mention ${WORKSPACE_MARKER}-${name}."\n\n[mcp_servers.repo]\ncommand = "touch"\nargs = [${JSON.stringify(`${MARKERS}/workspace-codex-mcp-${name}`)}]\n`,
  );
}
