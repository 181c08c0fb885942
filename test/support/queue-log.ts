/**
 * The checker of test/fixtures/agents/queue-agent.mjs's log: what the agents themselves saw,
 * outside every node. Answers whether each invocation ran exactly once and the most agents that
 * ran at once — overall, per node, per workspace, per provider, per principal — and the order in
 * which principals' runs started.
 *
 * Concurrency is swept over the order of the log's lines, not over any clock: every line is one
 * write to a file opened O_APPEND, so the file's order is the order in which the writes happened,
 * across all agents of all nodes (an agent's end is written before it exits, before its node can
 * know it has a free slot and start another, whose start comes after). An agent's interval lies
 * inside the time its node held a slot for it, so the figures here never overstate what the node
 * ran; an agent with no end (killed with SIGKILL, or still running) counts as running until the
 * end of the log. A test can write its own `mark` lines (`appendMark`) to place its actions in
 * that order.
 */
import { appendFileSync, existsSync, readFileSync } from "node:fs";

export interface QueueLogLine {
  readonly ev: "start" | "end" | "mark";
  readonly job: string | null;
  readonly run: string | null;
  readonly node: string;
  readonly provider: string;
  readonly pid: number;
  /** a start line's: the agent's start time (/proc/<pid>/stat field 22), where /proc told one */
  readonly startTicks?: string;
  /** CLOCK_MONOTONIC, ns, as a decimal string (queue-agent.mjs; the shell agent has none) */
  readonly mono?: string;
  /** ms since the epoch */
  readonly wall: number;
  /** a mark's name */
  readonly name?: string;
  readonly code?: number;
  readonly cwd?: string;
}

/** What the test submitted for a job (the agent cannot see its principal or workspace name). */
export interface JobMeta {
  readonly principal: string;
  readonly workspace: string;
}

export interface AgentRun {
  readonly job: string;
  readonly run: string | null;
  readonly node: string;
  readonly provider: string;
  readonly pid: number;
  /** its start time, where it logged one: with the pid, what tells it from a later process */
  readonly startTicks?: string;
  /** the index of its start line in the log */
  readonly start: number;
  /** the index of its end line; undefined: no end logged (killed, or still running) */
  readonly end: number | undefined;
  /** CLOCK_MONOTONIC ns of its start and end, when the agent logs it */
  readonly startMono: bigint | undefined;
  readonly endMono: bigint | undefined;
  /** ms since the epoch of its start and end */
  readonly startWall: number;
  readonly endWall: number | undefined;
  readonly code: number | undefined;
}

export interface QueueLogReport {
  readonly agents: readonly AgentRun[];
  /** agents started per job */
  readonly startsByJob: ReadonlyMap<string, number>;
  /** jobs started more than once */
  readonly duplicates: readonly string[];
  /** starts with no `job=` in their prompt: none is expected */
  readonly unnamed: number;
  readonly maxConcurrency: {
    readonly overall: number;
    readonly byNode: ReadonlyMap<string, number>;
    readonly byProvider: ReadonlyMap<string, number>;
    /** only jobs `meta` names */
    readonly byWorkspace: ReadonlyMap<string, number>;
    readonly byPrincipal: ReadonlyMap<string, number>;
  };
  /** the principal of each start, in start order (only jobs `meta` names) */
  readonly principalOrder: readonly string[];
  /** the index in the log of each mark, by name */
  readonly marks: ReadonlyMap<string, number>;
}

/** Appends a mark to the log, one O_APPEND write like the agents' lines: "what came after this". */
export function appendMark(file: string, name: string): void {
  appendFileSync(file, `${JSON.stringify({ ev: "mark", name, job: null, run: null, node: "test", provider: "", pid: process.pid, wall: Date.now() })}\n`, { mode: 0o600 });
}

export function readQueueLog(file: string): QueueLogLine[] {
  if (!existsSync(file)) return [];
  const text = readFileSync(file, "utf8");
  // A line being appended as this reads is not all there yet: a write that crosses a page boundary
  // makes its first page's bytes visible before the rest (seen in CI, polling 1,000 agents). Only
  // its newline completes a line; an unfinished last one is read next time. A line cut anywhere
  // else is still an error.
  return text
    .slice(0, text.lastIndexOf("\n") + 1)
    .split("\n")
    .filter(Boolean)
    .map((line, i) => {
      try {
        return JSON.parse(line) as QueueLogLine;
      } catch {
        throw new Error(`queue log line ${i + 1} is not JSON (a torn write?): ${line}`);
      }
    });
}

export function analyzeQueueLog(lines: readonly QueueLogLine[], meta: ReadonlyMap<string, JobMeta> = new Map()): QueueLogReport {
  // An agent is its pid's start and the end that follows it (pids are reused only after exit).
  const open = new Map<number, { line: QueueLogLine; at: number; end?: QueueLogLine; endAt?: number }>();
  const agents: { line: QueueLogLine; at: number; end?: QueueLogLine; endAt?: number }[] = [];
  const marks = new Map<string, number>();
  for (const [at, line] of lines.entries()) {
    if (line.ev === "mark") {
      marks.set(line.name ?? "", at);
    } else if (line.ev === "start") {
      const agent = { line, at };
      open.set(line.pid, agent);
      agents.push(agent);
    } else {
      const agent = open.get(line.pid);
      if (agent === undefined) throw new Error(`queue log: an end of pid ${line.pid} with no start before it`);
      agent.end = line;
      agent.endAt = at;
      open.delete(line.pid);
    }
  }
  const runs: AgentRun[] = agents.map(({ line, at, end, endAt }) => ({
    job: line.job ?? "",
    run: line.run,
    node: line.node,
    provider: line.provider,
    pid: line.pid,
    ...(line.startTicks === undefined ? {} : { startTicks: line.startTicks }),
    start: at,
    end: endAt,
    startMono: line.mono === undefined ? undefined : BigInt(line.mono),
    endMono: end?.mono === undefined ? undefined : BigInt(end.mono),
    startWall: line.wall,
    endWall: end?.wall,
    code: end?.code,
  }));
  const startsByJob = new Map<string, number>();
  let unnamed = 0;
  for (const r of runs) {
    if (r.job === "") unnamed++;
    else startsByJob.set(r.job, (startsByJob.get(r.job) ?? 0) + 1);
  }
  const duplicates = [...startsByJob].filter(([, n]) => n > 1).map(([job]) => job);
  const keyed = (key: (r: AgentRun) => string | undefined): Map<string, number> => maxOverlap(runs, key);
  return {
    agents: runs,
    startsByJob,
    duplicates,
    unnamed,
    maxConcurrency: {
      overall: maxOverlap(runs, () => "all").get("all") ?? 0,
      byNode: keyed((r) => r.node),
      byProvider: keyed((r) => r.provider),
      byWorkspace: keyed((r) => meta.get(r.job)?.workspace),
      byPrincipal: keyed((r) => meta.get(r.job)?.principal),
    },
    principalOrder: runs.flatMap((r) => {
      const p = meta.get(r.job)?.principal;
      return p === undefined ? [] : [p];
    }),
    marks,
  };
}

/** The most intervals open at once per key (line indexes: no two events share one). */
function maxOverlap(runs: readonly AgentRun[], key: (r: AgentRun) => string | undefined): Map<string, number> {
  const events: { at: number; delta: 1 | -1; key: string }[] = [];
  for (const r of runs) {
    const k = key(r);
    if (k === undefined) continue;
    events.push({ at: r.start, delta: 1, key: k });
    if (r.end !== undefined) events.push({ at: r.end, delta: -1, key: k });
  }
  events.sort((a, b) => a.at - b.at);
  const now = new Map<string, number>();
  const max = new Map<string, number>();
  for (const e of events) {
    const n = (now.get(e.key) ?? 0) + e.delta;
    now.set(e.key, n);
    if (n > (max.get(e.key) ?? 0)) max.set(e.key, n);
  }
  return max;
}

/**
 * Where the runs of `principal` fall in the start order: the fraction of all starts that came
 * before its last one, and the largest number of other principals' starts between two of its own
 * (or before its first). A fair queue spreads a small tenant's runs through a big one's burst: its
 * last start comes well before the end, and no gap is as long as the burst.
 */
export function interleaving(order: readonly string[], principal: string): { readonly count: number; readonly lastAt: number; readonly longestGap: number } {
  let gap = 0;
  let longestGap = 0;
  let last = -1;
  let count = 0;
  order.forEach((p, i) => {
    if (p === principal) {
      count++;
      last = i;
      longestGap = Math.max(longestGap, gap);
      gap = 0;
    } else gap++;
  });
  return { count, lastAt: order.length === 0 ? 0 : (last + 1) / order.length, longestGap };
}
