/**
 * Queue bench (issue 32, "Measure"): queued invocations on a fleet of `warden serve --postgres`
 * nodes against DBOS Transact's queue (`@dbos-inc/dbos-sdk`) on the same throwaway PostgreSQL
 * cluster, with the same agent: test/fixtures/agents/queue-agent.mjs, which sleeps 2 s (so the
 * CPU is not the limit) and logs its start and end, on one monotonic clock, to a file outside
 * every node. Runs are counted from that log, so both sides are measured by the same observer.
 *
 * 1. Scaling: 8 slots per node (DBOS: a worker concurrency of 8 per process), WAVES × 8 × n runs
 *    submitted at once to a fleet of n = 1, 2, 3 processes; runs per second from the first
 *    submission to the last agent's end. Target: warden's 3 nodes ≥ 2.7× its 1 node. The fleets
 *    grow between phases (a node, a DBOS process is added); warden's and DBOS's phases alternate
 *    so that load from elsewhere on a shared machine falls on both alike. Printed: each side's
 *    scaling, and warden against DBOS at each n.
 * 2. Dequeue to spawn, p50/p99: for each of warden's runs, from its lease (the queue row's
 *    `leased_at`, written in the dequeue transaction) to its agent's first line. Baseline in the
 *    same run, on the same database: a bare `FOR UPDATE SKIP LOCKED` dequeue of a copy of
 *    warden's queue table (`LIKE warden_queue INCLUDING ALL`: the same columns and indexes) by as
 *    many loops as the fleet has slots, alone and followed by the spawn of the same agent (to its
 *    first line).
 *
 * The cluster is started by test/support/postgres.ts (fsync on) and removed at the end;
 * WARDEN_TEST_POSTGRES_URL points it at an existing server. WARDEN_BENCH_QUEUE_WAVES changes the
 * waves per phase (default 4).
 */
import { spawn, type ChildProcess } from "node:child_process";
import { randomUUID } from "node:crypto";
import { mkdirSync } from "node:fs";
import { loadavg } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { DBOSClient } from "@dbos-inc/dbos-sdk";
import pg from "pg";
import { startTestPostgres } from "../test/support/postgres.js";
import { fixtureAgents, httpCall, startNode, type NodeProcess } from "../test/support/node.js";
import { analyzeQueueLog, readQueueLog, type QueueLogLine } from "../test/support/queue-log.js";
import { AS_LAUNCHED_ENV, benchDir, fmt, keepUntilRunEnds, percentile, ratioLine } from "./baseline.js";
import { DBOS_APP, DBOS_QUEUE, DBOS_VERSION, DBOS_WORKFLOW } from "./queue-dbos-side.js";

const SLOTS = 8;
const SLEEP_MS = 2000;
const WAVES = Number(process.env.WARDEN_BENCH_QUEUE_WAVES ?? 4);
const FLEET = [1, 2, 3] as const;
const TOKEN = "queue-bench-operator-token-0123456789abcdef";
const DBOS_SIDE = join(dirname(fileURLToPath(import.meta.url)), "queue-dbos-side.ts");
/** The longest a phase may take before the bench gives up, naming what it waited for. */
const PHASE_LIMIT_MS = 600_000;

const AGENT = join(fixtureAgents, "queue-agent.sh");

/** Waits until the log holds an end for every one of `jobs`; answers the lines of those jobs. */
async function waitForEnds(log: string, jobs: ReadonlySet<string>, what: string): Promise<QueueLogLine[]> {
  const deadline = Date.now() + PHASE_LIMIT_MS;
  for (;;) {
    const lines = readQueueLog(log).filter((l) => l.job !== null && jobs.has(l.job));
    const ended = new Set(lines.filter((l) => l.ev === "end").map((l) => l.job));
    if (ended.size === jobs.size) return lines;
    if (Date.now() > deadline) throw new Error(`${what}: ${ended.size} of ${jobs.size} agents ended within ${PHASE_LIMIT_MS / 1000} s`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

interface PhaseResult {
  readonly n: number;
  readonly runs: number;
  readonly perSec: number;
  readonly seconds: number;
  readonly maxPerNode: number;
}

/** Checks what the log says of a phase (each job once, no node over its slots) and answers its rate. */
function phaseResult(side: string, n: number, t0: number, lines: readonly QueueLogLine[], jobs: ReadonlySet<string>): PhaseResult {
  const report = analyzeQueueLog(lines);
  if (report.duplicates.length > 0) throw new Error(`${side}: jobs ran more than once: ${report.duplicates.slice(0, 5).join(", ")}`);
  const failed = report.agents.filter((a) => a.code !== 0);
  if (failed.length > 0) throw new Error(`${side}: ${failed.length} agents exited non-zero`);
  if (report.startsByJob.size !== jobs.size) throw new Error(`${side}: ${report.startsByJob.size} of ${jobs.size} jobs ran`);
  const maxPerNode = Math.max(...report.maxConcurrency.byNode.values());
  if (maxPerNode > SLOTS) throw new Error(`${side}: a node ran ${maxPerNode} agents at once with ${SLOTS} slots`);
  const lastEnd = Math.max(...report.agents.map((a) => a.endWall!));
  const seconds = (lastEnd - t0) / 1000;
  return { n, runs: jobs.size, perSec: jobs.size / seconds, seconds, maxPerNode };
}

// Idempotency keys are UUIDs; a phase knows its own by the set it submitted.
const jobIds = (_label: string, count: number): string[] => Array.from({ length: count }, () => randomUUID());
const prompt = (job: string): string => `job=${job} sleep=${SLEEP_MS} queue bench`;

/** Runs `work` over `items` from `concurrency` loops. */
async function pool<T>(items: readonly T[], concurrency: number, work: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < items.length) await work(items[next++]!);
    }),
  );
}

/** warden's fleet: nodes added one at a time, all on one database, submissions spread over them. */
class WardenFleet {
  readonly nodes: NodeProcess[] = [];
  readonly #root: string;
  readonly #url: string;
  readonly #log: string;

  constructor(root: string, url: string, log: string) {
    this.#root = root;
    this.#url = url;
    this.#log = log;
  }

  async grow(to: number): Promise<void> {
    while (this.nodes.length < to) {
      const name = `n${this.nodes.length + 1}`;
      const workspace = join(this.#root, `${name}-workspace`);
      mkdirSync(workspace, { recursive: true });
      this.nodes.push(
        await startNode({
          home: join(this.#root, name),
          args: ["--postgres", this.#url, "--provider", `claude=${AGENT}`, "--workspace", `main=${workspace}`, "--log-level", "warn"],
          env: { ...AS_LAUNCHED_ENV, WARDEN_TOKEN: TOKEN, WARDEN_FIXTURE_QUEUE_LOG: this.#log, WARDEN_FIXTURE_NODE: name },
          config: { defaultWorkspace: "main", queue: { slots: SLOTS } },
        }),
      );
    }
  }

  async phase(n: number): Promise<PhaseResult> {
    await this.grow(n);
    const jobs = jobIds(`warden${n}`, WAVES * SLOTS * n);
    const t0 = Date.now();
    let i = 0;
    await pool(jobs, 16, async (job) => {
      const node = this.nodes[i++ % this.nodes.length]!;
      const reply = await httpCall(node.url, TOKEN, "POST", "/v1/invocations", {
        headers: { "idempotency-key": job, prefer: "respond-async" },
        body: { provider: "claude", prompt: prompt(job) },
      });
      if (reply.status !== 202) throw new Error(`warden refused a submission: ${reply.status} ${reply.text}`);
    });
    const set = new Set(jobs);
    return phaseResult("warden", n, t0, await waitForEnds(this.#log, set, `warden, ${n} nodes`), set);
  }

  async close(): Promise<void> {
    await Promise.all(this.nodes.map((node) => node.stop()));
  }
}

/** DBOS's fleet: worker processes added one at a time, enqueued to by a DBOSClient. */
export class DbosFleet {
  readonly #workers: ChildProcess[] = [];
  readonly #url: string;
  readonly #log: string;
  #client: DBOSClient | undefined;

  constructor(url: string, log: string) {
    this.#url = url;
    this.#log = log;
  }

  async grow(to: number): Promise<void> {
    while (this.#workers.length < to) {
      const executor = `dbos${this.#workers.length + 1}`;
      const child = spawn(process.execPath, ["--import", "tsx", DBOS_SIDE, this.#url, executor, String(SLOTS)], {
        env: { ...process.env, WARDEN_FIXTURE_QUEUE_LOG: this.#log },
        stdio: ["ignore", "pipe", "inherit"],
      });
      this.#workers.push(child);
      await new Promise<void>((resolve, reject) => {
        let out = "";
        child.stdout!.setEncoding("utf8").on("data", (s: string) => {
          out += s;
          if (out.includes("ready\n")) resolve();
        });
        child.once("exit", (code) => reject(new Error(`DBOS worker ${executor} exited (${code}) before it was ready: ${out}`)));
      });
    }
    this.#client ??= await DBOSClient.create({ systemDatabaseUrl: this.#url, applicationName: DBOS_APP });
  }

  async phase(n: number): Promise<PhaseResult> {
    await this.grow(n);
    const client = this.#client!;
    const jobs = jobIds(`dbos${n}`, WAVES * SLOTS * n);
    const t0 = Date.now();
    await pool(jobs, 16, async (job) => {
      await client.enqueue({ queueName: DBOS_QUEUE, workflowName: DBOS_WORKFLOW, workflowID: job, appVersion: DBOS_VERSION }, prompt(job));
    });
    const set = new Set(jobs);
    return phaseResult("DBOS", n, t0, await waitForEnds(this.#log, set, `DBOS, ${n} processes`), set);
  }

  async close(): Promise<void> {
    await this.#client?.destroy();
    await Promise.all(
      this.#workers.map(
        (child) =>
          new Promise<void>((resolve) => {
            if (child.exitCode !== null || child.signalCode !== null) return resolve();
            const timer = setTimeout(() => child.kill("SIGKILL"), 15_000);
            child.once("exit", () => {
              clearTimeout(timer);
              resolve();
            });
            child.kill("SIGTERM");
          }),
      ),
    );
  }
}

interface Spread {
  readonly p50: number;
  readonly p99: number;
  readonly count: number;
}

function spread(samples: number[]): Spread {
  samples.sort((a, b) => a - b);
  return { p50: percentile(samples, 50), p99: percentile(samples, 99), count: samples.length };
}

const describeSpread = (s: Spread): string => `p50 ${s.p50.toFixed(1)} ms, p99 ${s.p99.toFixed(1)} ms (${s.count} runs)`;

/** warden's dequeue to spawn: each run's lease (its row's leased_at) to its agent's start line. */
async function wardenDequeueToSpawn(url: string, log: string): Promise<Spread> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const { rows } = await client.query<{ id: string; leased_at: string }>("SELECT id, leased_at FROM warden_queue WHERE leased_at IS NOT NULL");
    const leased = new Map(rows.map((r) => [r.id, Number(r.leased_at)]));
    const samples = readQueueLog(log)
      .filter((l) => l.ev === "start" && l.job !== null && leased.has(l.job))
      .map((l) => l.wall - leased.get(l.job!)!);
    return spread(samples);
  } finally {
    await client.end();
  }
}

/**
 * The bare dequeue on a copy of warden's queue table: `loops` loops each take the best queued row
 * (`FOR UPDATE SKIP LOCKED`, the lease in the same statement) until none is left; with `spawn`,
 * each then starts the same agent and the sample runs to its start line.
 */
export async function bareDequeue(url: string, rows: number, loops: number, spawnLog: string | undefined): Promise<Spread> {
  const admin = new pg.Client({ connectionString: url });
  await admin.connect();
  const table = `bench_bare_queue_${spawnLog === undefined ? "alone" : "spawn"}`;
  try {
    await admin.query(`DROP TABLE IF EXISTS ${table}`);
    await admin.query(`CREATE TABLE ${table} (LIKE warden_queue INCLUDING ALL)`);
    // warden's own rows, reset to queued: the same widths, the same spread of keys.
    await admin.query(`INSERT INTO ${table} SELECT * FROM warden_queue LIMIT $1`, [rows]);
    await admin.query(`UPDATE ${table} SET state = 'queued', lease_owner = NULL, leased_at = NULL, started_at = NULL, ended_at = NULL`);
    await admin.query(`ANALYZE ${table}`);
  } finally {
    await admin.end();
  }
  const clients = await Promise.all(
    Array.from({ length: loops }, async () => {
      const c = new pg.Client({ connectionString: url });
      await c.connect();
      return c;
    }),
  );
  const samples: number[] = [];
  const spawnStarts = new Map<string, number>();
  try {
    await Promise.all(
      clients.map(async (c, loop) => {
        for (;;) {
          const t0 = performance.now();
          const at = Date.now();
          const { rows: got } = await c.query<{ id: string }>({
            name: "bare-dequeue",
            text:
              `WITH next AS (SELECT scope, id FROM ${table} WHERE state = 'queued' ORDER BY priority DESC, enqueued_at LIMIT 1 FOR UPDATE SKIP LOCKED) ` +
              `UPDATE ${table} q SET state = 'leased', lease_owner = $1, leased_at = $2 FROM next WHERE q.scope = next.scope AND q.id = next.id RETURNING q.id`,
            values: [`bare-${loop}`, Date.now()],
          });
          const id = got[0]?.id;
          if (id === undefined) return;
          if (spawnLog === undefined) {
            samples.push(performance.now() - t0);
            continue;
          }
          spawnStarts.set(id, at);
          const child = spawn(AGENT, ["-p", "--output-format", "stream-json", "--verbose", "--", `job=${id} queue bench`], {
            env: { PATH: process.env.PATH ?? "", WARDEN_FIXTURE_QUEUE_LOG: spawnLog, WARDEN_FIXTURE_NODE: `bare-${loop}` },
            stdio: ["ignore", "pipe", "ignore"],
          });
          child.stdout!.resume();
          await new Promise((resolve) => child.once("exit", resolve));
        }
      }),
    );
  } finally {
    await Promise.all(clients.map((c) => c.end()));
  }
  if (spawnLog !== undefined) {
    for (const line of readQueueLog(spawnLog)) {
      const t0 = line.ev === "start" && line.job !== null ? spawnStarts.get(line.job) : undefined;
      if (t0 !== undefined) samples.push(line.wall - t0);
    }
  }
  return spread(samples);
}

export default async function (): Promise<void> {
  const server = await startTestPostgres();
  const root = keepUntilRunEnds(benchDir("queue"));
  const wardenUrl = await server.createDatabase("queue_warden");
  const dbosUrl = await server.createDatabase("queue_dbos");
  const wardenLog = join(root, "warden-agents.log");
  const warden = new WardenFleet(root, wardenUrl, wardenLog);
  const dbos = new DbosFleet(dbosUrl, join(root, "dbos-agents.log"));
  try {
    console.log(
      `machine load average ${loadavg().map((l) => l.toFixed(1)).join(" ")}; agents sleep ${SLEEP_MS} ms; ${SLOTS} slots per node (DBOS: workerConcurrency ${SLOTS} per process); ` +
        `${WAVES} waves of runs per phase; one PostgreSQL cluster (fsync on)`,
    );
    const results = { warden: [] as PhaseResult[], dbos: [] as PhaseResult[] };
    for (const n of FLEET) {
      results.warden.push(await warden.phase(n));
      results.dbos.push(await dbos.phase(n));
    }
    const ratio = (label: string, value: number, base: number, target?: number): string =>
      `${label}: ${value.toFixed(2)} vs ${base.toFixed(2)} runs/s = ${(value / base).toFixed(2)}x${target === undefined ? "" : `  (target >= ${target}x: ${value / base >= target ? "met" : "NOT met"})`}`;
    const line = (side: string, r: PhaseResult): string =>
      `  ${side}, ${r.n} ${r.n === 1 ? "process" : "processes"}: ${fmt(r.runs)} runs in ${r.seconds.toFixed(1)} s = ${r.perSec.toFixed(2)} runs/s (ideal ${((SLOTS * r.n * 1000) / SLEEP_MS).toFixed(0)}/s); at most ${r.maxPerNode} agents at once on a node`;
    for (const r of results.warden) console.log(line("warden", r));
    for (const r of results.dbos) console.log(line("DBOS", r));
    const [w1, w3] = [results.warden[0]!, results.warden.at(-1)!];
    const [d1, d3] = [results.dbos[0]!, results.dbos.at(-1)!];
    console.log(ratio("warden scaling, runs/s with 3 nodes vs 1 node", w3.perSec, w1.perSec, 2.7));
    console.log(ratio("DBOS scaling, runs/s with 3 processes vs 1 process (for reference)", d3.perSec, d1.perSec));
    for (let i = 0; i < FLEET.length; i++) {
      console.log(ratio(`runs/s with ${FLEET[i]} node(s), warden vs DBOS Transact's queue`, results.warden[i]!.perSec, results.dbos[i]!.perSec));
    }

    const totalSlots = SLOTS * FLEET.at(-1)!;
    const wardenSpawn = await wardenDequeueToSpawn(wardenUrl, wardenLog);
    const bare = await bareDequeue(wardenUrl, wardenSpawn.count, totalSlots, undefined);
    const bareSpawn = await bareDequeue(wardenUrl, wardenSpawn.count, totalSlots, join(root, "bare-agents.log"));
    console.log(`warden dequeue to spawn (lease to the agent's first line): ${describeSpread(wardenSpawn)}`);
    console.log(`  baseline, a bare FOR UPDATE SKIP LOCKED dequeue of warden's table shape, ${totalSlots} loops: ${describeSpread(bare)}`);
    console.log(`  baseline, the bare dequeue then the spawn of the same agent to its first line, ${totalSlots} loops: ${describeSpread(bareSpawn)}`);
    console.log(ratioLine("dequeue to spawn p50, warden vs bare dequeue + spawn", wardenSpawn.p50, bareSpawn.p50, "ms"));
    console.log(ratioLine("dequeue to spawn p99, warden vs bare dequeue + spawn", wardenSpawn.p99, bareSpawn.p99, "ms"));
    console.log(ratioLine("dequeue to spawn p50, warden vs the bare dequeue alone", wardenSpawn.p50, bare.p50, "ms"));
  } finally {
    await warden.close().catch(() => undefined);
    await dbos.close().catch(() => undefined);
    await server.stop();
  }
}
