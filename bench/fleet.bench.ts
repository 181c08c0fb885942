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
 *    Beside them, in the same rounds, the floor of a replay on this host: a bare `pg` pool reading
 *    warden's claim rows by primary key, one statement per replay, with no checks
 *    (fleet-side.ts `floorSide`). Its p99 shows how far the host lets the p99 target be reached.
 *
 * Each side runs in a process of its own (bench/fleet-side.ts), as it would be deployed, so
 * neither's heap, timers or background work lands in the other's latencies. Both stay open for
 * the whole run and their phases alternate (warden, DBOS, warden, …), so load from other
 * processes on a shared machine falls on both alike; the median round is reported, with the CPU
 * each side used per call (its process incl. worker threads, and the PostgreSQL server
 * processes).
 *
 * The cluster is started by test/support/postgres.ts (fsync on, synchronous_commit on, unix
 * socket) and removed at the end; WARDEN_TEST_POSTGRES_URL points it at an existing server.
 */
import { fork, type ChildProcess } from "node:child_process";
import { loadavg } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import pg from "pg";
import { startTestPostgres, type TestPostgres } from "../test/support/postgres.js";
import { fmt, medianBy, ratioLine } from "./baseline.js";
import type { PhaseKind, PhaseResult, SideCommand, SideMessage } from "./fleet-side.js";

const CONCURRENCY = 64;
const WARMUP_S = 1;
const PHASE_S = 3;
const NEW_ROUNDS = 3;
const REPLAY_ROUNDS = 3;
const SIDE_ENTRY = join(dirname(fileURLToPath(import.meta.url)), "fleet-side.ts");

interface Phase extends PhaseResult {
  /** CPU per call, ms: the side's process (main thread and workers) and the database server */
  readonly clientMs: number;
  readonly serverMs: number | undefined;
  /** WAL bytes written during the phase */
  readonly wal: number;
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

/** A side's process: phases run there, the database's CPU and WAL are measured here around them. */
class Side {
  readonly name: string;
  readonly url: string;
  readonly #child: ChildProcess;
  #waiting: { resolve: (message: SideMessage) => void; reject: (error: Error) => void } | undefined;
  readonly #exited: Promise<void>;

  private constructor(name: string, url: string, child: ChildProcess) {
    this.name = name;
    this.url = url;
    this.#child = child;
    child.on("message", (message: SideMessage) => {
      const waiting = this.#waiting;
      this.#waiting = undefined;
      waiting?.resolve(message);
    });
    this.#exited = new Promise((done) =>
      child.once("exit", (code, signal) => {
        this.#waiting?.reject(new Error(`${name} side exited (${signal ?? code}) during a phase`));
        this.#waiting = undefined;
        done();
      }),
    );
  }

  static async start(name: "warden" | "dbos" | "floor", url: string): Promise<Side> {
    const child = fork(SIDE_ENTRY, [name, url, String(CONCURRENCY)], { execArgv: ["--import", "tsx"], stdio: ["ignore", "inherit", "inherit", "ipc"] });
    const side = new Side(name === "dbos" ? "DBOS" : name, url, child);
    const ready = await side.#next();
    if (ready.op !== "ready") throw new Error(`${name} side did not start: ${JSON.stringify(ready)}`);
    return side;
  }

  async phase(server: TestPostgres, kind: PhaseKind, seconds: number): Promise<Phase> {
    const lsn = await walLsn(this.url);
    const serverBefore = server.serverCpuMs();
    const answer = this.#next();
    this.#send({ op: "phase", kind, seconds });
    const message = await answer;
    if (message.op !== "phase") throw new Error(`${this.name} ${kind} phase failed: ${message.op === "failed" ? message.error : message.op}`);
    const serverAfter = server.serverCpuMs();
    const wal = await walSince(this.url, lsn);
    const result = message.result;
    return {
      ...result,
      clientMs: result.cpuMs / result.count,
      serverMs: serverBefore === undefined || serverAfter === undefined ? undefined : (serverAfter - serverBefore) / result.count,
      wal,
    };
  }

  async close(): Promise<void> {
    if (this.#child.exitCode === null && this.#child.signalCode === null && this.#child.connected) this.#send({ op: "close" });
    const timer = setTimeout(() => this.#child.kill("SIGKILL"), 10_000);
    await this.#exited;
    clearTimeout(timer);
  }

  #next(): Promise<SideMessage> {
    return new Promise((resolve, reject) => (this.#waiting = { resolve, reject }));
  }

  #send(command: SideCommand): void {
    this.#child.send(command);
  }
}

function median(phases: readonly Phase[]): Phase {
  return medianBy(phases, (p) => p.perSec);
}

function describe(side: string, phase: Phase): string {
  const server = phase.serverMs === undefined ? "" : `, server ${phase.serverMs.toFixed(2)} ms`;
  return `${side}: ${fmt(phase.perSec)}/s, p50 ${phase.p50.toFixed(2)} ms, p99 ${phase.p99.toFixed(2)} ms; CPU per call: client ${phase.clientMs.toFixed(2)} ms${server}; WAL ${fmt(phase.wal / phase.count)} B/call`;
}

export default async function (): Promise<void> {
  const server = await startTestPostgres();
  const sides: Side[] = [];
  try {
    const warden = await Side.start("warden", await server.createDatabase("bench_warden"));
    sides.push(warden);
    const dbos = await Side.start("dbos", await server.createDatabase("bench_dbos"));
    sides.push(dbos);
    console.log(
      `machine load average ${loadavg().map((l) => l.toFixed(1)).join(" ")}; concurrency ${CONCURRENCY}; one PostgreSQL cluster (fsync on); each side in its own process`,
    );
    for (const side of sides) await side.phase(server, "fresh", WARMUP_S);
    const fresh = new Map<Side, Phase[]>(sides.map((s) => [s, []]));
    for (let round = 0; round < NEW_ROUNDS; round++) {
      for (const side of sides) fresh.get(side)!.push(await side.phase(server, "fresh", PHASE_S));
    }
    // The floor of a replay here (fleet-side.ts `floorSide`), on warden's completed ids, taking its
    // turn in the same rounds: the host's speed moves the p99 target's reach, and this shows it.
    const floor = await Side.start("floor", warden.url);
    sides.push(floor);
    // The replay path is other code than a new invocation's: it warms up too, uncounted, as the
    // fresh phases did (its first round otherwise carried the JIT's compiling in its p99).
    for (const side of sides) await side.phase(server, "replay", WARMUP_S);
    const replays = new Map<Side, Phase[]>(sides.map((s) => [s, []]));
    for (let round = 0; round < REPLAY_ROUNDS; round++) {
      for (const side of sides) replays.get(side)!.push(await side.phase(server, "replay", PHASE_S));
    }
    const floorReplays = replays.get(floor)!;
    const wardenReplays = replays.get(warden)!;
    const replayWrites = wardenReplays.reduce((n, p) => n + (p.writes ?? 0), 0);
    const replayReads = wardenReplays.reduce((n, p) => n + (p.reads ?? 0), 0);
    const replayCount = wardenReplays.reduce((n, p) => n + p.count, 0);
    const [wf, df] = [median(fresh.get(warden)!), median(fresh.get(dbos)!)];
    const [wr, dr] = [median(wardenReplays), median(replays.get(dbos)!)];
    console.log(ratioLine(`new invocations/s (median of ${NEW_ROUNDS} alternating rounds), warden (signed journal) vs DBOS`, wf.perSec, df.perSec, "/s", 2));
    console.log(`  ${describe("warden", wf)}`);
    console.log(`  ${describe("DBOS", df)}`);
    console.log(`  all rounds, warden: ${fresh.get(warden)!.map((p) => fmt(p.perSec)).join(", ")}; DBOS: ${fresh.get(dbos)!.map((p) => fmt(p.perSec)).join(", ")}`);
    console.log(ratioLine(`replays/s of completed ids (median of ${REPLAY_ROUNDS}), warden vs DBOS`, wr.perSec, dr.perSec, "/s", 5));
    console.log(`  ${describe("warden", wr)} (target p99 < 10 ms: ${wr.p99 < 10 ? "met" : "NOT met"})`);
    console.log(
      `  warden replay phase: event loop delay p99 ${wr.loopDelayP99.toFixed(1)} ms; GC pauses ${wr.gc.count}, ${wr.gc.ms.toFixed(0)} ms in all, longest ${wr.gc.maxMs.toFixed(1)} ms`,
    );
    console.log(`  all rounds, warden: ${wardenReplays.map((p) => `${fmt(p.perSec)}/s p99 ${p.p99.toFixed(2)} ms`).join(", ")}`);
    console.log(`  ${describe("DBOS", dr)}`);
    const fr = median(floorReplays);
    console.log(
      `  floor here, same rounds (a bare pg pool of 16 reading the claim row by primary key, one statement per replay, no checks) ` +
        `${describe("floor", fr)}; event loop delay p99 ${fr.loopDelayP99.toFixed(1)} ms, GC pauses ${fr.gc.count}, longest ${fr.gc.maxMs.toFixed(1)} ms ` +
        `[all rounds: ${floorReplays.map((p) => `${fmt(p.perSec)}/s p99 ${p.p99.toFixed(2)} ms`).join(", ")}]`,
    );
    console.log(`  warden replays sent ${replayWrites} write statements (${replayWrites === 0 ? "a replay is a read" : "NOT a read"})`);
    console.log(
      `  warden replays sent ${fmt(replayReads)} read statements for ${fmt(replayCount)} replays (${(replayCount / Math.max(replayReads, 1)).toFixed(1)} replays share one round trip)`,
    );
  } finally {
    for (const side of sides.reverse()) await side.close().catch(() => undefined);
    await server.stop();
  }
}
