/**
 * Fleet bench (issue 7): warden on the postgres backend vs DBOS Transact (`@dbos-inc/dbos-sdk`
 * 5.3.0, the TypeScript idempotency anchor) on the same throwaway PostgreSQL cluster, in one run:
 *
 * 1. New invocations/s at concurrency 64. warden: `Invocations.run` of a fresh id with one no-op
 *    effect — claim, signed journal (run.started, effect.started/finished, run.terminated, every
 *    line durable), the whole journal verified (worker pool), result recorded. DBOS:
 *    `DBOS.startWorkflow(wf, {workflowID})()` of a workflow with one no-op step, then
 *    `getResult()`. Target: warden >= 2x DBOS.
 * 2. Replays/s of completed ids at concurrency 64, with latency percentiles: the same calls again
 *    with ids that completed in phase 1. Target: warden >= 5x DBOS, warden p99 < 10 ms. A warden
 *    replay must be a read: its write statements are counted (must be 0), its read statements too
 *    (claim row and journal come in one statement, which concurrent replays share), and the WAL
 *    each side generates during its replay phase is printed.
 *
 * Both sides stay open for the whole run and their phases alternate (warden, DBOS, warden, …),
 * so load from other processes on a shared machine falls on both alike; the median round is
 * reported, with the CPU each side used per call (this process incl. worker threads, and the
 * PostgreSQL server processes).
 *
 * The cluster is started by test/support/postgres.ts (fsync on, synchronous_commit on, unix
 * socket) and removed at the end; WARDEN_TEST_POSTGRES_URL points it at an existing server.
 */
import { randomUUID } from "node:crypto";
import { loadavg } from "node:os";
import { monitorEventLoopDelay, PerformanceObserver } from "node:perf_hooks";
import pg from "pg";
import { DBOS } from "@dbos-inc/dbos-sdk";
import { openPostgresBackend } from "../src/backends/postgres/index.js";
import { Invocations } from "../src/invocations/index.js";
import { tsRunChecker } from "../test/invocations/fixtures/ts-worker.js";
import { startTestPostgres, type TestPostgres } from "../test/support/postgres.js";
import { fmt, percentile, ratioLine } from "./baseline.js";

const CONCURRENCY = 64;
const WARMUP_S = 1;
const PHASE_S = 3;
const NEW_ROUNDS = 3;
const REPLAY_ROUNDS = 2;
const SCOPE = "bench";
const REQUEST = { task: "bench" };

interface Phase {
  readonly perSec: number;
  readonly count: number;
  readonly p50: number;
  readonly p99: number;
  /** CPU per call, ms: this process (main thread and workers) and the database server */
  readonly clientMs: number;
  readonly serverMs: number | undefined;
  /** WAL bytes written during the phase */
  readonly wal: number;
  /** where a tail comes from: how late the event loop ran (p99, ms) and this process's GC pauses */
  readonly loopDelayP99: number;
  readonly gc: { readonly count: number; readonly ms: number; readonly maxMs: number };
}

/** One side under test: a new call and a replay of a completed id, and its write statements so far. */
interface Side {
  readonly name: string;
  readonly url: string;
  fresh(): Promise<string>;
  replay(id: string): Promise<void>;
  writes?(): number;
  reads?(): number;
  close(): Promise<void>;
}

async function withClient<T>(url: string, work: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return await work(client);
  } finally {
    await client.end();
  }
}

const walLsn = (url: string): Promise<string> =>
  withClient(url, async (c) => (await c.query<{ lsn: string }>("SELECT pg_current_wal_lsn()::text AS lsn")).rows[0]!.lsn);
const walSince = (url: string, lsn: string): Promise<number> =>
  withClient(url, async (c) => Number((await c.query<{ b: string }>("SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), $1)::bigint AS b", [lsn])).rows[0]!.b));

/** Runs `op` from CONCURRENCY loops for `seconds`: throughput, latency percentiles and CPU per call. */
async function measure(server: TestPostgres, url: string, seconds: number, op: (i: number) => Promise<void>): Promise<Phase> {
  const samples: number[] = [];
  let next = 0;
  const lsn = await walLsn(url);
  const loopDelay = monitorEventLoopDelay({ resolution: 1 });
  const pauses: number[] = [];
  const gcWatch = new PerformanceObserver((list) => {
    for (const entry of list.getEntries()) pauses.push(entry.duration);
  });
  gcWatch.observe({ entryTypes: ["gc"] });
  loopDelay.enable();
  const serverBefore = server.serverCpuMs();
  const cpuBefore = process.cpuUsage();
  const start = performance.now();
  const end = start + seconds * 1000;
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (performance.now() < end) {
        const t0 = performance.now();
        await op(next++);
        samples.push(performance.now() - t0);
      }
    }),
  );
  const elapsed = (performance.now() - start) / 1000;
  const cpu = process.cpuUsage(cpuBefore);
  loopDelay.disable();
  gcWatch.disconnect();
  const serverAfter = server.serverCpuMs();
  const wal = await walSince(url, lsn);
  samples.sort((a, b) => a - b);
  const n = samples.length;
  return {
    perSec: n / elapsed,
    count: n,
    p50: percentile(samples, 50),
    p99: percentile(samples, 99),
    clientMs: (cpu.user + cpu.system) / 1000 / n,
    serverMs: serverBefore === undefined || serverAfter === undefined ? undefined : (serverAfter - serverBefore) / n,
    wal,
    loopDelayP99: loopDelay.percentile(99) / 1e6,
    gc: { count: pauses.length, ms: pauses.reduce((a, b) => a + b, 0), maxMs: Math.max(0, ...pauses) },
  };
}

async function wardenSide(url: string): Promise<Side> {
  const backend = await openPostgresBackend({ url });
  const checker = tsRunChecker();
  const invocations = new Invocations({ claims: backend.claims, journals: backend.journals, keys: backend.keys, limits: backend.limits, checker });
  return {
    name: "warden",
    url,
    async fresh() {
      const id = randomUUID();
      const outcome = await invocations.run(SCOPE, id, REQUEST, "bench", async (h) => {
        await h.effect({ kind: "tool", name: "noop", fingerprint: "bench" }, () => 1);
        return { ok: true };
      });
      if (outcome.status !== "recorded" || outcome.replayed) throw new Error(`warden bench call ended ${outcome.status}`);
      return id;
    },
    // What a retry of a completed id costs: the lookup every start does first (Warden.start,
    // POST /v1/invocations), which answers a recorded id without claiming anything.
    async replay(id) {
      const known = await invocations.lookup(SCOPE, id, REQUEST);
      if (known?.status !== "recorded" || !known.replayed) throw new Error(`warden replay answered ${String(known?.status)}`);
    },
    writes: () => backend.claims.commits + backend.journals.commits,
    reads: () => backend.claims.reads + backend.journals.reads,
    async close() {
      await checker.close();
      await backend.close();
    },
  };
}

async function dbosSide(url: string): Promise<Side> {
  // DBOS sets idle_in_transaction_session_timeout (60 s by default) on each new pooled connection
  // with a query it queues ahead of the borrower's own, which pg 8 reports as a deprecated
  // concurrent client.query(). The same setting in the connection's startup options makes DBOS
  // skip that query: its sessions are configured exactly as before, through the supported path.
  const configured = new URL(url);
  configured.searchParams.set("options", "-c idle_in_transaction_session_timeout=60000");
  DBOS.setConfig({ name: "warden-fleet-bench", systemDatabaseUrl: configured.href, systemDatabasePoolSize: 20, logLevel: "error" });
  const workflow = DBOS.registerWorkflow(
    async (): Promise<{ ok: boolean }> => {
      await DBOS.runStep(async () => 1, { name: "noop" });
      return { ok: true };
    },
    { name: "benchWorkflow" },
  );
  await DBOS.launch();
  const run = async (workflowID: string): Promise<void> => {
    const handle = await DBOS.startWorkflow(workflow, { workflowID })();
    if ((await handle.getResult()).ok !== true) throw new Error("DBOS bench workflow returned no result");
  };
  return {
    name: "DBOS",
    url,
    async fresh() {
      const id = randomUUID();
      await run(id);
      return id;
    },
    replay: run,
    close: () => DBOS.shutdown(),
  };
}

function median(phases: readonly Phase[]): Phase {
  return [...phases].sort((a, b) => a.perSec - b.perSec)[Math.floor(phases.length / 2)]!;
}

function describe(side: string, phase: Phase): string {
  const server = phase.serverMs === undefined ? "" : `, server ${phase.serverMs.toFixed(2)} ms`;
  return `${side}: ${fmt(phase.perSec)}/s, p50 ${phase.p50.toFixed(2)} ms, p99 ${phase.p99.toFixed(2)} ms; CPU per call: client ${phase.clientMs.toFixed(2)} ms${server}; WAL ${fmt(phase.wal / phase.count)} B/call`;
}

export default async function (): Promise<void> {
  const server = await startTestPostgres();
  const sides: Side[] = [];
  try {
    const warden = await wardenSide(await server.createDatabase("bench_warden"));
    sides.push(warden);
    const dbos = await dbosSide(await server.createDatabase("bench_dbos"));
    sides.push(dbos);
    console.log(`machine load average ${loadavg().map((l) => l.toFixed(1)).join(" ")}; concurrency ${CONCURRENCY}; one PostgreSQL cluster (fsync on)`);
    const completed = new Map<Side, string[]>(sides.map((s) => [s, []]));
    for (const side of sides) await measure(server, side.url, WARMUP_S, async () => void (await side.fresh()));
    const fresh = new Map<Side, Phase[]>(sides.map((s) => [s, []]));
    for (let round = 0; round < NEW_ROUNDS; round++) {
      for (const side of sides) {
        const ids = completed.get(side)!;
        fresh.get(side)!.push(await measure(server, side.url, PHASE_S, async () => void ids.push(await side.fresh())));
      }
    }
    const replays = new Map<Side, Phase[]>(sides.map((s) => [s, []]));
    const wardenWrites = warden.writes!();
    const wardenReads = warden.reads!();
    for (let round = 0; round < REPLAY_ROUNDS; round++) {
      for (const side of sides) {
        const ids = completed.get(side)!;
        replays.get(side)!.push(await measure(server, side.url, PHASE_S, (i) => side.replay(ids[(i * 7919) % ids.length]!)));
      }
    }
    const replayWrites = warden.writes!() - wardenWrites;
    const replayReads = warden.reads!() - wardenReads;
    const replayCount = replays.get(warden)!.reduce((n, p) => n + p.count, 0);
    const [wf, df] = [median(fresh.get(warden)!), median(fresh.get(dbos)!)];
    const [wr, dr] = [median(replays.get(warden)!), median(replays.get(dbos)!)];
    console.log(ratioLine(`new invocations/s (median of ${NEW_ROUNDS} alternating rounds), warden (signed journal) vs DBOS`, wf.perSec, df.perSec, "/s", 2));
    console.log(`  ${describe("warden", wf)}`);
    console.log(`  ${describe("DBOS", df)}`);
    console.log(`  all rounds, warden: ${fresh.get(warden)!.map((p) => fmt(p.perSec)).join(", ")}; DBOS: ${fresh.get(dbos)!.map((p) => fmt(p.perSec)).join(", ")}`);
    console.log(ratioLine(`replays/s of completed ids (median of ${REPLAY_ROUNDS}), warden vs DBOS`, wr.perSec, dr.perSec, "/s", 5));
    console.log(`  ${describe("warden", wr)} (target p99 < 10 ms: ${wr.p99 < 10 ? "met" : "NOT met"})`);
    console.log(
      `  warden replay phase: event loop delay p99 ${wr.loopDelayP99.toFixed(1)} ms; GC pauses ${wr.gc.count}, ${wr.gc.ms.toFixed(0)} ms in all, longest ${wr.gc.maxMs.toFixed(1)} ms`,
    );
    console.log(`  ${describe("DBOS", dr)}`);
    console.log(`  warden replays sent ${replayWrites} write statements (${replayWrites === 0 ? "a replay is a read" : "NOT a read"})`);
    console.log(
      `  warden replays sent ${fmt(replayReads)} read statements for ${fmt(replayCount)} replays (${(replayCount / Math.max(replayReads, 1)).toFixed(1)} replays share one round trip)`,
    );
  } finally {
    for (const side of sides.reverse()) await side.close().catch(() => undefined);
    await server.stop();
  }
}
