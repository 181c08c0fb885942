/**
 * HTTP push throughput (issue 6): the 32 MiB bundle (128 × 256 KiB files, generated into a temp
 * directory) pushed with the client through HTTP on loopback to a real `warden serve` child,
 * against two baselines measured in the same run:
 *   (a) writing the same 32 MiB to one file with sha256 and one fsync (bench/baseline.ts), target >= 0.6x;
 *   (b) the in-process Delivery service staging and committing the same bundle from memory, with
 *       the same chunk size and the same number of blobs in flight, target >= 0.7x.
 * The HTTP push is timed twice: end to end (compile + begin + upload + commit, what `warden push`
 * costs) and from the compiled manifest on (begin + upload + commit: the same work the in-process
 * figure times). HTTP and in-process rounds alternate (and which goes first), so load from
 * other processes on a shared machine hits both alike; each figure is the median of its rounds.
 * Every round pushes fresh content (synced to disk first), so nothing is already stored; a first
 * round warms both up and is not counted. The node logs at its default level (info).
 */
import { execFileSync } from "node:child_process";
import { rmSync } from "node:fs";
import { join } from "node:path";
import { openEmbeddedDelivery } from "../src/backends/embedded/delivery-backend.js";
import { WardenClient, compileForPush } from "../src/client/index.js";
import { forEachConcurrent } from "../src/client/pool.js";
import type { Delivery } from "../src/delivery/service.js";
import { startNode, type NodeProcess } from "../test/client/harness.js";
import { writeRandomBundle } from "../test/client/bundle-gen.js";
import { AS_LAUNCHED_ENV, benchDir, fmt, ratioLine, writeShaFsyncBytesPerSec } from "./baseline.js";

const KiB = 1024;
const MiB = 1024 * KiB;
const FILES = 128;
const FILE_BYTES = 256 * KiB;
const TOTAL = FILES * FILE_BYTES;
const CHUNK = MiB;
const CONCURRENCY = Number(process.env.WARDEN_BENCH_PUSH_CONCURRENCY ?? 4);
const ROUNDS = 5;

interface HttpTiming {
  readonly total: number;
  /** from the compiled manifest to the receipt */
  readonly wire: number;
}

async function httpRound(client: WardenClient, dir: string, round: number): Promise<HttpTiming> {
  const start = performance.now();
  let compiled = start;
  const result = await client.push(dir, {
    bundleId: "bench",
    revision: `http-${round}`,
    chunkBytes: CHUNK,
    concurrency: CONCURRENCY,
    onProgress: (p) => {
      if (p.phase === "compiled") compiled = performance.now();
    },
  });
  const end = performance.now();
  if (result.bytesSent !== TOTAL || result.alreadyCommitted) throw new Error(`round ${round} sent ${result.bytesSent} bytes`);
  return { total: (end - start) / 1000, wire: (end - compiled) / 1000 };
}

/** The same work without HTTP: begin, every blob's chunks (same size, same blobs in flight), commit. */
async function inProcessRound(delivery: Delivery, dir: string, round: number): Promise<number> {
  const { manifest, files, contents } = await compileForPush(dir, { bundleId: "bench", revision: `local-${round}` });
  const bytesOf = new Map(files.map((f) => [f.component.blob.digest, contents!.get(f.component.relative_path)!]));
  const start = performance.now();
  const begun = await delivery.begin(manifest);
  await forEachConcurrent(begun.missing, CONCURRENCY, async (missing) => {
    const bytes = bytesOf.get(missing.digest)!;
    for (let offset = missing.offset; offset < bytes.byteLength; offset += CHUNK) {
      await delivery.putChunk(begun.stage_id, missing.digest, offset, bytes.subarray(offset, Math.min(offset + CHUNK, bytes.byteLength)));
    }
  });
  await delivery.commit(begun.stage_id);
  return (performance.now() - start) / 1000;
}

function median(xs: readonly number[]): number {
  const sorted = [...xs].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)]!;
}

export default async function (): Promise<void> {
  const work = benchDir("push");
  let node: NodeProcess | undefined;
  let delivery: Delivery | undefined;
  try {
    const baseline = writeShaFsyncBytesPerSec(TOTAL, MiB);
    console.log(`baseline: write 32 MiB with sha256 + one fsync: ${fmt(baseline / MiB, 1)} MiB/s`);
    node = await startNode({ home: join(work, "node-home"), env: { ...AS_LAUNCHED_ENV, WARDEN_LOG_LEVEL: "info" } });
    const client = new WardenClient({ url: node.url, token: node.token });
    delivery = (await openEmbeddedDelivery(join(work, "local-home"), {})).delivery;

    const http: HttpTiming[] = [];
    const local: number[] = [];
    // Round 0 warms both up (JIT, the stores' caches) and is not counted.
    for (let round = 0; round <= ROUNDS; round++) {
      const dir = join(work, `src-${round}`);
      writeRandomBundle(dir, FILES, FILE_BYTES);
      // The kernel writing the fresh source files back must not compete with the fsyncs of
      // whichever variant runs first; and the order alternates.
      execFileSync("sync");
      if (round % 2 === 0) {
        http.push(await httpRound(client, dir, round));
        local.push(await inProcessRound(delivery, dir, round));
      } else {
        local.push(await inProcessRound(delivery, dir, round));
        http.push(await httpRound(client, dir, round));
      }
      rmSync(dir, { recursive: true, force: true });
      if (round === 0) {
        http.length = 0;
        local.length = 0;
      }
    }
    client.close();

    const ms = (xs: readonly number[]): string => xs.map((s) => fmt(s * 1000)).join(", ") + " ms";
    console.log(`HTTP push end to end: ${ms(http.map((h) => h.total))}; of which begin→receipt: ${ms(http.map((h) => h.wire))}`);
    console.log(`in-process begin→receipt: ${ms(local)}`);
    const total = TOTAL / median(http.map((h) => h.total)) / MiB;
    const wire = TOTAL / median(http.map((h) => h.wire)) / MiB;
    const inProcess = TOTAL / median(local) / MiB;
    const label = `${CHUNK / KiB} KiB chunks, ${CONCURRENCY} blobs in flight`;
    console.log(ratioLine(`(a) HTTP push of 32 MiB (128 × 256 KiB) end to end, ${label}`, total, baseline / MiB, "MiB/s", 0.6));
    console.log(ratioLine(`(a') same, begin→receipt only`, wire, baseline / MiB, "MiB/s"));
    console.log(ratioLine(`(b) HTTP begin→receipt vs in-process Delivery begin→receipt`, wire, inProcess, "MiB/s", 0.7));
    console.log(ratioLine(`(b') HTTP end to end vs in-process Delivery begin→receipt`, total, inProcess, "MiB/s"));
    console.log(ratioLine(`in-process Delivery begin→receipt vs the write+sha256+fsync baseline`, inProcess, baseline / MiB, "MiB/s"));
  } finally {
    await delivery?.close();
    await node?.kill();
    rmSync(work, { recursive: true, force: true });
  }
}
