/**
 * The fleet's transparency log on PostgreSQL (issue 21), `npm run bench -- log-fleet`:
 *
 * 1. Statements appended per second by 64 concurrent appenders through TransparencyLog (batched as
 *    a node batches them): on one postgres node, and on two nodes (two pools, 32 appenders each)
 *    taking turns at the log's head-row lock, against the embedded store (baseline).
 * 2. Inclusion proof latency (p50/p99, TransparencyLog.inclusion) in a log of 10⁵ leaves on
 *    PostgreSQL against the same on SQLite (baseline), and the statements one proof sends.
 */
import { join } from "node:path";
import { loadavg } from "node:os";
import { EmbeddedLogStore } from "../src/backends/embedded/log/log-store.js";
import { openPool, type PgPool } from "../src/backends/postgres/connection.js";
import { PostgresLogStore } from "../src/backends/postgres/log-store.js";
import { migrate } from "../src/backends/postgres/schema.js";
import { generateSigningKey } from "../src/journal/keys.js";
import { TransparencyLog } from "../src/tlog/log.js";
import type { LogStore } from "../src/tlog/store.js";
import { startTestPostgres, type TestPostgres } from "../test/support/postgres.js";
import { benchDir, fmt, median, ratioLine } from "./baseline.js";
import { proofLatencies } from "./log.bench.js";

const APPENDERS = 64;
const SECONDS = 3;
const ROUNDS = 3;
const PROOF_LEAVES = 100_000;
const PROOF_SAMPLES = 3_000;
const WARMUP = 300;
const { key } = generateSigningKey();

const logOn = (store: LogStore): TransparencyLog => new TransparencyLog({ store, origin: "bench.example/log", key: async () => key, checkpointIntervalMs: 3_600_000 });

async function postgresDb(server: TestPostgres, label: string, pools: number): Promise<PgPool[]> {
  const url = await server.createDatabase(label);
  const opened = Array.from({ length: pools }, () => openPool({ url }, 8));
  await migrate(opened[0]!);
  return opened;
}

/** Statements/s appended by APPENDERS loops spread over `logs`. */
async function appendRate(logs: readonly TransparencyLog[]): Promise<number> {
  let done = 0;
  let n = 0;
  const start = performance.now();
  const end = start + SECONDS * 1000;
  await Promise.all(
    Array.from({ length: APPENDERS }, async (_, i) => {
      const log = logs[i % logs.length]!;
      while (performance.now() < end) {
        const tag = n++;
        await log.append({ v: 1, type: "bundle.committed", bundle_id: "bench", revision: `r${tag}`, bundle_digest: `sha256:${"a".repeat(64)}`, manifest_digest: `sha256:${"b".repeat(64)}` });
        done++;
      }
    }),
  );
  return done / ((performance.now() - start) / 1000);
}

async function fill(store: LogStore, leaves: number): Promise<void> {
  for (let at = 0; at < leaves; at += 5_000) {
    await store.append(Array.from({ length: Math.min(5_000, leaves - at) }, (_, i) => ({ key: `run:${at + i}`, body: Buffer.from(`{"bench":${at + i},"pad":"${"x".repeat(200)}"}`) })));
  }
}

export default async function (): Promise<void> {
  console.log(`load average ${loadavg().map((l) => l.toFixed(1)).join(" ")}`);
  const server = await startTestPostgres();
  try {
    const embedded: number[] = [];
    const one: number[] = [];
    const two: number[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      const dir = benchDir("log-fleet");
      const local = logOn(new EmbeddedLogStore(join(dir, "tlog.sqlite")));
      embedded.push(await appendRate([local]));
      await local.close();
      const [single] = await postgresDb(server, `one-${round}`, 1);
      one.push(await appendRate([logOn(new PostgresLogStore(single!))]));
      await single!.end();
      const pair = await postgresDb(server, `two-${round}`, 2);
      two.push(await appendRate(pair.map((p) => logOn(new PostgresLogStore(p)))));
      for (const p of pair) await p.end();
    }
    console.log(`rounds (embedded / postgres 1 node / postgres 2 nodes): ${embedded.map((v) => fmt(v)).join(", ")} / ${one.map((v) => fmt(v)).join(", ")} / ${two.map((v) => fmt(v)).join(", ")} statements/s`);
    console.log(ratioLine(`${APPENDERS} appenders, postgres 1 node vs embedded (baseline)`, median(one), median(embedded), "statements/s"));
    console.log(ratioLine(`${APPENDERS} appenders, postgres 2 nodes vs postgres 1 node (baseline)`, median(two), median(one), "statements/s"));

    const dir = benchDir("log-fleet-proof");
    const sqlite = new EmbeddedLogStore(join(dir, "tlog.sqlite"));
    await fill(sqlite, PROOF_LEAVES);
    const [pool] = await postgresDb(server, "proof", 1);
    let statements = 0;
    const counted = pool!.query.bind(pool!);
    (pool as unknown as { query: typeof counted }).query = ((...args: Parameters<typeof counted>) => {
      statements++;
      return counted(...args);
    }) as typeof counted;
    const pgStore = new PostgresLogStore(pool!);
    const t0 = performance.now();
    await fill(pgStore, PROOF_LEAVES);
    console.log(`filled a postgres log of ${fmt(PROOF_LEAVES)} leaves in ${fmt((performance.now() - t0) / 1000, 1)} s (batches of 5,000)`);
    const [onSqlite, onPg] = [logOn(sqlite), logOn(pgStore)];
    const base = await proofLatencies(onSqlite, PROOF_LEAVES, PROOF_SAMPLES, WARMUP);
    statements = 0;
    const figures = await proofLatencies(onPg, PROOF_LEAVES, PROOF_SAMPLES, WARMUP);
    console.log(`postgres statements per inclusion proof: ${fmt(statements / (PROOF_SAMPLES + WARMUP), 1)} (the log's size, then every node the proof needs in one)`);
    console.log(`inclusion proof on postgres p50 ${figures.p50.toFixed(3)} ms, p99 ${figures.p99.toFixed(3)} ms at ${fmt(PROOF_LEAVES)} leaves`);
    console.log(ratioLine(`inclusion proof p99 at ${fmt(PROOF_LEAVES)} leaves, postgres vs embedded (baseline)`, figures.p99 * 1000, base.p99 * 1000, "µs"));
    await onSqlite.close();
    await pool!.end();
  } finally {
    await server.stop();
  }
}
