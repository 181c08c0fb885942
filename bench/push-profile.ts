/**
 * Where a push's time goes, outside `npm run bench` (issue 34): pushes fresh 32 MiB bundles
 * (128 × 256 KiB, as bench/push.bench.ts) to a `warden serve` child and prints, per round, the
 * client's compile and wire (begin → receipt) times and the CPU each side used (the client:
 * process.cpuUsage; the node: its /proc stat, all threads). CPU is the figure to cut: it moves
 * far less with the machine's load than wall time does.
 *
 *   node --import tsx bench/push-profile.ts [rounds] [first measured round, default 2]
 *   WARDEN_PUSH_PROFILE=perf-node    perf record -g of the node over the measured rounds
 *   WARDEN_PUSH_PROFILE=perf-client  the same of this process (run it with --perf-basic-prof)
 *   WARDEN_PUSH_PROFILE=cpu-prof     V8's --cpu-prof of the node (written when it stops)
 *   WARDEN_PUSH_PROFILE=compile      only the client's compile, no node: CPU and wall per round; its
 *                                    memory given back after each as a push does (=compile-fresh: not,
 *                                    a new slab each time, as a one-shot `warden push` has)
 * perf's data goes to $WARDEN_PUSH_PROFILE_OUT (default ./push.perf.data): `perf report -i … --children`.
 * The bundle's shape: WARDEN_PUSH_PROFILE_FILES files (default 128) of WARDEN_PUSH_PROFILE_FILE_BYTES
 * bytes each (default 262144), e.g. 2000 × 4096 for a bundle of many small files; the client's chunk
 * and pack size WARDEN_PUSH_PROFILE_CHUNK_BYTES (default: push's own, DEFAULT_CHUNK_BYTES); requests
 * in flight WARDEN_PUSH_PROFILE_CONCURRENCY (default 4, as bench/push.bench.ts).
 */
import "./as-launched.js";
import { spawn, type ChildProcess } from "node:child_process";
import { mkdirSync, readFileSync, rmSync } from "node:fs";
import { join, resolve } from "node:path";
import { DEFAULT_CHUNK_BYTES, WardenClient, compileForPush } from "../src/client/index.js";
import { startNode } from "../test/support/node.js";
import { writeRandomBundle } from "../test/client/bundle-gen.js";
import { DEFAULT_LIMITS } from "../src/core/limits.js";
import { sharedSlabCache } from "../src/delivery/compile/slab-cache.js";
import { AS_LAUNCHED_ENV, benchDir, median } from "./baseline.js";
import { HASH_WORKER_URL, OffThreadHasher, setSharedOffThreadHasher } from "../src/core/off-thread-hash.js";
import { tsWorker } from "../test/invocations/fixtures/ts-worker.js";

const rounds = Number(process.argv[2] ?? 8);
/**
 * Rounds before this one warm the node up and are not in the medians (nor in perf's record). A
 * node's CPU per push keeps falling for some 30 pushes as V8 optimizes the request path: a later
 * first round shows a long-running node, the default a node's first pushes.
 */
const from = Number(process.argv[3] ?? 2);
const mode = process.env.WARDEN_PUSH_PROFILE ?? "";
const out = resolve(process.env.WARDEN_PUSH_PROFILE_OUT ?? "push.perf.data");
const files = positiveEnv("WARDEN_PUSH_PROFILE_FILES", 128);
const fileBytes = positiveEnv("WARDEN_PUSH_PROFILE_FILE_BYTES", 256 * 1024);
/** The client's chunk (and pack) size: WARDEN_PUSH_PROFILE_CHUNK_BYTES, default push's own. */
const chunkBytes = positiveEnv("WARDEN_PUSH_PROFILE_CHUNK_BYTES", DEFAULT_CHUNK_BYTES);
/** A bundle of more files than the default limit allows raises the limit on both sides. */
const limits = files > DEFAULT_LIMITS.bundleComponents ? { ...DEFAULT_LIMITS, bundleComponents: files } : undefined;
const work = benchDir("push-profile");
mkdirSync(work, { recursive: true });

// Run from source, the compile's hashing worker needs tsx's loader (see worker-entry.ts).
setSharedOffThreadHasher(new OffThreadHasher({ spawn: () => tsWorker(HASH_WORKER_URL) }));

if (mode === "compile" || mode === "compile-fresh") {
  // The bundles are written (and synced) first, so only the compiles run while measured.
  const dirs = Array.from({ length: rounds }, (_, round) => join(work, `src-${round}`));
  for (const dir of dirs) writeRandomBundle(dir, files, fileBytes, { durable: true });
  const cpu: number[] = [];
  const wall: number[] = [];
  // This thread's CPU (the scheduler's count, in ns): the compile's critical path, which moves
  // much less with the machine's load than wall time does.
  const threadCpuMs = (): number => Number(readFileSync("/proc/thread-self/schedstat", "utf8").split(" ")[0]) / 1e6;
  const mainCpu: number[] = [];
  for (const [round, dir] of dirs.entries()) {
    const mainBefore = threadCpuMs();
    const cpuBefore = process.cpuUsage();
    const start = performance.now();
    const { slab } = await compileForPush(dir, { bundleId: "profile", digestCache: false, ...(limits === undefined ? {} : { limits }) });
    if (mode === "compile" && slab !== undefined) sharedSlabCache().give(slab);
    const used = process.cpuUsage(cpuBefore);
    if (round < 2) continue;
    mainCpu.push(threadCpuMs() - mainBefore);
    cpu.push((used.user + used.system) / 1000);
    wall.push(performance.now() - start);
  }
  rmSync(work, { recursive: true, force: true });
  console.log(`compile only, medians of rounds 2–${rounds - 1}: CPU ${median(cpu).toFixed(0)} ms (main thread ${median(mainCpu).toFixed(0)} ms), wall ${median(wall).toFixed(0)} ms`);
  process.exit(0);
}

const nodeFlags = mode === "perf-node" ? ["--perf-basic-prof"] : mode === "cpu-prof" ? ["--cpu-prof", `--cpu-prof-dir=${resolve("push-cpu-prof")}`] : [];
const node = await startNode({ home: join(work, "home"), env: { ...AS_LAUNCHED_ENV, WARDEN_LOG_LEVEL: "info", WARDEN_CHECK_REPLIES: "0" }, nodeFlags, ...(limits === undefined ? {} : { config: { limits: { bundleComponents: files } } }) });
const client = new WardenClient({ url: node.url, token: node.token });
const pid = node.child.pid!;
/**
 * ms of CPU the node has used (utime + stime, in clock ticks of 10 ms): all its threads, or its
 * main thread alone (the one that runs JavaScript, which a push keeps busiest).
 */
const cpuMs = (stat: string): number => {
  const fields = readFileSync(stat, "utf8").split(") ")[1]!.split(" ");
  return (Number(fields[11]) + Number(fields[12])) * 10;
};
const nodeCpuMs = (): number => cpuMs(`/proc/${pid}/stat`);
const nodeMainCpuMs = (): number => cpuMs(`/proc/${pid}/task/${pid}/stat`);

let perf: ChildProcess | undefined;
const rows: { compile: number; wire: number; clientCpu: number; compileCpu: number; nodeCpu: number; nodeMain: number }[] = [];
try {
  for (let round = 0; round < rounds; round++) {
    if (round === from && mode.startsWith("perf-")) {
      const target = mode === "perf-node" ? pid : process.pid;
      perf = spawn("perf", ["record", "-F", "1999", "-g", "-o", out, "-p", String(target)], { stdio: ["ignore", "inherit", "inherit"] });
      await new Promise((started) => setTimeout(started, 500)); // perf attaches; nothing waits on it but this profile
    }
    const dir = join(work, `src-${round}`);
    // Durable before the push, without a `sync` child (see writeRandomBundle's `durable`).
    writeRandomBundle(dir, files, fileBytes, { durable: true });
    const nodeBefore = nodeCpuMs();
    const mainBefore = nodeMainCpuMs();
    const cpuBefore = process.cpuUsage();
    const start = performance.now();
    let compiled = start;
    let compileCpu = 0;
    await client.push(dir, {
      bundleId: "profile",
      revision: `r${round}`,
      chunkBytes,
      concurrency: Number(process.env.WARDEN_PUSH_PROFILE_CONCURRENCY ?? 4),
      ...(limits === undefined ? {} : { limits }),
      onProgress: (p) => {
        if (p.phase !== "compiled") return;
        compiled = performance.now();
        const used = process.cpuUsage(cpuBefore);
        compileCpu = (used.user + used.system) / 1000;
      },
    });
    const cpu = process.cpuUsage(cpuBefore);
    const row = { compile: compiled - start, wire: performance.now() - compiled, clientCpu: (cpu.user + cpu.system) / 1000, compileCpu, nodeCpu: nodeCpuMs() - nodeBefore, nodeMain: nodeMainCpuMs() - mainBefore };
    rows.push(row);
    console.log(`round ${round}: compile ${row.compile.toFixed(0)} ms, wire ${row.wire.toFixed(0)} ms; CPU client ${row.clientCpu.toFixed(0)} ms (compile ${row.compileCpu.toFixed(0)}), node ${row.nodeCpu} ms (main thread ${row.nodeMain} ms)`);
    rmSync(dir, { recursive: true, force: true });
  }
} finally {
  if (perf !== undefined) {
    perf.kill("SIGINT");
    await new Promise((done) => perf!.once("exit", done));
  }
  client.close();
  await node.stop();
  rmSync(work, { recursive: true, force: true });
}
const warm = rows.slice(from);
const mid = (key: keyof (typeof rows)[number]): string => median(warm.map((r) => r[key])).toFixed(0);
console.log(`medians of rounds ${from}–${rounds - 1}: compile ${mid("compile")} ms, wire ${mid("wire")} ms; CPU client ${mid("clientCpu")} ms (compile ${mid("compileCpu")}), node ${mid("nodeCpu")} ms (main thread ${mid("nodeMain")} ms)`);

function positiveEnv(name: string, fallback: number): number {
  const text = process.env[name];
  if (text === undefined || text === "") return fallback;
  const value = Number(text);
  if (!Number.isSafeInteger(value) || value <= 0) throw new RangeError(`${name} must be a positive integer, not ${JSON.stringify(text)}`);
  return value;
}
