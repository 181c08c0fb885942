/**
 * Runs journal checks (Ed25519 verification of every entry) off the event loop, on a small pool
 * of worker threads: a whole-journal verification costs a signature check per entry, and on the
 * event loop it would stall every other caller (and cap throughput at one core). With no spare
 * core, or if a worker cannot start, checks run inline — same function, same answer.
 */
import { availableParallelism } from "node:os";
import type { Worker } from "node:worker_threads";
import { workerEntry } from "../core/worker-entry.js";
import { WorkerHold } from "../core/worker-hold.js";
import { IntegrityError } from "../core/errors.js";
import type { PublicKeyRecord } from "../journal/types.js";
import type { VerifyOptions } from "../journal/verify.js";
import { checkRun, type RunCheck } from "./run-check.js";

type Reply = { id: number; ok: true; check: RunCheck } | { id: number; ok: false; message: string };

const MAX_WORKERS = 4;
// Without a worker (from source with no spawn passed, see worker-entry.ts) checks run inline.
const RUN_CHECK_WORKER = workerEntry("run-check-worker", import.meta.url);
export const RUN_CHECK_WORKER_URL = RUN_CHECK_WORKER.url;
const DEFAULT_SPAWN = RUN_CHECK_WORKER.defaultSpawn;

export interface RunCheckerOptions {
  /** pool size; default one per spare core (up to 4); 0 checks inline */
  readonly workers?: number;
  /** starts one worker running run-check-worker (default: a plain Worker on the compiled entry) */
  readonly spawn?: () => Worker;
}

interface Waiting {
  readonly job: readonly [Uint8Array, readonly PublicKeyRecord[], VerifyOptions];
  readonly from: WorkerHold;
  readonly resolve: (c: RunCheck) => void;
  readonly reject: (e: Error) => void;
}

export class RunChecker {
  readonly #size: number;
  readonly #spawnWorker: (() => Worker) | undefined;
  readonly #workers: WorkerHold[] = [];
  readonly #waiting = new Map<number, Waiting>();
  #nextId = 0;
  #broken = false;

  constructor(options: RunCheckerOptions = {}) {
    this.#spawnWorker = options.spawn ?? DEFAULT_SPAWN;
    this.#size = this.#spawnWorker === undefined ? 0 : (options.workers ?? Math.min(MAX_WORKERS, Math.max(0, availableParallelism() - 1)));
  }

  /** Workers started so far. */
  get workers(): number {
    return this.#workers.length;
  }

  /** True once a worker failed (or the pool was closed): checks run inline from then on. */
  get inline(): boolean {
    return this.#broken || this.#size === 0;
  }

  check(bytes: Uint8Array, keys: readonly PublicKeyRecord[], options: VerifyOptions): Promise<RunCheck> {
    const slot = this.#slot();
    if (slot === undefined) return Promise.resolve(checkRun(bytes, keys, options));
    const id = this.#nextId++;
    return new Promise<RunCheck>((resolve, reject) => {
      this.#waiting.set(id, { job: [bytes, keys, options], from: slot, resolve, reject });
      slot.owe(); // a pending check keeps the process alive
      slot.worker.postMessage({ id, bytes, keys, options });
    });
  }

  /** Stops the workers; later checks run inline. */
  async close(): Promise<void> {
    this.#broken = true;
    const workers = this.#workers.splice(0);
    await Promise.all(workers.map((w) => w.worker.terminate()));
  }

  #slot(): WorkerHold | undefined {
    if (this.#broken || this.#size === 0) return undefined;
    // A new worker only when every one started owes a check: a worker costs a thread and its
    // start-up (tens of milliseconds of CPU), and sequential checks keep one busy enough.
    if (this.#workers.length < this.#size && this.#workers.every((w) => w.owed > 0)) {
      try {
        this.#workers.push(this.#spawn());
      } catch {
        this.#broken = true;
        return undefined;
      }
    }
    // The least owing worker takes the check.
    return this.#workers.reduce((a, b) => (b.owed < a.owed ? b : a));
  }

  #spawn(): WorkerHold {
    const worker = this.#spawnWorker!();
    // Idle, it does not keep the process alive: the pool may start a worker and hand this check to
    // an older one that is as free, and a process done with its checks exits.
    const slot = new WorkerHold(worker);
    worker.on("message", (reply: Reply) => {
      const waiting = this.#waiting.get(reply.id);
      if (waiting === undefined) return;
      this.#waiting.delete(reply.id);
      slot.paid();
      if (reply.ok) waiting.resolve(reply.check);
      else waiting.reject(new IntegrityError("journal-check-failed", `journal check failed: ${reply.message}`, { status: 500 }));
    });
    // A worker that dies (or never starts) takes nothing with it: its checks are redone inline,
    // and the pool checks inline from then on.
    const fail = (): void => {
      this.#broken = true;
      slot.clear();
      for (const [id, waiting] of this.#waiting) {
        if (waiting.from !== slot) continue;
        this.#waiting.delete(id);
        try {
          waiting.resolve(checkRun(...waiting.job));
        } catch (error) {
          waiting.reject(error instanceof Error ? error : new Error(String(error)));
        }
      }
    };
    worker.on("error", fail);
    worker.on("exit", fail);
    return slot;
  }
}

let shared: RunChecker | undefined;

/** The process-wide pool every Invocations service uses unless given its own. */
export function sharedRunChecker(): RunChecker {
  shared ??= new RunChecker();
  return shared;
}

/** Replaces the process-wide pool (e.g. with one whose workers can load TypeScript). */
export function setSharedRunChecker(checker: RunChecker): void {
  shared = checker;
}
