/**
 * Governed tool calls (issue 31). Four measures, in one run:
 *
 * 1. Where one decision's time goes, stage by stage in the node's process, on the path the gate
 *    takes (src/policy/gate.ts): reading the hook's JSON, reading the call (with its
 *    fingerprint), Cedar (with warden's index, and against the whole set as Cedar alone would),
 *    the journal append (validated, signed, written; not synced) and, as the floor of the
 *    fdatasync that follows, a raw append + fdatasync of a record the size of a decision line on
 *    the same disk.
 * 2. The decision at the node, as the hook sees it (connect to the run's decision socket, send
 *    the call, read the answer), with 10 and 1,000 rules (targets p99 <= 2 ms and <= 5 ms): with
 *    the journal answering at once (the decision) and with a real embedded journal, fdatasynced
 *    before each answer as a run's are (the decision made durable), beside that floor.
 * 3. The command hook process's own start (`node -e ""`, and the whole hook: start, ask, answer),
 *    which Codex still pays per call and Claude Code, with its HTTP hook, no longer does.
 * 4. A real Claude Code run (the pinned CLI, the scripted model, a few tool calls) under a policy
 *    against the same run without one, alternating rounds of one node (medians; target <= 1.1x).
 */
import { spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import { closeSync, existsSync, fdatasyncSync, mkdirSync, openSync, writeFileSync, writeSync } from "node:fs";
import * as http from "node:http";
import { join } from "node:path";
import { resolveLimits } from "../src/core/limits.js";
import { EmbeddedJournalStore } from "../src/backends/embedded/journal/journal-store.js";
import { generateSigningKey } from "../src/journal/keys.js";
import { JournalWriter } from "../src/journal/writer.js";
import { DECIDE_PATH, DecisionGate, type DecisionJournal, type PolicyDecisionEvent } from "../src/policy/gate.js";
import { HOOK_SOURCE } from "../src/policy/hook.js";
import { claudeToolCall } from "../src/policy/tool-call.js";
import { ToolPolicy, type ToolRequest } from "../src/policy/tool-policy.js";
import { ScriptedModelServer, type ScriptTurn } from "../src/scripted-model/index.js";
import { repo, startNode } from "../test/support/node.js";
import { AS_LAUNCHED_ENV, benchDir, fmt, median, percentile } from "./baseline.js";

const RULES = [10, 1000] as const;
const TARGET_P99_MS: Record<(typeof RULES)[number], number> = { 10: 2, 1000: 5 };

function policyText(rules: number): string {
  const forbids = Array.from({ length: rules - 1 }, (_, i) => `@id("r${i}") forbid(principal, action == Action::"shell", resource) when { resource.command like "*tool-${i} *" };`);
  return [...forbids, `@id("operators") permit(principal, action, resource) when { principal.role == "operator" };`].join("\n");
}

let callSeq = 0;
function hookInput(): string {
  return JSON.stringify({ hook_event_name: "PreToolUse", session_id: "bench", cwd: "/tmp", tool_name: "Bash", tool_input: { command: "ls -la src", description: "list" }, tool_use_id: `toolu_bench_${callSeq++}` });
}

const PRINCIPAL = { scope: "api:bench", name: "bench", role: "operator" } as const;
const CONTEXT = { workspace: "main", run: "bench", provider: "claude", bundle_id: "", revision: "", signers: [] } as const;

function ask(socket: string, input: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const req = http.request({ socketPath: socket, method: "POST", path: DECIDE_PATH }, (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (c: Buffer) => chunks.push(c));
      res.on("end", () => resolve(Buffer.concat(chunks).toString("utf8")));
    });
    req.on("error", reject);
    req.end(input);
  });
}

async function journalFor(policy: ToolPolicy, dir: string): Promise<JournalWriter> {
  const store = new EmbeddedJournalStore(join(dir, `journals-${randomUUID()}`));
  const writer = await JournalWriter.create({ store, key: generateSigningKey().key, runId: randomUUID(), limits: resolveLimits({ journalBytes: 1 << 30 }) });
  await writer.append({ type: "run.started", invocation: { scope: "api:bench", id: "bench", request_hash: `sha256:${"0".repeat(64)}` }, agent: "claude", policy: { schema: policy.schema, digest: policy.digest } });
  return writer;
}

async function gateFor(policy: ToolPolicy, dir: string, durable: boolean): Promise<{ gate: DecisionGate; close(): Promise<void> }> {
  let journal: DecisionJournal = { append: async () => true };
  let closeJournal = async (): Promise<void> => undefined;
  if (durable) {
    const writer = await journalFor(policy, dir);
    journal = { append: (event) => writer.append(event).then(() => true) };
    closeJournal = () => writer.close();
  }
  const gate = await DecisionGate.listen(join(dir, `d-${randomUUID().slice(0, 8)}.sock`), { policy, workspace: "/tmp", principal: PRINCIPAL, context: CONTEXT, journal });
  return { gate, close: async () => (await gate.close(), await closeJournal()) };
}

const WARM_UP = 50;

async function decisions(socket: string, n: number): Promise<number[]> {
  const ms: number[] = [];
  for (let i = 0; i < n + WARM_UP; i++) {
    const input = hookInput();
    const t = performance.now();
    const answer = await ask(socket, input);
    if (i >= WARM_UP) ms.push(performance.now() - t);
    if (answer !== "") throw new Error(`the bench's call was not allowed: ${answer}`);
  }
  return ms.sort((a, b) => a - b);
}

/** A decision line's journal event, as the gate appends it. */
function decisionEvent(n: number): PolicyDecisionEvent {
  return { type: "policy.decision", call_id: `claude:toolu_stage_${n}`, tool: "Bash", action: "shell", decision: "allow", policies: ["operators"], fingerprint: `sha256:${"0".repeat(64)}` };
}

/** Stage by stage, in this process: the gate's path with each step timed on its own. */
async function stages(dir: string, rules: number, indexed: ToolPolicy, whole: ToolPolicy, n: number): Promise<Record<string, number[]>> {
  const out: Record<string, number[]> = { json: [], call: [], cedar: [], cedarWhole: [], append: [] };
  const writer = await journalFor(indexed, dir);
  try {
    for (let i = 0; i < n + WARM_UP; i++) {
      const text = hookInput();
      let t = performance.now();
      const input = JSON.parse(text) as unknown;
      const json = performance.now() - t;
      t = performance.now();
      const call = claudeToolCall(input, "/tmp");
      const read = performance.now() - t;
      const request: ToolRequest = { principal: PRINCIPAL, action: call.action, callId: call.callId, resource: call.resource, context: CONTEXT };
      t = performance.now();
      const verdict = indexed.decide(request);
      const cedar = performance.now() - t;
      t = performance.now();
      const reference = whole.decide(request);
      const cedarWhole = performance.now() - t;
      if (verdict.decision !== "allow" || reference.decision !== "allow") throw new Error(`${rules} rules: the bench's call was not allowed`);
      t = performance.now();
      await writer.append(decisionEvent(i), { sync: false });
      const append = performance.now() - t;
      if (i < WARM_UP) continue;
      out.json!.push(json);
      out.call!.push(read);
      out.cedar!.push(cedar);
      out.cedarWhole!.push(cedarWhole);
      out.append!.push(append);
    }
  } finally {
    await writer.close();
  }
  for (const ms of Object.values(out)) ms.sort((a, b) => a - b);
  return out;
}

/** The disk's own floor: append + fdatasync of a record the size of a decision line, p50/p99. */
function rawAppendFdatasync(dir: string, n: number, bytes = 420): number[] {
  const fd = openSync(join(dir, `raw-${randomUUID()}`), "a", 0o600);
  const record = Buffer.alloc(bytes, 0x61);
  const ms: number[] = [];
  try {
    for (let i = 0; i < n; i++) {
      const t = performance.now();
      writeSync(fd, record);
      fdatasyncSync(fd);
      ms.push(performance.now() - t);
    }
  } finally {
    closeSync(fd);
  }
  return ms.sort((a, b) => a - b);
}

function run(command: string, args: readonly string[], stdin: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const t = performance.now();
    const child = spawn(command, args, { stdio: ["pipe", "ignore", "inherit"] });
    child.on("error", reject);
    child.on("exit", (code) => (code === 0 ? resolve(performance.now() - t) : reject(new Error(`${command} exited ${code}`))));
    child.stdin.end(stdin);
  });
}

const p50 = (ms: readonly number[]): string => fmt(percentile(ms, 50), 3);
const p99 = (ms: readonly number[]): string => fmt(percentile(ms, 99), 3);
const line = (label: string, ms: readonly number[]): string => `${label.padEnd(64)} p50 ${p50(ms)} ms  p99 ${p99(ms)} ms  (n=${ms.length})`;
const verdict = (ms: readonly number[], target: number): string => (percentile(ms, 99) <= target ? `target p99 <= ${target} ms: met` : `target p99 <= ${target} ms: NOT met`);

export default async function main(): Promise<void> {
  const dir = benchDir("policy");
  const closers: (() => Promise<void>)[] = [];
  let hookSocket = "";
  try {
    const floor = rawAppendFdatasync(dir, 500);
    console.log(line("floor: raw append + fdatasync, 420 B, this disk", floor));
    for (const rules of RULES) {
      const text = policyText(rules);
      const policy = ToolPolicy.compile(text, `${rules} rules`);
      const whole = ToolPolicy.compile(text, `${rules} rules, whole set`, { index: false });
      const s = await stages(dir, rules, policy, whole, rules === 10 ? 2000 : 1000);
      console.log(`-- ${rules} rules: where a decision's time goes (in-process, each stage timed alone)`);
      console.log(line("  hook input JSON.parse", s.json!));
      console.log(line("  the call read from it (claudeToolCall, with its fingerprint)", s.call!));
      console.log(line("  Cedar, warden's index", s.cedar!));
      console.log(line("  Cedar, the whole set (no index)", s.cedarWhole!));
      console.log(line("  journal append: validated, signed, written (no fdatasync)", s.append!));
      console.log(`  index against the whole set: p50 ${fmt(percentile(s.cedar!, 50) / percentile(s.cedarWhole!, 50), 3)}x, p99 ${fmt(percentile(s.cedar!, 99) / percentile(s.cedarWhole!, 99), 3)}x`);
      const at = await gateFor(policy, dir, false);
      closers.push(at.close);
      const decided = await decisions(at.gate.socketPath, rules === 10 ? 2000 : 1000);
      const durable = await gateFor(policy, dir, true);
      closers.push(durable.close);
      const synced = await decisions(durable.gate.socketPath, rules === 10 ? 1000 : 500);
      if (rules === 10) hookSocket = durable.gate.socketPath;
      console.log(line(`decision at the node, ${rules} rules (socket, journal answering at once)`, decided) + `  ${verdict(decided, TARGET_P99_MS[rules])}`);
      console.log(line(`the decision made durable, ${rules} rules (journal fdatasynced)`, synced) + `  (floor p50 ${p50(floor)} / p99 ${p99(floor)} ms)`);
    }
    // The command hook's own process: what every Codex tool call pays before the node is even asked (Claude's HTTP hook no longer does).
    const bare: number[] = [];
    const hook: number[] = [];
    for (let i = 0; i < 25; i++) {
      bare.push(await run(process.execPath, ["-e", ""], ""));
      hook.push(await run(process.execPath, ["-e", HOOK_SOURCE, hookSocket], hookInput()));
    }
    bare.sort((a, b) => a - b);
    hook.sort((a, b) => a - b);
    console.log(line("node -e '' (the command hook process's start alone, Codex)", bare));
    console.log(line("the whole command hook (start, ask, answer; 10 rules, durable; Codex)", hook));
  } finally {
    for (const close of closers) await close();
  }
  await claudeOnOff(dir);
}

const TOKEN = "bench-policy-operator-token-0123456789abcdef";
const KEY_VAR = "SCRIPTED_MODEL_KEY";
const ROUNDS = 5;
const TARGET_RATIO = 1.1;
/** What every round's run does: four tool calls (three commands, one file read) and an answer. */
const TURNS: readonly ScriptTurn[] = [
  { tool: { name: "Bash", input: { command: "echo one > one.txt", description: "write" } } },
  { tool: { name: "Bash", input: { command: "ls", description: "list" } } },
  { tool: { name: "Read", input: { file_path: "one.txt" } } },
  { tool: { name: "Bash", input: { command: "cat one.txt", description: "read" } } },
  { text: "Done." },
];
const CLAUDE_POLICY = `@id("no-push") forbid(principal, action == Action::"shell", resource) when { resource.command like "*git push*" };
@id("operators") permit(principal, action, resource) when { principal.role == "operator" };
`;

/**
 * The same Claude Code run in a workspace under a policy and in one without, on one node, through
 * the HTTP API, alternating: the policy's whole cost (the HTTP hook per call, the decision, its
 * fdatasync) against the run's.
 */
async function claudeOnOff(dir: string): Promise<void> {
  const cli = join(repo, "node_modules", ".bin", "claude");
  if (!existsSync(cli)) {
    console.log(`real Claude Code run: skipped, ${cli} is not installed`);
    return;
  }
  const governed = join(dir, "governed");
  const open = join(dir, "open");
  const home = join(dir, "home");
  for (const d of [governed, open, join(dir, "agent-home")]) mkdirSync(d, { recursive: true });
  mkdirSync(home, { mode: 0o700 });
  writeFileSync(join(home, "tools.cedar"), CLAUDE_POLICY, { mode: 0o600 });
  const model = await ScriptedModelServer.start({ script: { turns: [] } });
  const node = await startNode({
    home,
    config: {
      workspaces: { governed, open },
      defaultWorkspace: "governed",
      workspacePermissions: { governed: "full", open: "full" },
      policies: { governed: "tools.cedar" },
      providers: { claude: { command: cli, model: { baseUrl: model.url, apiKeyEnv: KEY_VAR, name: "scripted-model", retries: 1 } } },
      logLevel: "warn",
    },
    env: { ...AS_LAUNCHED_ENV, WARDEN_TOKEN: TOKEN, [KEY_VAR]: "sk-scripted-not-a-secret", HOME: join(dir, "agent-home") },
    timeoutMs: 60_000,
  });
  const once = async (workspace: string): Promise<number> => {
    model.load({ turns: [...TURNS] });
    const started = performance.now();
    const res = await fetch(`${node.url}/v1/invocations`, {
      method: "POST",
      headers: { authorization: `Bearer ${TOKEN}`, "content-type": "application/json", "idempotency-key": randomUUID(), prefer: "wait=120" },
      body: JSON.stringify({ provider: "claude", prompt: "write and read a file", workspace }),
    });
    const body = (await res.json()) as { status?: string; result?: { refused?: unknown } };
    const ms = performance.now() - started;
    if (res.status !== 200 || body.status !== "recorded") throw new Error(`POST /v1/invocations (${workspace}): ${res.status} ${JSON.stringify(body)}`);
    if (body.result?.refused !== undefined) throw new Error(`a call of the ${workspace} run was refused: ${JSON.stringify(body.result.refused)}`);
    return ms;
  };
  try {
    // One warm-up each (the CLI's first start reads its binary from disk, the node loads Cedar).
    await once("open");
    await once("governed");
    const on: number[] = [];
    const off: number[] = [];
    for (let i = 0; i < ROUNDS; i++) {
      off.push(await once("open"));
      on.push(await once("governed"));
    }
    const ratio = median(on) / median(off);
    console.log(
      `real Claude Code run, ${TURNS.length - 1} tool calls: policy on ${fmt(median(on))} ms vs off ${fmt(median(off))} ms = ${ratio.toFixed(3)}x ` +
        `(target <= ${TARGET_RATIO}x: ${ratio <= TARGET_RATIO ? "met" : "NOT met"}); the policy adds ${fmt(median(on) - median(off))} ms, ` +
        `${fmt((median(on) - median(off)) / (TURNS.length - 1), 1)} ms a call (medians of ${ROUNDS} alternating rounds, HTTP API)`,
    );
  } finally {
    await node.kill();
    await model.close();
  }
}
