/**
 * Ed25519 signing of journal lines off the event loop. Every invocation signs a handful of lines
 * (tens of microseconds each), which under concurrency is a large share of the event loop's time;
 * one worker thread signs them instead, in batches: requests that arrive while a batch is being
 * signed go out together as the next one. With no worker (run from TypeScript source without a
 * spawn seam, or after a worker failed) lines are signed inline — same key, same bytes.
 *
 * The hand-off adapts to load. A round trip to the worker wakes two threads and costs more than
 * the signature itself (about 50 µs of CPU): on a loaded two-core machine a single caller's line
 * waited about a millisecond for it. So while the worker has nothing to do, the first few lines of
 * an event-loop turn (INLINE_PER_TURN, one invocation's worth) are signed inline; every further
 * line of that turn, and every line while a batch is out, goes to the worker. A lone caller never
 * waits for a thread; many callers still keep the event loop free of most signing.
 */
import { sign, type KeyObject } from "node:crypto";
import type { Worker } from "node:worker_threads";
import { workerEntry } from "../core/worker-entry.js";
import { WorkerHold } from "../core/worker-hold.js";

type Reply = { id: number; ok: true; signatures: ArrayBuffer } | { id: number; ok: false; message: string };

const SIGNATURE_BYTES = 64;

/**
 * Lines signed inline per event-loop turn while the worker is idle: the four of a one-effect run,
 * about 200 µs of the loop's time at most in any turn.
 */
export const INLINE_PER_TURN = 4;

interface Request {
  readonly key: KeyObject;
  readonly message: Uint8Array;
  resolve(signature: Uint8Array): void;
  reject(error: unknown): void;
}

// Without a worker (from source with no spawn passed, see worker-entry.ts) lines are signed inline.
const SIGN_WORKER = workerEntry("sign-worker", import.meta.url);
export const SIGN_WORKER_URL = SIGN_WORKER.url;
const DEFAULT_SPAWN = SIGN_WORKER.defaultSpawn;

export interface SignerOptions {
  /** starts the worker running sign-worker; undefined signs inline */
  readonly spawn?: (() => Worker) | undefined;
}

function signInline(key: KeyObject, message: Uint8Array): Uint8Array {
  return sign(null, message, key);
}

export class Signer {
  readonly #spawn: (() => Worker) | undefined;
  /** The worker, holding the process open while a batch it was sent is unanswered. */
  #worker: WorkerHold | undefined;
  #broken = false;
  #queue: Request[] = [];
  /** The batch the worker is signing, by id. */
  readonly #inFlight = new Map<number, readonly Request[]>();
  #nextId = 0;
  #flushScheduled = false;
  #signedInWorker = 0;
  #signedInline = 0;
  /** Lines signed inline in this event-loop turn (reset by an immediate once the turn ends). */
  #inlineThisTurn = 0;
  /** Keys the worker holds, by the index batches name them with. */
  readonly #keyIndex = new Map<KeyObject, number>();

  constructor(options: SignerOptions = {}) {
    this.#spawn = "spawn" in options ? options.spawn : DEFAULT_SPAWN;
  }

  /** Signatures made by the worker so far (tests and benches check it is used). */
  get signedInWorker(): number {
    return this.#signedInWorker;
  }

  /** Signatures made on the calling thread so far, because the worker was idle or unavailable. */
  get signedInline(): number {
    return this.#signedInline;
  }

  sign(key: KeyObject, message: Uint8Array): Promise<Uint8Array> {
    if (this.#spawn === undefined || this.#broken || this.#idleEnough()) {
      try {
        const signature = signInline(key, message);
        this.#signedInline++;
        return Promise.resolve(signature);
      } catch (error) {
        return Promise.reject(error);
      }
    }
    return new Promise<Uint8Array>((resolve, reject) => {
      this.#queue.push({ key, message, resolve, reject });
      if (this.#inFlight.size === 0 && !this.#flushScheduled) {
        // Requests made in the same burst of callbacks go out together.
        this.#flushScheduled = true;
        queueMicrotask(() => {
          this.#flushScheduled = false;
          this.#flush();
        });
      }
    });
  }

  /**
   * True when this line is cheaper signed here than handed off: the worker has nothing queued or
   * in flight, and this turn has signed fewer than INLINE_PER_TURN lines inline. Counts the line.
   */
  #idleEnough(): boolean {
    if (this.#queue.length > 0 || this.#inFlight.size > 0 || this.#inlineThisTurn >= INLINE_PER_TURN) return false;
    if (this.#inlineThisTurn++ === 0) setImmediate(() => (this.#inlineThisTurn = 0)).unref();
    return true;
  }

  /** Stops the worker; later lines are signed inline. */
  async close(): Promise<void> {
    this.#broken = true;
    const held = this.#worker;
    this.#worker = undefined;
    this.#recoverInline();
    held?.clear();
    await held?.worker.terminate();
  }

  #flush(): void {
    if (this.#queue.length === 0 || this.#inFlight.size > 0) return;
    const held = this.#ensureWorker();
    if (held === undefined) {
      this.#recoverInline();
      return;
    }
    const queue = this.#queue;
    this.#queue = [];
    // One key per batch (a rotation mid-flight makes two).
    const byKey = new Map<KeyObject, Request[]>();
    for (const request of queue) {
      const same = byKey.get(request.key);
      if (same === undefined) byKey.set(request.key, [request]);
      else same.push(request);
    }
    for (const [key, requests] of byKey) {
      let index = this.#keyIndex.get(key);
      if (index === undefined) {
        index = this.#keyIndex.size;
        this.#keyIndex.set(key, index);
        held.worker.postMessage({ kind: "key", index, key });
      }
      // One fresh buffer, transferred: a message is usually a view on a shared pool buffer,
      // which structured clone would copy whole.
      const ends: number[] = [];
      let total = 0;
      for (const r of requests) ends.push((total += r.message.byteLength));
      const data = new Uint8Array(total);
      requests.forEach((r, i) => data.set(r.message, i === 0 ? 0 : ends[i - 1]!));
      const id = this.#nextId++;
      this.#inFlight.set(id, requests);
      held.owe(); // a pending signature keeps the process alive
      held.worker.postMessage({ kind: "batch", id, key: index, data: data.buffer, ends }, [data.buffer]);
    }
  }

  #ensureWorker(): WorkerHold | undefined {
    if (this.#worker !== undefined) return this.#worker;
    if (this.#broken || this.#spawn === undefined) return undefined;
    let worker: Worker;
    try {
      worker = this.#spawn();
    } catch {
      this.#broken = true;
      return undefined;
    }
    const held = new WorkerHold(worker);
    worker.on("message", (reply: Reply) => this.#settle(held, reply));
    // A worker that dies (or never starts) takes nothing with it: its lines are signed inline,
    // and every later one too.
    const fail = (): void => {
      if (this.#worker === held) this.#worker = undefined;
      this.#broken = true;
      held.clear();
      this.#recoverInline();
    };
    worker.on("error", fail);
    worker.on("exit", fail);
    this.#worker = held;
    return held;
  }

  #settle(from: WorkerHold, reply: Reply): void {
    const requests = this.#inFlight.get(reply.id);
    if (requests === undefined) return;
    this.#inFlight.delete(reply.id);
    from.paid();
    if (reply.ok && reply.signatures.byteLength === requests.length * SIGNATURE_BYTES) {
      this.#signedInWorker += requests.length;
      requests.forEach((r, i) => r.resolve(new Uint8Array(reply.signatures, i * SIGNATURE_BYTES, SIGNATURE_BYTES)));
    } else {
      // The worker could not sign (it always should): sign here, where the error is raised for real.
      for (const r of requests) settleInline(r);
    }
    if (this.#inFlight.size === 0) this.#flush();
  }

  /** Signs every queued and in-flight request inline. */
  #recoverInline(): void {
    const pending = [...[...this.#inFlight.values()].flat(), ...this.#queue];
    this.#inFlight.clear();
    this.#queue = [];
    for (const r of pending) settleInline(r);
  }
}

function settleInline(request: Request): void {
  try {
    request.resolve(signInline(request.key, request.message));
  } catch (error) {
    request.reject(error);
  }
}

let shared: Signer | undefined;

/** The process-wide signer every node key uses. */
export function sharedSigner(): Signer {
  shared ??= new Signer();
  return shared;
}

/** Replaces the process-wide signer (e.g. with one whose worker can load TypeScript). */
export function setSharedSigner(signer: Signer): void {
  shared = signer;
}
