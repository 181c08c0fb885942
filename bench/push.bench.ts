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
 * round warms both up and is not counted. The node logs at its default level (info). A node's CPU
 * per push keeps falling for some 30 pushes as V8 optimizes its request path (bench/push-profile.ts
 * 40 30 against its default): these figures are a young node's; a long-running one's are better,
 * by about a third of the node's CPU on this machine. So after the rounds, the node serves
 * WARDEN_BENCH_PUSH_WARM (default 30) more pushes, untimed, and then ROUNDS timed ones: (a) again,
 * on a warmed node.
 *
 * A comparator, for scale: each round also uploads the same 128 files to @tus/server with its
 * FileStore (bench/tus-side.ts, also a child process on loopback), as many uploads in flight as
 * the push has blobs, each one creation POST and one PATCH with the whole file; once as is and
 * once with the client taking each file's sha256 first (warden's compile step hashes every file).
 * FileStore never fsyncs, so these figures pay for no durability; the uploads are deleted after
 * each round.
 *
 * And the ceilings: what any push of these bytes costs at least here (4 sha256 passes and their
 * bare HTTP transfer to a node:http sink, bench/sink-side.ts), spread perfectly over every core,
 * against (a)'s and (b)'s targets; and how long the node's JavaScript thread ran during each HTTP
 * push, the one thread every byte passes through (and all its threads together).
 *
 * And (a)'s floor with durability paid, measured beside it: the push's own compile (the same
 * rounds') plus the same files taken by a bare durable receiver (bench/bare-push-side.ts, a
 * node:http server that hashes, writes, fdatasyncs each file and fsyncs at commit, and nothing
 * else: no token, manifest, database or store), packed into requests as the push packs them. Its
 * rounds follow warden's, young and warmed alike, and the lines say what fraction of the ceiling
 * that floor reaches and what fraction of it warden's push does.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import { closeSync, mkdirSync, openSync, readdirSync, readFileSync, rmSync, writeSync } from "node:fs";
import { readFile } from "node:fs/promises";
import * as http from "node:http";
import { availableParallelism } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { openEmbeddedDelivery } from "../src/backends/embedded/delivery/delivery-backend.js";
import { DEFAULT_CHUNK_BYTES, WardenClient, compileForPush } from "../src/client/index.js";
import { forEachConcurrent } from "../src/client/pool.js";
import { bundleDigestOf } from "../src/delivery/manifest-types.js";
import { sharedSlabCache } from "../src/delivery/compile/slab-cache.js";
import type { Delivery } from "../src/delivery/service.js";
import { startNode, type NodeProcess } from "../test/support/node.js";
import { writeRandomBundle } from "../test/client/bundle-gen.js";
import { AS_LAUNCHED_ENV, benchDir, fmt, median, medianBy, ratioLine, writeShaFsyncBytesPerSec } from "./baseline.js";
import { HASH_WORKER_URL, OffThreadHasher, setSharedOffThreadHasher } from "../src/core/off-thread-hash.js";
import { tsWorker } from "../test/invocations/fixtures/ts-worker.js";

// The compile's blob digests on their worker, as the built CLI takes them: run from source, the
// worker needs tsx's loader (see worker-entry.ts).
setSharedOffThreadHasher(new OffThreadHasher({ spawn: () => tsWorker(HASH_WORKER_URL) }));

const KiB = 1024;
const MiB = 1024 * KiB;
const FILES = 128;
const FILE_BYTES = 256 * KiB;
const TOTAL = FILES * FILE_BYTES;
/** What `warden push` sends per request by default (packs of whole blobs, or a large blob's chunks): the push below passes no size. */
const CHUNK = DEFAULT_CHUNK_BYTES;
const CONCURRENCY = Number(process.env.WARDEN_BENCH_PUSH_CONCURRENCY ?? 4);
const ROUNDS = 5;

interface HttpTiming {
  readonly total: number;
  /** from the compiled manifest to the receipt */
  readonly wire: number;
  /** meanwhile, ms the node's main (JavaScript) thread ran */
  readonly nodeThreadMs: number;
  /**
   * meanwhile, ms all the node's threads ran: beyond its JavaScript thread, the I/O threads'
   * writes, syncs and file creations. On this machine that part moves most from run to run
   * (a page-cache page the host took back costs a fault of its own to fill again).
   */
  readonly nodeAllMs: number;
}

/** ms the main thread of process `pid` has run so far (the scheduler's own count, in ns). */
function mainThreadMs(pid: number): number {
  return threadMs(pid, pid);
}

function threadMs(pid: number, tid: number | string): number {
  try {
    return Number(readFileSync(`/proc/${pid}/task/${tid}/schedstat`, "utf8").split(" ")[0]) / 1e6;
  } catch {
    return 0; // a thread that ended between the listing and the read
  }
}

/** ms every thread of `pid` has run so far (those alive now: the node's pool threads live on). */
function allThreadsMs(pid: number): number {
  return readdirSync(`/proc/${pid}/task`).reduce((sum, tid) => sum + threadMs(pid, tid), 0);
}

async function httpRound(client: WardenClient, nodePid: number, dir: string, round: number): Promise<HttpTiming> {
  const start = performance.now();
  let compiled = start;
  let threadAtCompiled = 0;
  let allAtCompiled = 0;
  const result = await client.push(dir, {
    bundleId: "bench",
    revision: `http-${round}`,
    concurrency: CONCURRENCY,
    onProgress: (p) => {
      if (p.phase !== "compiled") return;
      compiled = performance.now();
      threadAtCompiled = mainThreadMs(nodePid);
      allAtCompiled = allThreadsMs(nodePid);
    },
  });
  const end = performance.now();
  const nodeThreadMs = mainThreadMs(nodePid) - threadAtCompiled;
  const nodeAllMs = allThreadsMs(nodePid) - allAtCompiled;
  if (result.bytesSent !== TOTAL || result.alreadyCommitted) throw new Error(`round ${round} sent ${result.bytesSent} bytes`);
  return { total: (end - start) / 1000, wire: (end - compiled) / 1000, nodeThreadMs, nodeAllMs };
}

interface LocalTiming {
  readonly seconds: number;
  /** CPU of this process meanwhile (all threads), ms */
  readonly cpuMs: number;
}

/** The same work without HTTP: begin, every blob's chunks (same size, same blobs in flight), commit. */
async function inProcessRound(delivery: Delivery, dir: string, round: number): Promise<LocalTiming> {
  const { manifest, files, contents, slab } = await compileForPush(dir, { bundleId: "bench", revision: `local-${round}` });
  const bytesOf = new Map(files.map((f) => [f.component.blob.digest, contents!.get(f.component.relative_path)!]));
  const cpuBefore = process.cpuUsage();
  const start = performance.now();
  const begun = await delivery.begin(manifest);
  await forEachConcurrent(begun.missing, CONCURRENCY, async (missing) => {
    const bytes = bytesOf.get(missing.digest)!;
    for (let offset = missing.offset; offset < bytes.byteLength; offset += CHUNK) {
      await delivery.putChunk(begun.stage_id, missing.digest, offset, bytes.subarray(offset, Math.min(offset + CHUNK, bytes.byteLength)));
    }
  });
  await delivery.commit(begun.stage_id);
  const seconds = (performance.now() - start) / 1000;
  const cpu = process.cpuUsage(cpuBefore);
  // Done with the compiled bytes, as a push is: the next compile here reads into them.
  if (slab !== undefined) sharedSlabCache().give(slab);
  return { seconds, cpuMs: (cpu.user + cpu.system) / 1000 };
}

const TUS_SIDE_ENTRY = join(dirname(fileURLToPath(import.meta.url)), "tus-side.ts");
const TUS_VERSION = "1.0.0";

function packageVersion(name: string): string {
  const manifest = JSON.parse(readFileSync(new URL(`../node_modules/${name}/package.json`, import.meta.url), "utf8")) as { version: string };
  return `${name} ${manifest.version}`;
}

/** A server in a child process on loopback (bench/tus-side.ts, sink-side.ts, bare-push-side.ts), and a keep-alive client for it. */
interface SideServer {
  readonly url: string;
  readonly pid: number;
  /** `body` in pieces is sent piece by piece, as one body */
  request(method: string, url: string, headers: Record<string, string>, body?: Uint8Array | readonly Uint8Array[]): Promise<http.IncomingMessage & { readonly body: string }>;
  close(): Promise<void>;
}

/** Starts `entry` with `args` (and `env` beside this process's) in a child process; its first stdout line is its URL. */
async function startSide(entry: string, args: readonly string[], env: Readonly<Record<string, string>> = {}): Promise<SideServer> {
  const child: ChildProcess = spawn(process.execPath, ["--import", "tsx", entry, ...args], { stdio: ["ignore", "pipe", "inherit"], env: { ...process.env, ...env } });
  const exited = new Promise<void>((done) => child.once("exit", () => done()));
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new Error(`${entry} named no URL within 20 s`));
    }, 20_000);
    let out = "";
    child.stdout!.setEncoding("utf8").on("data", (s: string) => {
      out += s;
      if (!out.includes("\n")) return;
      clearTimeout(timer);
      resolve(out.split("\n", 1)[0]!);
    });
    child.once("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`${entry} exited (${code}) before naming its URL`));
    });
  });
  const agent = new http.Agent({ keepAlive: true, maxSockets: CONCURRENCY });
  return {
    url,
    pid: child.pid!,
    request: (method, target, headers, body) =>
      new Promise((resolve, reject) => {
        const pieces = body === undefined ? [] : body instanceof Uint8Array ? [body] : body;
        const all = { "content-length": String(pieces.reduce((sum, piece) => sum + piece.byteLength, 0)), ...headers };
        const req = http.request(target, { method, headers: all, agent }, (res) => {
          let text = "";
          res.setEncoding("utf8").on("data", (s: string) => (text += s));
          res.once("end", () => resolve(Object.assign(res, { body: text })));
        });
        req.once("error", reject);
        for (const piece of pieces) req.write(piece);
        req.end();
      }),
    close: async () => {
      agent.destroy();
      child.kill("SIGTERM");
      await exited;
    },
  };
}

interface TusServer extends SideServer {
  /** removes the uploads stored so far (they are not part of any later round) */
  clear(): void;
}

/** Starts bench/tus-side.ts with its FileStore under `directory`. */
async function startTus(directory: string): Promise<TusServer> {
  mkdirSync(directory, { recursive: true, mode: 0o700 });
  const side = await startSide(TUS_SIDE_ENTRY, [directory]);
  return {
    ...side,
    request: (method, target, headers, body) => side.request(method, target, { "tus-resumable": TUS_VERSION, ...headers }, body),
    clear: () => {
      for (const name of readdirSync(directory)) rmSync(join(directory, name), { recursive: true, force: true });
    },
  };
}

/**
 * Every file of `dir`'s data/ uploaded to tus, `CONCURRENCY` uploads in flight, each the way a tus
 * client sends a small file: read it, one creation POST, one PATCH with all its bytes. With
 * `hash`, the client also takes each file's sha256 first, as warden's compile step does. Seconds.
 */
async function tusRound(tus: TusServer, dir: string, hash: boolean): Promise<number> {
  const start = performance.now();
  const data = join(dir, "data");
  const names = readdirSync(data);
  let bytes = 0;
  await forEachConcurrent(names, CONCURRENCY, async (name) => {
    const content = await readFile(join(data, name));
    if (hash) createHash("sha256").update(content).digest();
    const created = await tus.request("POST", tus.url, { "upload-length": String(content.byteLength) });
    const location = created.headers.location;
    if (created.statusCode !== 201 || location === undefined) throw new Error(`tus creation answered ${created.statusCode}`);
    const patched = await tus.request("PATCH", new URL(location, tus.url).href, { "upload-offset": "0", "content-type": "application/offset+octet-stream" }, content);
    if (patched.statusCode !== 204 || patched.headers["upload-offset"] !== String(content.byteLength)) {
      throw new Error(`tus PATCH answered ${patched.statusCode} at offset ${String(patched.headers["upload-offset"])}`);
    }
    bytes += content.byteLength;
  });
  const seconds = (performance.now() - start) / 1000;
  if (bytes !== TOTAL) throw new Error(`tus round uploaded ${bytes} bytes`);
  return seconds;
}

const SINK_SIDE_ENTRY = join(dirname(fileURLToPath(import.meta.url)), "sink-side.ts");

interface Floor {
  /** one sha256 pass over the 32 MiB, ms */
  readonly hashMs: number;
  /** the bare transfer: wall ms, and CPU ms of the sending and the receiving process */
  readonly transferMs: number;
  readonly senderCpuMs: number;
  readonly sinkCpuMs: number;
  /** CPU ms of reading the files (the client must) and of writing their bytes to a file, unsynced (the node must) */
  readonly readCpuMs: number;
  readonly writeCpuMs: number;
}

/**
 * What any push of these files costs at least on this machine, measured on the same bytes: one
 * sha256 pass over them, and their bare transfer — each file one PUT from memory to a node:http
 * sink that drops it (bench/sink-side.ts), the push's number in flight.
 */
async function floorRound(sink: SideServer, dir: string): Promise<Floor> {
  const data = join(dir, "data");
  const readBefore = process.cpuUsage();
  const bodies = readdirSync(data).map((name) => readFileSync(join(data, name)));
  const read = process.cpuUsage(readBefore);
  const scratch = join(dir, "floor-write");
  const writeBefore = process.cpuUsage();
  const fd = openSync(scratch, "w", 0o600);
  for (const body of bodies) writeSync(fd, body);
  closeSync(fd);
  const written = process.cpuUsage(writeBefore);
  rmSync(scratch);
  const hashStart = performance.now();
  const hash = createHash("sha256");
  for (const body of bodies) hash.update(body);
  hash.digest();
  const hashMs = performance.now() - hashStart;
  const sinkCpu = async (): Promise<number> => (JSON.parse((await sink.request("GET", new URL("/cpu", sink.url).href, {})).body) as { micros: number }).micros;
  const sinkBefore = await sinkCpu();
  const cpuBefore = process.cpuUsage();
  const start = performance.now();
  await forEachConcurrent(bodies, CONCURRENCY, async (body) => {
    const res = await sink.request("PUT", sink.url, { "content-type": "application/octet-stream" }, body);
    if (res.statusCode !== 204 || res.headers["x-bytes"] !== String(body.byteLength)) throw new Error(`the sink answered ${res.statusCode}`);
  });
  const transferMs = performance.now() - start;
  const cpu = process.cpuUsage(cpuBefore);
  const sinkCpuMs = ((await sinkCpu()) - sinkBefore) / 1000;
  const ms = (u: NodeJS.CpuUsage): number => (u.user + u.system) / 1000;
  return { hashMs, transferMs, senderCpuMs: ms(cpu), sinkCpuMs, readCpuMs: ms(read), writeCpuMs: ms(written) };
}

const BARE_SIDE_ENTRY = join(dirname(fileURLToPath(import.meta.url)), "bare-push-side.ts");

interface BareTiming {
  /** begin → commit answered, seconds */
  readonly seconds: number;
  /** the receiver's CPU meanwhile, ms: its JavaScript thread's, and all its threads' */
  readonly threadMs: number;
  readonly cpuMs: number;
}

/**
 * The floor of (a)'s upload: `dir`'s files pushed to a bare durable receiver (bench/bare-push-side.ts)
 * from memory, whole files packed into requests of up to the push's size, as many in flight as the
 * push has, between a begin and a commit. The files are read before the clock starts; the push's
 * own compile is added to it by the caller.
 */
async function bareRound(bare: SideServer, dir: string, push: string): Promise<BareTiming> {
  const data = join(dir, "data");
  const bodies = readdirSync(data)
    .sort()
    .map((name) => readFileSync(join(data, name)));
  const packs: Array<{ readonly first: number; readonly files: Buffer[]; bytes: number }> = [];
  bodies.forEach((body, n) => {
    const last = packs.at(-1);
    if (last !== undefined && last.bytes + body.byteLength <= CHUNK) {
      last.files.push(body);
      last.bytes += body.byteLength;
    } else packs.push({ first: n, files: [body], bytes: body.byteLength });
  });
  const expect = async (method: string, path: string, status: number, files: readonly Buffer[] = []): Promise<http.IncomingMessage & { readonly body: string }> => {
    const headers = { "content-type": "application/octet-stream", "x-lengths": files.map((f) => f.byteLength).join(",") };
    const res = await bare.request(method, new URL(path, bare.url).href, headers, files);
    if (res.statusCode !== status) throw new Error(`the bare receiver answered ${method} ${path} with ${res.statusCode}`);
    return res;
  };
  const digests: string[] = [];
  const threadBefore = mainThreadMs(bare.pid);
  const allBefore = allThreadsMs(bare.pid);
  const start = performance.now();
  await expect("POST", `/${push}/begin`, 204);
  await forEachConcurrent(packs, CONCURRENCY, async (pack) => {
    const res = await expect("PUT", `/${push}/${pack.first}`, 204, pack.files);
    String(res.headers["x-digests"]).split(",").forEach((digest, i) => (digests[pack.first + i] = digest));
  });
  const bundleDigest = (await expect("POST", `/${push}/commit`, 200)).body;
  const seconds = (performance.now() - start) / 1000;
  const timing = { seconds, threadMs: mainThreadMs(bare.pid) - threadBefore, cpuMs: allThreadsMs(bare.pid) - allBefore };
  // A floor that skipped its hashing would be no floor: its digests are checked, off the clock.
  const expected = bundleDigestOf(bodies.map((content, n) => ({ path: String(n), content })));
  const wrong = bodies.findIndex((body, n) => createHash("sha256").update(body).digest("hex") !== digests[n]);
  if (wrong >= 0 || `sha256:${bundleDigest}` !== expected) throw new Error(`the bare receiver's digests are wrong (file ${wrong}, bundle ${bundleDigest})`);
  return timing;
}

export default async function (): Promise<void> {
  const work = benchDir("push");
  let node: NodeProcess | undefined;
  let delivery: Delivery | undefined;
  let tus: TusServer | undefined;
  let sink: SideServer | undefined;
  let bare: SideServer | undefined;
  const bareStore = join(work, "bare-store");
  try {
    // The baseline writes bytes like the bundle's: random, distinct.
    const baseline = writeShaFsyncBytesPerSec(randomBytes(TOTAL), MiB);
    console.log(`baseline: write 32 MiB with sha256 + one fsync: ${fmt(baseline / MiB, 1)} MiB/s`);
    node = await startNode({ home: join(work, "node-home"), env: { ...AS_LAUNCHED_ENV, WARDEN_LOG_LEVEL: "info" } });
    const client = new WardenClient({ url: node.url, token: node.token });
    delivery = (await openEmbeddedDelivery(join(work, "local-home"), {})).delivery;
    tus = await startTus(join(work, "tus-store"));
    sink = await startSide(SINK_SIDE_ENTRY, []);
    mkdirSync(bareStore, { mode: 0o700 });
    bare = await startSide(BARE_SIDE_ENTRY, [bareStore], AS_LAUNCHED_ENV);
    const clearBare = (): void => {
      for (const name of readdirSync(bareStore)) rmSync(join(bareStore, name), { recursive: true, force: true });
    };

    const http: HttpTiming[] = [];
    const local: LocalTiming[] = [];
    const tusPlain: number[] = [];
    const tusHashed: number[] = [];
    const floors: Floor[] = [];
    const bares: BareTiming[] = [];
    // Round 0 warms both up (JIT, the stores' caches) and is not counted.
    for (let round = 0; round <= ROUNDS; round++) {
      const dir = join(work, `src-${round}`);
      // Durable first: the kernel writing the fresh source files back must not compete with the
      // fsyncs of whichever variant runs first; and the order alternates. (Not by running `sync`:
      // see writeRandomBundle's `durable`.)
      writeRandomBundle(dir, FILES, FILE_BYTES, { durable: true });
      if (round % 2 === 0) {
        http.push(await httpRound(client, node.child.pid!, dir, round));
        local.push(await inProcessRound(delivery, dir, round));
      } else {
        local.push(await inProcessRound(delivery, dir, round));
        http.push(await httpRound(client, node.child.pid!, dir, round));
      }
      // After warden's pair, so the tus uploads' unsynced pages never meet warden's fsyncs.
      for (const hash of round % 2 === 0 ? [false, true] : [true, false]) {
        (hash ? tusHashed : tusPlain).push(await tusRound(tus, dir, hash));
      }
      tus.clear();
      floors.push(await floorRound(sink, dir));
      bares.push(await bareRound(bare, dir, `young-${round}`));
      clearBare();
      rmSync(dir, { recursive: true, force: true });
      if (round === 0) {
        http.length = 0;
        local.length = 0;
        tusPlain.length = 0;
        tusHashed.length = 0;
        floors.length = 0;
        bares.length = 0;
      }
    }
    // The same push on a node that has served many (an operator's long-running node): V8 has
    // optimized its request path by then. The warm-up pushes are fresh content too, untimed.
    const warmPushes = Number(process.env.WARDEN_BENCH_PUSH_WARM ?? 30);
    // The bare receiver serves as many, alternating with the node.
    const warmed: HttpTiming[] = [];
    const baresWarmed: BareTiming[] = [];
    if (warmPushes > 0) {
      for (let push = 0; push < warmPushes + ROUNDS; push++) {
        const dir = join(work, `warm-${push}`);
        writeRandomBundle(dir, FILES, FILE_BYTES, { durable: true });
        // Which goes first alternates: the second's page-cache pages are the ones the first freed.
        const bareFirst = push % 2 === 1;
        const bareTiming = bareFirst ? await bareRound(bare, dir, `warm-${push}`) : undefined;
        const timing = await httpRound(client, node.child.pid!, dir, ROUNDS + 1 + push);
        const bareAfter = bareFirst ? bareTiming! : await bareRound(bare, dir, `warm-${push}`);
        clearBare();
        if (push >= warmPushes) {
          warmed.push(timing);
          baresWarmed.push(bareAfter);
        }
        rmSync(dir, { recursive: true, force: true });
      }
    }
    client.close();

    const ms = (xs: readonly number[]): string => xs.map((s) => fmt(s * 1000)).join(", ") + " ms";
    console.log(`HTTP push end to end: ${ms(http.map((h) => h.total))}; of which begin→receipt: ${ms(http.map((h) => h.wire))}`);
    console.log(
      `  the node's JavaScript thread ran ${http.map((h) => `${fmt(h.nodeThreadMs)} ms (${fmt((100 * h.nodeThreadMs) / (h.wire * 1000))}%)`).join(", ")} of those begin→receipt times`,
    );
    console.log(`  all the node's threads ${http.map((h) => fmt(h.nodeAllMs)).join(", ")} ms`);
    console.log(`in-process begin→receipt: ${ms(local.map((l) => l.seconds))}; CPU ${local.map((l) => fmt(l.cpuMs)).join(", ")} ms`);
    const total = TOTAL / median(http.map((h) => h.total)) / MiB;
    const wire = TOTAL / median(http.map((h) => h.wire)) / MiB;
    const inProcess = TOTAL / median(local.map((l) => l.seconds)) / MiB;
    const label = `requests of up to ${CHUNK / KiB} KiB (push's default), ${CONCURRENCY} in flight`;
    console.log(ratioLine(`(a) HTTP push of 32 MiB (128 × 256 KiB) end to end, ${label}`, total, baseline / MiB, "MiB/s", 0.6));
    console.log(ratioLine(`(a') same, begin→receipt only`, wire, baseline / MiB, "MiB/s"));
    if (warmed.length > 0) {
      console.log(`HTTP push on a node warmed by ${warmPushes} pushes: ${ms(warmed.map((h) => h.total))}; node's JavaScript thread ${warmed.map((h) => fmt(h.nodeThreadMs)).join(", ")} ms`);
      console.log(`  all the node's threads ${warmed.map((h) => fmt(h.nodeAllMs)).join(", ")} ms`);
      console.log(ratioLine(`(a) same on the warmed node, end to end`, TOTAL / median(warmed.map((h) => h.total)) / MiB, baseline / MiB, "MiB/s", 0.6));
    }
    console.log(ratioLine(`(b) HTTP begin→receipt vs in-process Delivery begin→receipt`, wire, inProcess, "MiB/s", 0.7));
    console.log(ratioLine(`(b') HTTP end to end vs in-process Delivery begin→receipt`, total, inProcess, "MiB/s"));
    console.log(ratioLine(`in-process Delivery begin→receipt vs the write+sha256+fsync baseline`, inProcess, baseline / MiB, "MiB/s"));

    console.log(`tus comparator rounds: ${ms(tusPlain)}; with client sha256: ${ms(tusHashed)}`);
    const tusLabel = `${packageVersion("@tus/server")} + ${packageVersion("@tus/file-store")} FileStore (no fsync), same 128 files, ${CONCURRENCY} in flight, POST + one PATCH each`;
    const tusRate = TOTAL / median(tusPlain) / MiB;
    const tusHashedRate = TOTAL / median(tusHashed) / MiB;
    console.log(ratioLine(`tus comparator: ${tusLabel}`, tusRate, baseline / MiB, "MiB/s"));
    console.log(ratioLine(`tus comparator, client takes each file's sha256 first`, tusHashedRate, baseline / MiB, "MiB/s"));
    console.log(ratioLine(`(a) HTTP push end to end vs the tus comparator with sha256`, total, tusHashedRate, "MiB/s"));

    // The ceiling (a) can reach here: the CPU no push of these bytes can do without, spread
    // perfectly over every core, with nothing written, synced or parsed and no other load.
    const floorCpu = (f: Floor): number => 4 * f.hashMs + f.senderCpuMs + f.sinkCpuMs + f.readCpuMs + f.writeCpuMs;
    const floor = medianBy(floors, floorCpu);
    const cores = availableParallelism();
    const bestMs = floorCpu(floor) / cores;
    const baselineMs = (TOTAL / baseline) * 1000;
    console.log(
      `(a) ceiling on this machine: 4 sha256 passes over the 32 MiB (the client's blob digests and bundle digest for the manifest, ` +
        `the node's again as the bytes arrive, G8) = 4 × ${fmt(floor.hashMs, 1)} ms, their bare HTTP transfer to a node:http sink ` +
        `that drops them (${fmt(floor.transferMs, 1)} ms wall; CPU ${fmt(floor.senderCpuMs, 1)} ms sending + ${fmt(floor.sinkCpuMs, 1)} ms receiving), ` +
        `reading the files (${fmt(floor.readCpuMs, 1)} ms) and writing their bytes, unsynced (${fmt(floor.writeCpuMs, 1)} ms) ` +
        `= ${fmt(floorCpu(floor), 1)} ms of CPU; spread over ${cores} cores at best ${fmt(bestMs, 1)} ms = at most ` +
        `${(baselineMs / bestMs).toFixed(2)}x the baseline's ${fmt(baselineMs, 1)} ms (target 0.6x), before any fsync, request or stage bookkeeping  ` +
        `[median of ${floors.length} rounds]`,
    );
    const ceiling = baselineMs / bestMs;
    const ofCeiling = (rate: number): string => (rate / (baseline / MiB) / ceiling).toFixed(2);
    console.log(
      `(a) against its ceiling: end to end ${ofCeiling(total)} of it` +
        (warmed.length > 0 ? `; on the warmed node ${ofCeiling(TOTAL / median(warmed.map((h) => h.total)) / MiB)}` : "") +
        ` (target 0.6)`,
    );
    // The floor of (a) with its durability paid: the push's own compile (the same rounds'), then
    // a bare receiver that does only what any durable push must (bench/bare-push-side.ts).
    const floorLine = (label: string, pushes: readonly HttpTiming[], bareRounds: readonly BareTiming[]): string => {
      const compile = median(pushes.map((h) => h.total - h.wire));
      const bareWire = median(bareRounds.map((b) => b.seconds));
      const floorTotal = compile + bareWire;
      const pushTotal = median(pushes.map((h) => h.total));
      return (
        `(a) floor, ${label}: the push's compile ${fmt(compile * 1000)} ms + a bare durable receiver's begin→commit ${fmt(bareWire * 1000)} ms ` +
        `(its JavaScript thread ${fmt(median(bareRounds.map((b) => b.threadMs)))} ms, all its threads ${fmt(median(bareRounds.map((b) => b.cpuMs)))} ms; ` +
        `the node's ${fmt(median(pushes.map((h) => h.nodeThreadMs)))} and ${fmt(median(pushes.map((h) => h.nodeAllMs)))} ms) = ${fmt(floorTotal * 1000)} ms = ${ofCeiling(TOTAL / floorTotal / MiB)} of the ceiling; ` +
        `warden's push ${fmt(pushTotal * 1000)} ms = ${(floorTotal / pushTotal).toFixed(2)} of this floor`
      );
    };
    console.log(floorLine(`young (rounds 1–${ROUNDS}, a receiver as new as the node)`, http, bares));
    if (warmed.length > 0) console.log(floorLine(`warmed (the receiver, too, after ${warmPushes} pushes)`, warmed, baresWarmed));
    // (b)'s: the in-process work plus the bare transfer, spread perfectly over every core.
    const localMid = medianBy(local, (l) => l.seconds);
    const withTransferMs = (localMid.cpuMs + floor.senderCpuMs + floor.sinkCpuMs) / cores;
    console.log(
      `(b) ceiling on this machine: the in-process round's ${fmt(localMid.cpuMs)} ms of CPU (${fmt(localMid.seconds * 1000)} ms wall) plus the bare transfer's ` +
        `${fmt(floor.senderCpuMs + floor.sinkCpuMs, 1)} ms, spread over ${cores} cores, take at least ${fmt(withTransferMs, 1)} ms = at most ` +
        `${((localMid.seconds * 1000) / Math.max(withTransferMs, localMid.seconds * 1000)).toFixed(2)}x the in-process figure (target 0.7x)`,
    );
  } finally {
    await delivery?.close();
    await tus?.close();
    await sink?.close();
    await bare?.close();
    await node?.kill();
    rmSync(work, { recursive: true, force: true });
  }
}
