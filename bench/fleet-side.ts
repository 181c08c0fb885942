/**
 * One side of the fleet bench (fleet.bench.ts), in a process of its own, as each would run in a
 * deployment: `node --import tsx bench/fleet-side.ts <warden|dbos|floor> <database url> <concurrency>`. Neither side's
 * heap, timers or background work (DBOS polls its queues) lands in the other's latencies.
 *
 * The parent sends `{ op: "phase", kind, seconds }` over IPC; this process runs the calls from
 * `concurrency` loops and answers with a PhaseResult: throughput, latency percentiles, its own CPU
 * (main thread and workers), how late its event loop ran, its GC pauses, and — for warden — the
 * statements its backend sent. `{ op: "close" }` closes the side and exits.
 */
import { randomUUID } from "node:crypto";
import { monitorEventLoopDelay, PerformanceObserver } from "node:perf_hooks";
import { DBOS } from "@dbos-inc/dbos-sdk";
import pg from "pg";
import { openPostgresBackend } from "../src/backends/postgres/index.js";
import { Invocations } from "../src/invocations/index.js";
import { tsRunChecker } from "../test/invocations/fixtures/ts-worker.js";
import { percentile } from "./baseline.js";

const SCOPE = "bench";
const REQUEST = { task: "bench" };

export type PhaseKind = "fresh" | "replay";

export type SideCommand = { readonly op: "phase"; readonly kind: PhaseKind; readonly seconds: number } | { readonly op: "close" };

export interface PhaseResult {
  readonly perSec: number;
  readonly count: number;
  readonly p50: number;
  readonly p99: number;
  /** CPU of this process (main thread and workers), ms */
  readonly cpuMs: number;
  /** how late the event loop ran (p99, ms) and this process's GC pauses */
  readonly loopDelayP99: number;
  readonly gc: { readonly count: number; readonly ms: number; readonly maxMs: number };
  /** statements the backend sent during the phase (warden only) */
  readonly writes?: number;
  readonly reads?: number;
}

export type SideMessage = { readonly op: "ready" } | { readonly op: "phase"; readonly result: PhaseResult } | { readonly op: "failed"; readonly error: string };

interface Side {
  fresh(): Promise<string>;
  replay(id: string): Promise<void>;
  statements?(): { readonly writes: number; readonly reads: number };
  close(): Promise<void>;
}

async function wardenSide(url: string): Promise<Side> {
  const backend = await openPostgresBackend({ url });
  const checker = tsRunChecker();
  const invocations = new Invocations({ claims: backend.claims, journals: backend.journals, keys: backend.keys, limits: backend.limits, checker });
  return {
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
    statements: () => ({
      writes: backend.claims.commits + backend.journals.commits,
      reads: backend.claims.reads + backend.journals.reads,
    }),
    async close() {
      await checker.close();
      await backend.close();
    },
  };
}

/**
 * The floor of a replay here: the least any implementation on this database does to answer one,
 * on warden's own rows. A bare `pg` pool as large as warden's reads the claim row by its primary
 * key, one prepared statement per replay, and checks nothing (no request hash, no journal, no
 * owner). Its ids are the ones warden completed (it runs on warden's database, read-only).
 */
async function floorSide(url: string): Promise<Side & { ids(): Promise<readonly string[]> }> {
  const pool = new pg.Pool({ connectionString: url, max: 16 });
  return {
    fresh: () => Promise.reject(new Error("the floor side only replays")),
    async replay(id) {
      const { rows } = await pool.query<{ result: string | null }>({
        name: "floor-read",
        text: "SELECT * FROM warden_claims WHERE scope = $1 AND id = $2",
        values: [SCOPE, id],
      });
      if (rows[0]?.result == null) throw new Error(`floor replay of ${id} found no result`);
    },
    async ids() {
      const { rows } = await pool.query<{ id: string }>("SELECT id FROM warden_claims WHERE scope = $1 AND result IS NOT NULL", [SCOPE]);
      return rows.map((r) => r.id);
    },
    close: () => pool.end(),
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
    async fresh() {
      const id = randomUUID();
      await run(id);
      return id;
    },
    replay: run,
    close: () => DBOS.shutdown(),
  };
}

/** Runs `op` from `concurrency` loops for `seconds`. */
async function measure(concurrency: number, seconds: number, op: (i: number) => Promise<void>, side: Side): Promise<PhaseResult> {
  const samples: number[] = [];
  let next = 0;
  const loopDelay = monitorEventLoopDelay({ resolution: 1 });
  const pauses: number[] = [];
  const gcWatch = new PerformanceObserver((list) => {
    for (const entry of list.getEntries()) pauses.push(entry.duration);
  });
  gcWatch.observe({ entryTypes: ["gc"] });
  const statementsBefore = side.statements?.();
  loopDelay.enable();
  const cpuBefore = process.cpuUsage();
  const start = performance.now();
  const end = start + seconds * 1000;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
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
  const statementsAfter = side.statements?.();
  samples.sort((a, b) => a - b);
  return {
    perSec: samples.length / elapsed,
    count: samples.length,
    p50: percentile(samples, 50),
    p99: percentile(samples, 99),
    cpuMs: (cpu.user + cpu.system) / 1000,
    loopDelayP99: loopDelay.percentile(99) / 1e6,
    gc: { count: pauses.length, ms: pauses.reduce((a, b) => a + b, 0), maxMs: Math.max(0, ...pauses) },
    ...(statementsBefore !== undefined && statementsAfter !== undefined
      ? { writes: statementsAfter.writes - statementsBefore.writes, reads: statementsAfter.reads - statementsBefore.reads }
      : {}),
  };
}

async function main(): Promise<void> {
  const [name, url, loops] = process.argv.slice(2);
  const concurrency = Number(loops);
  if ((name !== "warden" && name !== "dbos" && name !== "floor") || url === undefined || !Number.isSafeInteger(concurrency) || concurrency < 1) {
    throw new Error("usage: fleet-side.ts <warden|dbos|floor> <database url> <concurrency>");
  }
  const floor = name === "floor" ? await floorSide(url) : undefined;
  const side = floor ?? (name === "warden" ? await wardenSide(url) : await dbosSide(url));
  const completed: string[] = floor === undefined ? [] : [...(await floor.ids())];
  const send = (message: SideMessage): void => void process.send!(message);
  process.on("message", (command: SideCommand) => {
    if (command.op === "close") {
      void side.close().finally(() => process.disconnect());
      return;
    }
    const op =
      command.kind === "fresh"
        ? async (): Promise<void> => void completed.push(await side.fresh())
        : (i: number): Promise<void> => side.replay(completed[(i * 7919) % completed.length]!);
    measure(concurrency, command.seconds, op, side).then(
      (result) => send({ op: "phase", result }),
      (error: unknown) => send({ op: "failed", error: error instanceof Error ? (error.stack ?? error.message) : String(error) }),
    );
  });
  send({ op: "ready" });
}

await main();
