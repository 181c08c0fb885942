/**
 * sha256 of whole buffers on a worker thread, so that a caller with a second pass of its own over
 * the same bytes (the compile's bundle digest, issue 34) runs both at once on two cores. Buffers
 * are transferred to the worker and back, not copied, and not shared: a SharedArrayBuffer would
 * save the hand-back, but the bytes are what a push uploads, and WHATWG fetch (a caller's own
 * `fetch`) refuses a body over shared memory.
 *
 * One worker per process, started on first need and reused; it never keeps the process alive
 * while idle (worker-hold.ts: held only while a digest, or its awaited start, is owed). The hand-off adapts: a buffer is hashed
 * on the calling thread when the worker is not up yet (starting one takes tens of milliseconds, a
 * CLI's whole compile of a small tree), when the buffer is too small to be worth a round trip, or
 * when the worker is already MAX_OUTSTANDING_BYTES behind (starved of a core on a loaded machine:
 * the caller then takes a share instead of waiting). With no worker (run from TypeScript source
 * without a spawn seam, see worker-entry.ts, or after one failed) everything is hashed inline.
 */
import type { Worker } from "node:worker_threads";
import { sha256Digest, type Digest } from "./digest.js";
import { WardenError } from "./errors.js";
import { workerEntry } from "./worker-entry.js";
import { WorkerHold } from "./worker-hold.js";

/**
 * Smallest buffer handed to the worker: a round trip costs both threads about 50 µs of CPU, the
 * time sha256 takes over some 50 KiB here. It is also above Buffer's pool size, so a buffer the
 * caller hands over is never a slice of memory other buffers share.
 */
export const MIN_OFF_THREAD_BYTES = 64 * 1024;
/** Bytes out at the worker at most before the caller hashes the next buffer itself. */
export const MAX_OUTSTANDING_BYTES = 4 * 1024 * 1024;
/**
 * Bytes to hash below which `expect` does not start a worker: about 4 ms of sha256 here, less than
 * a worker takes to start (its start is not waited for, but it costs a core that much).
 */
export const WORKER_WORTH_BYTES = 4 * 1024 * 1024;

export interface Hashed {
  readonly digest: Digest;
  /** the same bytes, as a view on the buffer handed back */
  readonly bytes: Buffer;
}

type Reply = { readonly ready: true } | { readonly id: number; readonly hex?: string; readonly message?: string; readonly buffer: ArrayBuffer };

interface Job {
  readonly offset: number;
  readonly length: number;
  resolve(hashed: Hashed): void;
  reject(error: unknown): void;
}

const HASH_WORKER = workerEntry("hash-worker", import.meta.url);
export const HASH_WORKER_URL = HASH_WORKER.url;

export interface OffThreadHasherOptions {
  /** starts the worker running hash-worker; undefined hashes inline */
  readonly spawn?: (() => Worker) | undefined;
}

/** The worker stopped with buffers it had been handed: their bytes went with it. */
function workerLost(cause: unknown): WardenError {
  const message = "the hashing worker thread stopped while holding bytes to digest; run the command again (it then hashes on the calling thread)";
  return new WardenError("hash-worker-failed", message, 500, { cause });
}

function viewOf(buffer: ArrayBufferLike, offset: number, length: number): Buffer {
  return Buffer.from(buffer, offset, length);
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

  /** Buffers hashed by the worker so far (tests and benches check it is used). */
  get hashedInWorker(): number {
    return this.#hashedInWorker;
  }

  /** Buffers hashed on the calling thread so far. */
  get hashedInline(): number {
    return this.#hashedInline;
  }

  /** Whether the worker is up and taking buffers. */
  get online(): boolean {
    return this.#online && !this.#broken;
  }

  /**
   * Says `bytes` are about to be hashed: starts the worker (once) when that many are worth one.
   * Nothing waits for it; buffers are hashed inline until it is up.
   */
  expect(bytes: number): void {
    if (bytes >= WORKER_WORTH_BYTES) this.#ensureWorker();
  }

  /**
   * Whether a worker is up, once that is known: after `expect` started one, true when it is ready
   * for buffers; false when there is none (never started, no spawn, failed). For benches and
   * tests that mean to measure or check the worker rather than its start.
   */
  started(): Promise<boolean> {
    const held = this.#worker;
    if (this.#started === undefined || held === undefined || this.online) return Promise.resolve(this.online);
    held.owe(); // whoever waits for the start keeps the process alive until then
    return this.#started.finally(() => held.paid());
  }

  /**
   * The sha256 of `bytes`, taking over the whole ArrayBuffer under them: it may be transferred to
   * the worker, after which the caller's views on it are empty. Use the view in the result.
   */
  digestTaking(bytes: Uint8Array): Promise<Hashed> {
    const buffer = bytes.buffer;
    const held = this.online ? this.#worker : undefined;
    const behind = this.#outstandingBytes > 0 && this.#outstandingBytes + bytes.byteLength > MAX_OUTSTANDING_BYTES;
    if (held === undefined || behind || bytes.byteLength < MIN_OFF_THREAD_BYTES || !(buffer instanceof ArrayBuffer)) {
      return this.#inline(bytes);
    }
    const id = this.#nextId++;
    const { byteOffset: offset, byteLength: length } = bytes;
    try {
      held.worker.postMessage({ id, buffer, offset, length }, [buffer]);
    } catch {
      // A buffer that cannot be transferred (one Node made untransferable) stays where it is.
      return this.#inline(bytes);
    }
    held.owe(); // a digest owed keeps the process alive
    this.#outstandingBytes += length;
    return new Promise<Hashed>((resolve, reject) => this.#inFlight.set(id, { offset, length, resolve, reject }));
  }

  #inline(bytes: Uint8Array): Promise<Hashed> {
    try {
      const digest = sha256Digest(bytes);
      this.#hashedInline++;
      return Promise.resolve({ digest, bytes: viewOf(bytes.buffer, bytes.byteOffset, bytes.byteLength) });
    } catch (error) {
      return Promise.reject(error);
    }
  }

  /** Stops the worker; later buffers are hashed inline. */
  async close(): Promise<void> {
    this.#broken = true;
    this.#settleStarted(false);
    const held = this.#worker;
    this.#worker = undefined;
    this.#fail(new WardenError("hash-worker-failed", "the hashing worker thread was closed while holding bytes to digest", 500));
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
    // A worker that dies holds the buffers it was handed: those digests fail (typed), and every
    // later buffer is hashed inline.
    const fail = (cause: unknown): void => {
      if (this.#worker === held) this.#worker = undefined;
      this.#broken = true;
      held.clear();
      this.#settleStarted(false);
      this.#fail(workerLost(cause));
    };
    worker.on("error", fail);
    worker.on("exit", (code) => fail(new Error(`the worker exited with code ${code}`)));
    this.#worker = held;
  }

  #settle(from: WorkerHold, reply: Exclude<Reply, { readonly ready: true }>): void {
    const job = this.#inFlight.get(reply.id);
    if (job === undefined) return;
    this.#inFlight.delete(reply.id);
    this.#outstandingBytes -= job.length;
    from.paid();
    if (reply.hex !== undefined) {
      this.#hashedInWorker++;
      job.resolve({ digest: `sha256:${reply.hex}`, bytes: viewOf(reply.buffer, job.offset, job.length) });
      return;
    }
    // The worker could not hash (it always should): hash here, where the error is raised for real.
    try {
      const bytes = viewOf(reply.buffer, job.offset, job.length);
      this.#hashedInline++;
      job.resolve({ digest: sha256Digest(bytes), bytes });
    } catch (error) {
      job.reject(error);
    }
  }

  #fail(error: WardenError): void {
    const jobs = [...this.#inFlight.values()];
    this.#inFlight.clear();
    this.#outstandingBytes = 0;
    for (const job of jobs) job.reject(error);
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
