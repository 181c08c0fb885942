/**
 * Governed tool calls (issue 31): the latency of one decision at the node, p50 and p99, with a
 * policy of 10 and of 1,000 rules (targets p99 <= 2 ms and <= 5 ms), beside the pre-tool hook
 * process's own start (a bare `node -e ""`, and the whole hook: start, ask, answer), measured in
 * the same run. A decision is timed as the hook sees it: connect to the run's decision socket,
 * send the call, read the answer; the journal is a real embedded journal, each decision
 * fdatasynced before the answer (as a run's are), and, beside it, the same path with the journal
 * answering at once, to show what the policy and the socket cost alone.
 */
import { spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import * as net from "node:net";
import { join } from "node:path";
import { resolveLimits } from "../src/core/limits.js";
import { EmbeddedJournalStore } from "../src/backends/embedded/journal/journal-store.js";
import { generateSigningKey } from "../src/journal/keys.js";
import { JournalWriter } from "../src/journal/writer.js";
import { DecisionGate, type DecisionJournal } from "../src/policy/gate.js";
import { HOOK_SOURCE } from "../src/policy/hook.js";
import { ToolPolicy } from "../src/policy/tool-policy.js";
import { benchDir, fmt, percentile } from "./baseline.js";

function policyOf(rules: number): ToolPolicy {
  const forbids = Array.from({ length: rules - 1 }, (_, i) => `@id("r${i}") forbid(principal, action == Action::"shell", resource) when { resource.command like "*tool-${i} *" };`);
  return ToolPolicy.compile([...forbids, `@id("operators") permit(principal, action, resource) when { principal.role == "operator" };`].join("\n"), `${rules} rules`);
}

let callSeq = 0;
function hookInput(): string {
  return JSON.stringify({ hook_event_name: "PreToolUse", session_id: "bench", cwd: "/tmp", tool_name: "Bash", tool_input: { command: "ls -la src", description: "list" }, tool_use_id: `toolu_bench_${callSeq++}` });
}

function ask(socket: string, input: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    const conn = net.connect({ path: socket });
    conn.on("data", (c: Buffer) => chunks.push(c));
    conn.on("error", reject);
    conn.on("end", () => resolve(Buffer.concat(chunks).toString("utf8")));
    conn.end(input);
  });
}

async function gateFor(policy: ToolPolicy, dir: string, durable: boolean): Promise<{ gate: DecisionGate; close(): Promise<void> }> {
  let journal: DecisionJournal;
  let closeJournal = async (): Promise<void> => undefined;
  if (durable) {
    const store = new EmbeddedJournalStore(join(dir, `journals-${randomUUID()}`));
    const writer = await JournalWriter.create({ store, key: generateSigningKey().key, runId: randomUUID(), limits: resolveLimits({ journalBytes: 1 << 30 }) });
    await writer.append({ type: "run.started", invocation: { scope: "api:bench", id: "bench", request_hash: `sha256:${"0".repeat(64)}` }, agent: "claude", policy: { schema: policy.schema, digest: policy.digest } });
    journal = { append: (event) => writer.append(event).then(() => true) };
    closeJournal = () => writer.close();
  } else {
    journal = { append: async () => true };
  }
  const gate = await DecisionGate.listen(join(dir, `d-${randomUUID().slice(0, 8)}.sock`), {
    policy,
    workspace: "/tmp",
    principal: { scope: "api:bench", name: "bench", role: "operator" },
    context: { workspace: "main", run: "bench", provider: "claude", bundle_id: "", revision: "", signers: [] },
    journal,
  });
  return { gate, close: async () => (await gate.close(), await closeJournal()) };
}

async function decisions(socket: string, n: number): Promise<number[]> {
  const ms: number[] = [];
  for (let i = 0; i < n + 50; i++) {
    const input = hookInput();
    const t = performance.now();
    const answer = await ask(socket, input);
    if (i >= 50) ms.push(performance.now() - t);
    if (!answer.includes('"allow"')) throw new Error(`the bench's call was not allowed: ${answer}`);
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

const line = (label: string, ms: readonly number[]): string => `${label.padEnd(58)} p50 ${fmt(percentile(ms, 50), 2)} ms  p99 ${fmt(percentile(ms, 99), 2)} ms  (n=${ms.length})`;

export default async function main(): Promise<void> {
  const dir = benchDir("policy");
  const results: string[] = [];
  let hookSocket = "";
  let durable10: number[] = [];
  const closers: (() => Promise<void>)[] = [];
  for (const rules of [10, 1000]) {
    const policy = policyOf(rules);
    for (const durable of [false, true]) {
      const { gate, close } = await gateFor(policy, dir, durable);
      closers.push(close);
      const ms = await decisions(gate.socketPath, rules === 10 ? 2000 : 1000);
      results.push(line(`decision, ${rules} rules, ${durable ? "journal fdatasynced" : "journal answering at once"}`, ms));
      if (rules === 10 && durable) {
        hookSocket = gate.socketPath;
        durable10 = ms;
      }
    }
  }
  // The hook's own process: what every tool call pays before the node is even asked.
  const bare: number[] = [];
  const hook: number[] = [];
  for (let i = 0; i < 25; i++) {
    bare.push(await run(process.execPath, ["-e", ""], ""));
    hook.push(await run(process.execPath, ["-e", HOOK_SOURCE, hookSocket], hookInput()));
  }
  bare.sort((a, b) => a - b);
  hook.sort((a, b) => a - b);
  results.push(line("node -e '' (the hook process's start alone)", bare));
  results.push(line("the whole hook (start, ask, answer; 10 rules, durable)", hook));
  for (const close of closers) await close();
  for (const r of results) console.log(r);
  const ratio = percentile(durable10, 50) / percentile(bare, 50);
  console.log(`decision at the node (10 rules, durable) against the hook process's start, p50: ${fmt(ratio, 3)}x (the start is what a call pays anyway)`);
}
