/**
 * Transparency log bench (issue 21), `npm run bench -- log`:
 *
 * 1. open→finish invocations/s at concurrency 64 on the embedded backend with the log on (each
 *    recorded run's seal appended and awaited before the run's outcome returns) against the same
 *    with the log off, in alternating rounds in this process (median round of each). Target ≥ 0.95x.
 * 2. Inclusion proof latency (p50/p99, TransparencyLog.inclusion: the stored nodes' dry run, one
 *    read of them, the proof) in a log of 10⁶ leaves, against the same in a log of 10³ leaves.
 *    Target p99 < 1 ms.
 * 3. Bytes of C2SP tiles a verifier fetches to check one run at 10⁶ leaves (the tiles holding or
 *    rebuilding every hash of the inclusion proof, as Go's tlog.TileHashReader fetches them, plus
 *    the checkpoint), against the bytes of the same proof from the API.
 */
import { randomUUID } from "node:crypto";
import { rmSync } from "node:fs";
import { loadavg } from "node:os";
import { join } from "node:path";
import { CLAIM_WRITE_WORKER_URL } from "../src/backends/embedded/claims/claim-store.js";
import { openEmbeddedBackend } from "../src/backends/embedded/index.js";
import { EmbeddedLogStore } from "../src/backends/embedded/log/log-store.js";
import { Invocations } from "../src/invocations/index.js";
import { SIGN_WORKER_URL, Signer, setSharedSigner } from "../src/journal/signer.js";
import { nodesRead, inclusionProof } from "../src/tlog/merkle.js";
import { TransparencyLog } from "../src/tlog/log.js";
import { tsRunChecker, tsWorker } from "../test/invocations/fixtures/ts-worker.js";
import { benchDir, fmt, median, percentile, ratioLine } from "./baseline.js";

const CONCURRENCY = 64;
const SECONDS = 3;
const ROUNDS = 3;
const PROOF_SAMPLES = 10_000;

async function throughput(withLog: boolean): Promise<number> {
  const home = join(benchDir("log-tp"), "home");
  const backend = await openEmbeddedBackend({ home, claimWriteWorker: () => tsWorker(CLAIM_WRITE_WORKER_URL) });
  const log = withLog ? new TransparencyLog({ store: new EmbeddedLogStore(join(home, "tlog.sqlite")), origin: "bench.example/log", key: () => backend.keys.active() }) : undefined;
  await log?.open();
  const invocations = new Invocations({
    claims: backend.claims,
    journals: backend.journals,
    keys: backend.keys,
    limits: backend.limits,
    checker: checker!,
    ...(log === undefined ? {} : { attest: (s, at) => log.append(s, at) }),
  });
  const once = async (): Promise<void> => {
    const outcome = await invocations.run("bench", randomUUID(), { task: "bench" }, "bench", async (h) => {
      await h.effect({ kind: "tool", name: "noop", fingerprint: "bench" }, () => 1);
      return { ok: true };
    });
    if (outcome.status !== "recorded") throw new Error(`bench invocation ended ${outcome.status}`);
  };
  await once();
  let done = 0;
  const start = performance.now();
  const end = start + SECONDS * 1000;
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (performance.now() < end) {
        await once();
        done++;
      }
    }),
  );
  const perSec = done / ((performance.now() - start) / 1000);
  if (log !== undefined && (await log.status()).size < done) throw new Error("the log holds fewer seals than runs");
  await log?.close();
  await backend.close();
  rmSync(join(home, ".."), { recursive: true, force: true });
  return perSec;
}

let checker: ReturnType<typeof tsRunChecker> | undefined;

async function filledLog(leaves: number): Promise<{ log: TransparencyLog; dir: string }> {
  const dir = benchDir("log-proof");
  const store = new EmbeddedLogStore(join(dir, "tlog.sqlite"));
  const batch = 10_000;
  for (let at = 0; at < leaves; at += batch) {
    await store.append(
      Array.from({ length: Math.min(batch, leaves - at) }, (_, i) => ({ key: `run:${at + i}`, body: Buffer.from(`{"bench":${at + i},"pad":"${"x".repeat(200)}"}`) })),
    );
  }
  const { generateSigningKey } = await import("../src/journal/keys.js");
  const { key } = generateSigningKey();
  const log = new TransparencyLog({ store, origin: "bench.example/log", key: async () => key });
  await log.open();
  return { log, dir };
}

/** Inclusion proof latency at random leaves of the tree of `size`, after `warmup` unmeasured ones (also the log-fleet bench's). */
export async function proofLatencies(log: TransparencyLog, size: number, count = PROOF_SAMPLES, warmup = 1000): Promise<{ p50: number; p99: number }> {
  const samples: number[] = [];
  for (let i = 0; i < count + warmup; i++) {
    const index = Math.floor(Math.random() * size);
    const t = performance.now();
    await log.inclusion(index, size);
    if (i >= warmup) samples.push(performance.now() - t);
  }
  samples.sort((a, b) => a - b);
  return { p50: percentile(samples, 50), p99: percentile(samples, 99) };
}

/** Tiles (level, index, width) holding or rebuilding the stored nodes an inclusion proof reads. */
function tileBytesFor(index: number, size: number): number {
  const tiles = new Map<string, number>();
  for (const node of nodesRead((read) => inclusionProof(index, size, read))) {
    const level = Math.floor(node.level / 8);
    // A node between tile levels is rebuilt from the tile below it that spans it.
    const first = node.index * 2 ** (node.level - level * 8);
    const tile = Math.floor(first / 256);
    const full = (tile + 1) * 256 * 256 ** level <= size;
    const width = full ? 256 : Math.floor(size / 256 ** level) - tile * 256;
    tiles.set(`${level}/${tile}`, width * 32);
  }
  return [...tiles.values()].reduce((a, b) => a + b, 0);
}

export default async function (): Promise<void> {
  console.log(`load average ${loadavg().map((l) => l.toFixed(1)).join(" ")}`);
  checker = tsRunChecker();
  const signer = new Signer({ spawn: () => tsWorker(SIGN_WORKER_URL) });
  setSharedSigner(signer);
  const on: number[] = [];
  const off: number[] = [];
  for (let round = 0; round < ROUNDS; round++) {
    off.push(await throughput(false));
    on.push(await throughput(true));
  }
  await checker.close();
  await signer.close();
  console.log(`rounds (log off / on): ${off.map((v) => fmt(v)).join(", ")} / ${on.map((v) => fmt(v)).join(", ")} invocations/s`);
  console.log(ratioLine(`c=${CONCURRENCY} throughput, log on vs log off (baseline)`, median(on), median(off), "invocations/s", 0.95));

  const small = await filledLog(1_000);
  const smallFigures = await proofLatencies(small.log, 1_000);
  await small.log.close();
  const t0 = performance.now();
  const big = await filledLog(1_000_000);
  console.log(`filled a log of 1,000,000 leaves in ${fmt((performance.now() - t0) / 1000, 1)} s`);
  const bigFigures = await proofLatencies(big.log, 1_000_000);
  console.log(`inclusion proof p50 ${bigFigures.p50.toFixed(3)} ms, p99 ${bigFigures.p99.toFixed(3)} ms at 10^6 leaves (target p99 < 1 ms: ${bigFigures.p99 < 1 ? "met" : "NOT met"})`);
  console.log(ratioLine("inclusion proof p99, 10^6 leaves vs 10^3 leaves (baseline)", bigFigures.p99 * 1000, smallFigures.p99 * 1000, "µs"));

  const checkpointBytes = Buffer.byteLength((await big.log.latestCheckpoint()).note);
  const tileBytes: number[] = [];
  const apiBytes: number[] = [];
  for (let i = 0; i < 200; i++) {
    const index = Math.floor(Math.random() * 1_000_000);
    tileBytes.push(tileBytesFor(index, 1_000_000) + checkpointBytes);
    apiBytes.push(Buffer.byteLength(JSON.stringify(await big.log.inclusion(index, 1_000_000))) + checkpointBytes);
  }
  console.log(ratioLine("bytes to check one run at 10^6 leaves, tiles + checkpoint vs API proof + checkpoint (baseline), median of 200 leaves", median(tileBytes), median(apiBytes), "bytes"));
  await big.log.close();
}
