/** Baselines every bench compares against, measured on the same disk and core in the same run. */
import { mkdtempSync, openSync, writeSync, fdatasyncSync, fsyncSync, closeSync, rmSync } from "node:fs";
import { createHash } from "node:crypto";
import { tmpdir } from "node:os";
import { join } from "node:path";

export function benchDir(label: string): string {
  // Benchmarks write where the state directory would live: the working directory's disk, not tmpfs.
  const base = process.env.WARDEN_BENCH_DIR ?? tmpdir();
  return mkdtempSync(join(base, `warden-bench-${label}-`));
}

const keptUntilRunEnds: string[] = [];

/**
 * A bench directory removed once every bench of the run has printed its figures, not as soon as its
 * round ends. On a file system that skips recently freed inodes when it allocates one (ext4 without
 * a journal, as on these machines, skips every inode freed in the last minute, up to six while its
 * inode table block is dirty, looking each one up as it goes), removing a round's hundreds of files
 * makes each file the next rounds create cost up to a millisecond of CPU more, and more with every
 * round: a cost of the bench's own clean-up, charged to whatever it measures next.
 */
export function keepUntilRunEnds(dir: string): string {
  keptUntilRunEnds.push(dir);
  return dir;
}

/** Removes the directories kept by `keepUntilRunEnds` (bench/run.ts, once every bench printed). */
export function removeKeptDirs(): void {
  for (const dir of keptUntilRunEnds.splice(0)) rmSync(dir, { recursive: true, force: true });
}

/** Raw single-threaded append+fdatasync operations per second (200-byte records). */
export function rawFdatasyncPerSec(seconds = 1.5, recordBytes = 200): number {
  const dir = benchDir("fdatasync");
  const fd = openSync(join(dir, "raw"), "a", 0o600);
  const record = Buffer.alloc(recordBytes, 0x61);
  let n = 0;
  const end = performance.now() + seconds * 1000;
  const start = performance.now();
  while (performance.now() < end) {
    writeSync(fd, record);
    fdatasyncSync(fd);
    n++;
  }
  const elapsed = (performance.now() - start) / 1000;
  closeSync(fd);
  rmSync(dir, { recursive: true, force: true });
  return n / elapsed;
}

/**
 * Writes `bytes` to one file in `chunkBytes` writes with sha256, then one fsync: bytes/s. The bytes
 * are the bench's own (distinct, like the bundle's files), not one buffer written again and again:
 * that one stays in the CPU's cache for the hash and the copy, which made the baseline about 6%
 * faster than writing the same bytes.
 */
export function writeShaFsyncBytesPerSec(bytes: Uint8Array, chunkBytes = 1024 * 1024): number {
  const dir = benchDir("write");
  const start = performance.now();
  const fd = openSync(join(dir, "blob"), "w", 0o600);
  const hash = createHash("sha256");
  for (let written = 0; written < bytes.byteLength; written += chunkBytes) {
    const piece = bytes.subarray(written, Math.min(written + chunkBytes, bytes.byteLength));
    hash.update(piece);
    writeSync(fd, piece);
  }
  fsyncSync(fd);
  closeSync(fd);
  hash.digest();
  const elapsed = (performance.now() - start) / 1000;
  rmSync(dir, { recursive: true, force: true });
  return bytes.byteLength / elapsed;
}

/**
 * How fast this machine is right now, for reading the figures around it: the CPU time of one
 * sha256 pass over 32 MiB and the latency of a 4 KiB write + fdatasync (medians). On these virtual
 * machines both move from minute to minute with the host's load, the CPU by up to about 1.8x
 * with no steal reported, so an absolute figure (a p99, a rate) drifts with them, and a ratio
 * against a baseline moves with how much of each side is CPU and how much is disk.
 */
export function machineSpeed(): string {
  const bytes = Buffer.alloc(32 * 1024 * 1024, 0x5a);
  const hashMs: number[] = [];
  for (let i = 0; i < 5; i++) {
    const start = performance.now();
    createHash("sha256").update(bytes).digest();
    hashMs.push(performance.now() - start);
  }
  const dir = benchDir("speed");
  const fd = openSync(join(dir, "probe"), "a", 0o600);
  const record = Buffer.alloc(4096, 0x61);
  const syncMs: number[] = [];
  for (let i = 0; i < 50; i++) {
    const start = performance.now();
    writeSync(fd, record);
    fdatasyncSync(fd);
    syncMs.push(performance.now() - start);
  }
  closeSync(fd);
  rmSync(dir, { recursive: true, force: true });
  return `machine now: sha256 of 32 MiB ${fmt(median(hashMs), 1)} ms, 4 KiB write + fdatasync ${fmt(median(syncMs), 2)} ms (medians)`;
}

export function fmt(n: number, digits = 0): string {
  return n.toLocaleString("en-US", { maximumFractionDigits: digits, minimumFractionDigits: digits });
}

export function ratioLine(label: string, value: number, baseline: number, unit: string, target?: number): string {
  const ratio = value / baseline;
  const verdict = target === undefined ? "" : ratio >= target ? `  (target >= ${target}x: met)` : `  (target >= ${target}x: NOT met)`;
  return `${label}: ${fmt(value)} ${unit} vs baseline ${fmt(baseline)} ${unit} = ${ratio.toFixed(2)}x${verdict}`;
}

/**
 * The middle item by `key` (of an even count, the upper one): a round's figures are reported
 * together, from the round whose key is the median.
 */
export function medianBy<T>(items: readonly T[], key: (item: T) => number): T {
  return [...items].sort((a, b) => key(a) - key(b))[Math.floor(items.length / 2)]!;
}

export function median(values: readonly number[]): number {
  return medianBy(values, (v) => v);
}

export function percentile(sortedMs: readonly number[], p: number): number {
  if (sortedMs.length === 0) return NaN;
  const i = Math.min(sortedMs.length - 1, Math.max(0, Math.ceil((p / 100) * sortedMs.length) - 1));
  return sortedMs[i]!;
}

/**
 * The environment that gives a node started here what bin/warden.cjs gives one: 64 libuv I/O
 * threads. Benches start the CLI through tsx, whose loader starts the pool (at four) before the
 * CLI runs, so the size must come from the environment the process starts with.
 */
export const AS_LAUNCHED_ENV: Readonly<Record<string, string>> = { UV_THREADPOOL_SIZE: "64" };
