/**
 * The queue tests' fixture agent (test/fixtures/agents/queue-agent.mjs) and its log's checker
 * (test/support/queue-log.ts): real agent processes write the log, the checker reads it. Overlap is
 * made by waiting on the log itself (a start line), never by timing.
 */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { spawn, type ChildProcess } from "node:child_process";
import { rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { fixtureAgents } from "../support/node.js";
import { identityOf, signalChildGroup } from "../support/processes.js";
import { analyzeQueueLog, appendMark, interleaving, readQueueLog, type JobMeta, type QueueLogLine } from "../support/queue-log.js";
import { tempDir } from "../support/temp.js";
import { waitFor } from "../support/wait.js";

/** Both agents, each run as a node runs an agent: by its path (its #! line). */
const AGENTS = ["queue-agent.mjs", "queue-agent.sh"] as const;

function agent(name: string, log: string, node: string, args: readonly string[], env: Record<string, string> = {}): { child: ChildProcess; exited: Promise<number | null> } {
  const child = spawn(join(fixtureAgents, name), args, {
    env: { PATH: process.env.PATH ?? "", WARDEN_FIXTURE_QUEUE_LOG: log, WARDEN_FIXTURE_NODE: node, WARDEN_AGENT_RUN: `run-${node}`, ...env },
    stdio: ["ignore", "pipe", "pipe"],
    // A group of its own, as a node starts an agent: the test signals the group.
    detached: true,
  });
  child.stdout!.resume();
  child.stderr!.resume();
  return { child, exited: new Promise((done) => child.once("exit", (code) => done(code))) };
}
const claudeArgs = (prompt: string): string[] => ["-p", "--output-format", "stream-json", "--verbose", "--", prompt];

describe("the queue fixture agents and their log", () => {
  for (const name of AGENTS) it(`${name} logs start and end with the job, run, node and provider; overlap is counted per key; a SIGTERM'd agent logs its end`, async (t) => {
    const dir = tempDir("queue-agent", (fn) => t.after(fn));
    const log = join(dir, "agents.log");
    const startOf = (job: string): Promise<QueueLogLine> =>
      waitFor(`the start line of ${job}`, () => readQueueLog(log).find((l) => l.ev === "start" && l.job === job));

    // job a sleeps until stopped; b (another node, codex) runs inside it; c starts after both ended.
    const a = agent(name, log, "n1", claudeArgs("job=a sleep=600000 hello"));
    t.after(() => signalChildGroup(a.child, "SIGKILL"));
    // Its start time beside its pid, as /proc tells it (what a clean-up checks before it kills).
    assert.equal((await startOf("a")).startTicks, identityOf(a.child.pid!)?.startTicks);
    const b = agent(name, log, "n2", ["exec", "--json", "--", "job=b sleep=10 hi"]);
    assert.equal(await b.exited, 0);
    // To the group, as a node stops an agent (the shell agent's sleep is a child of its own).
    assert.equal(signalChildGroup(a.child, "SIGTERM"), true);
    assert.equal(await a.exited, 143);
    appendMark(log, "between");
    const c = agent(name, log, "n1", claudeArgs("job=c hello"), { WARDEN_FIXTURE_SLEEP_MS: "5" });
    assert.equal(await c.exited, 0);

    const lines = readQueueLog(log);
    assert.deepEqual(
      lines.map((l) => `${l.ev} ${l.job} ${l.node} ${l.provider}`),
      ["start a n1 claude", "start b n2 codex", "end b n2 codex", "end a n1 claude", "mark null test ", "start c n1 claude", "end c n1 claude"],
    );
    assert.equal(lines[0]!.run, "run-n1");
    assert.equal(lines.find((l) => l.ev === "end" && l.job === "a")!.code, 143);
    const meta = new Map<string, JobMeta>([
      ["a", { principal: "p", workspace: "w1" }],
      ["b", { principal: "q", workspace: "w1" }],
      ["c", { principal: "p", workspace: "w2" }],
    ]);
    const report = analyzeQueueLog(lines, meta);
    assert.deepEqual([...report.startsByJob], [["a", 1], ["b", 1], ["c", 1]]);
    assert.deepEqual(report.duplicates, []);
    assert.equal(report.maxConcurrency.overall, 2);
    assert.deepEqual(Object.fromEntries(report.maxConcurrency.byNode), { n1: 1, n2: 1 });
    assert.deepEqual(Object.fromEntries(report.maxConcurrency.byProvider), { claude: 1, codex: 1 });
    assert.deepEqual(Object.fromEntries(report.maxConcurrency.byWorkspace), { w1: 2, w2: 1 });
    assert.deepEqual(Object.fromEntries(report.maxConcurrency.byPrincipal), { p: 1, q: 1 });
    assert.deepEqual(report.principalOrder, ["p", "q", "p"]);
    assert.equal(report.marks.get("between"), 4);
    assert.ok(report.agents.filter((x) => x.job !== "c").every((x) => x.end! < 4) && report.agents.find((x) => x.job === "c")!.start > 4);
  });

  for (const name of AGENTS) it(`${name} holds after its start until the file its gate=<path> names exists`, async (t) => {
    const dir = tempDir("queue-agent-gate", (fn) => t.after(fn));
    const log = join(dir, "agents.log");
    const gate = join(dir, "gate");
    const g = agent(name, log, "n1", claudeArgs(`job=g gate=${gate} hello`));
    t.after(() => signalChildGroup(g.child, "SIGKILL"));
    await waitFor("the gated agent's start line", () => readQueueLog(log).find((l) => l.ev === "start" && l.job === "g"));
    // Another agent starts and ends while the gated one holds.
    const h = agent(name, log, "n2", claudeArgs("job=h hello"));
    assert.equal(await h.exited, 0);
    writeFileSync(gate, "");
    assert.equal(await g.exited, 0);
    assert.deepEqual(
      readQueueLog(log).map((l) => `${l.ev} ${l.job}`),
      ["start g", "start h", "end h", "end g"],
    );
  });

  it("counts by the order of lines, not their clocks: a job started twice, an agent with no end as running to the end", () => {
    const line = (ev: "start" | "end", job: string, pid: number, wall: number, node = "n1"): QueueLogLine => ({ ev, job, run: null, node, provider: "claude", pid, wall });
    const report = analyzeQueueLog([
      line("start", "x", 1, 100),
      line("end", "x", 1, 200),
      line("start", "y", 2, 150), // after x's end in the file, whatever its clock says: never both at once
      line("start", "x", 3, 300, "n2"), // x again, on another node, killed: no end
      line("end", "y", 2, 400),
      line("start", "z", 4, 500),
    ]);
    assert.deepEqual(report.duplicates, ["x"]);
    assert.equal(report.agents.find((a) => a.pid === 3)!.end, undefined);
    assert.equal(report.maxConcurrency.overall, 2);
    assert.deepEqual(Object.fromEntries(report.maxConcurrency.byNode), { n1: 1, n2: 1 });
  });

  it("measures where a small principal's starts fall among a big one's", () => {
    const last = [...Array<string>(9).fill("big"), "small"];
    assert.deepEqual(interleaving(last, "small"), { count: 1, lastAt: 1, longestGap: 9 });
    const spread = ["big", "small", "big", "big", "small", "big", "big", "big", "big", "big"];
    assert.deepEqual(interleaving(spread, "small"), { count: 2, lastAt: 0.5, longestGap: 2 });
  });

  it("reads a line still being appended as not there yet, and a line cut before others as an error", () => {
    const dir = tempDir("queue-log-read");
    const log = join(dir, "queue.log");
    const line = (ev: string, pid: number): string => JSON.stringify({ ev, job: `j${pid}`, run: null, node: "n", provider: "claude", pid, wall: pid });
    const whole = `${line("start", 1)}\n${line("end", 1)}\n`;
    // A write that crossed a page: its first bytes are visible, its newline is not yet.
    writeFileSync(log, whole + line("start", 2).slice(0, 30));
    assert.deepEqual(readQueueLog(log).map((l) => [l.ev, l.pid]), [["start", 1], ["end", 1]]);
    writeFileSync(log, `${whole}${line("start", 2)}\n`);
    assert.equal(readQueueLog(log).length, 3);
    // Cut and followed by more: not a write in progress.
    writeFileSync(log, `${line("start", 1).slice(0, 30)}\n${line("end", 1)}\n`);
    assert.throws(() => readQueueLog(log), /queue log line 1 is not JSON/);
    rmSync(dir, { recursive: true, force: true });
  });
});
