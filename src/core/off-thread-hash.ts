/**
 * sha256 of byte ranges on a worker thread, so that a caller with a second pass of its own over
 * the same bytes (the compile's bundle digest, issue 34) runs both at once on two cores. The bytes
 * are views on a SharedArrayBuffer and are hashed where they lie: only their offset and length
 * travel, and the caller keeps them throughout. (Transferring each file's own buffer to the worker
 * and back had the calling thread take in every byte twice as new external memory, which set off
 * about one full garbage collection per 32 MiB compile: issue 34.) A view on memory that is not
 * shared is hashed on the calling thread.
 *
 * One worker per process, started on first need and reused; it never keeps the process alive
 * while idle (worker-hold.ts: held only while a digest, or its awaited start, is owed). The hand-off adapts: bytes are hashed
 * on the calling thread when the worker is not up yet (starting one takes tens of milliseconds, a
 * CLI's whole compile of a small tree), when they are too few to be worth a round trip, or
 * when the worker is already MAX_OUTSTANDING_BYTES behind (starved of a core on a loaded machine:
 * the caller then takes a share instead of waiting). With no worker (run from TypeScript source
 * without a spawn seam, see worker-entry.ts, or after one failed) everything is hashed inline; the
 * digests a worker owed when it stopped are taken inline too (the bytes never left).
 */
import type { Worker } from "node:worker_threads";
import { sha256Digest, type Digest } from "./digest.js";
import { workerEntry } from "./worker-entry.js";
import { WorkerHold } from "./worker-hold.js";

/**
 * Fewest bytes handed to the worker: a round trip costs both threads about 50 µs of CPU, the time
 * sha256 takes over some 50 KiB here.
 */
export const MIN_OFF_THREAD_BYTES = 64 * 1024;
/** Bytes out at the worker at most before the caller hashes the next ones itself. */
export const MAX_OUTSTANDING_BYTES = 4 * 1024 * 1024;
/**
 * Bytes to hash below which `expect` does not start a worker: about 4 ms of sha256 here, less than
 * a worker takes to start (its start is not waited for, but it costs a core that much).
 */
export const WORKER_WORTH_BYTES = 4 * 1024 * 1024;

type Reply = { readonly ready: true } | { readonly id: number; readonly hex?: string; readonly message?: string };

interface Job {
  readonly bytes: Uint8Array;
  resolve(digest: Digest): void;
  reject(error: unknown): void;
}

const HASH_WORKER = workerEntry("hash-worker", import.meta.url);
export const HASH_WORKER_URL = HASH_WORKER.url;

export interface OffThreadHasherOptions {
  /** starts the worker running hash-worker; undefined hashes inline */
  readonly spawn?: (() => Worker) | undefined;
}

export class OffThreadHasher {
  readonly #spawn: (() => Worker) | undefined;
  /** The worker, holding the process open while a digest (or its start, when awaited) is owed. */
  #worker: WorkerHold | undefined;
  #online = false;
  #broken = false;
  readonly #inFlight = new Map<number, Job>();
  #outstandingBytes = 0;
  #nextId = 0;
  #hashedInWorker = 0;
  #hashedInline = 0;
  /** Settles once the worker is up (true) or will never be (false). */
  #started: Promise<boolean> | undefined;
  #settleStarted: (up: boolean) => void = () => undefined;

  constructor(options: OffThreadHasherOptions = {}) {
    this.#spawn = "spawn" in options ? options.spawn : HASH_WORKER.defaultSpawn;
  }

  /** Digests the worker took so far (tests and benches check it is used). */
  get hashedInWorker(): number {
    return this.#hashedInWorker;
  }

  /** Digests taken on the calling thread so far. */
  get hashedInline(): number {
    return this.#hashedInline;
  }

  /** Whether the worker is up and taking bytes to hash. */
  get online(): boolean {
    return this.#online && !this.#broken;
  }

  /**
   * Says `bytes` are about to be hashed: starts the worker (once) when that many are worth one.
   * Nothing waits for it; bytes are hashed inline until it is up.
   */
  expect(bytes: number): void {
    if (bytes >= WORKER_WORTH_BYTES) this.#ensureWorker();
  }

  /**
   * Whether a worker is up, once that is known: after `expect` started one, true when it is ready
   * for bytes; false when there is none (never started, no spawn, failed). For benches and
   * tests that mean to measure or check the worker rather than its start.
   */
  started(): Promise<boolean> {
    const held = this.#worker;
    if (this.#started === undefined || held === undefined || this.online) return Promise.resolve(this.online);
    held.owe(); // whoever waits for the start keeps the process alive until then
    return this.#started.finally(() => held.paid());
  }

  /**
   * The sha256 of `bytes`. A view on a SharedArrayBuffer may be hashed by the worker, in place:
   * the caller must not write to those bytes until the digest is settled.
   */
  digest(bytes: Uint8Array): Promise<Digest> {
    const buffer = bytes.buffer;
    const held = this.online ? this.#worker : undefined;
    const behind = this.#outstandingBytes > 0 && this.#outstandingBytes + bytes.byteLength > MAX_OUTSTANDING_BYTES;
    if (held === undefined || behind || bytes.byteLength < MIN_OFF_THREAD_BYTES || !(buffer instanceof SharedArrayBuffer)) {
      return this.#inline(bytes);
    }
    const id = this.#nextId++;
    held.worker.postMessage({ id, buffer, offset: bytes.byteOffset, length: bytes.byteLength });
    held.owe(); // a digest owed keeps the process alive
    this.#outstandingBytes += bytes.byteLength;
    return new Promise<Digest>((resolve, reject) => this.#inFlight.set(id, { bytes, resolve, reject }));
  }

  #inline(bytes: Uint8Array): Promise<Digest> {
    try {
      const digest = sha256Digest(bytes);
      this.#hashedInline++;
      return Promise.resolve(digest);
    } catch (error) {
      return Promise.reject(error);
    }
  }

  /** Stops the worker; later bytes, and those it owed digests of, are hashed inline. */
  async close(): Promise<void> {
    this.#broken = true;
    this.#settleStarted(false);
    const held = this.#worker;
    this.#worker = undefined;
    this.#hashOwedInline();
    held?.clear();
    await held?.worker.terminate();
  }

  #ensureWorker(): void {
    if (this.#worker !== undefined || this.#broken || this.#spawn === undefined) return;
    let worker: Worker;
    try {
      worker = this.#spawn();
    } catch {
      this.#broken = true;
      return;
    }
    this.#started = new Promise((settle) => (this.#settleStarted = settle));
    const ready = (): void => {
      this.#online = true;
      this.#settleStarted(true);
    };
    const held = new WorkerHold(worker);
    worker.on("message", (reply: Reply) => ("ready" in reply ? ready() : this.#settle(held, reply)));
    // The bytes a worker that stops was hashing are still here: they, and every later byte, are
    // hashed inline.
    const fail = (): void => {
      if (this.#worker === held) this.#worker = undefined;
      this.#broken = true;
      held.clear();
      this.#settleStarted(false);
      this.#hashOwedInline();
    };
    worker.on("error", fail);
    worker.on("exit", fail);
    this.#worker = held;
  }

  #settle(from: WorkerHold, reply: Exclude<Reply, { readonly ready: true }>): void {
    const job = this.#inFlight.get(reply.id);
    if (job === undefined) return;
    this.#inFlight.delete(reply.id);
    this.#outstandingBytes -= job.bytes.byteLength;
    from.paid();
    if (reply.hex !== undefined) {
      this.#hashedInWorker++;
      job.resolve(`sha256:${reply.hex}`);
      return;
    }
    // The worker could not hash (it always should): hash here, where the error is raised for real.
    this.#inline(job.bytes).then(job.resolve, job.reject);
  }

  #hashOwedInline(): void {
    const jobs = [...this.#inFlight.values()];
    this.#inFlight.clear();
    this.#outstandingBytes = 0;
    for (const job of jobs) this.#inline(job.bytes).then(job.resolve, job.reject);
  }
}

let shared: OffThreadHasher | undefined;

/** The process-wide hasher compiles use unless given another. */
export function sharedOffThreadHasher(): OffThreadHasher {
  shared ??= new OffThreadHasher();
  return shared;
}

/** Replaces the process-wide hasher (e.g. with one whose worker can load TypeScript). */
export function setSharedOffThreadHasher(hasher: OffThreadHasher): void {
  shared = hasher;
}
