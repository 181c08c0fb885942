/**
 * The claim store's writes on a worker thread (claim-write-worker.ts), so that COMMIT and its WAL
 * fsync never block the event loop. Requests made in one burst of callbacks travel in one message;
 * the worker groups them (with whatever else is queued) into one transaction and answers each only
 * after that transaction's COMMIT returned, so nothing resolves before it is durable — exactly the
 * contract of the in-process group commit.
 *
 * The hand-off adapts to load, as the signer's does (journal/signer.ts). A round trip to the worker
 * costs a message and a thread wake each way, which a lone caller pays twice per invocation on top
 * of the COMMIT itself. So while the worker holds nothing (every write it was sent has committed and
 * been answered) the first write of an event-loop turn commits on this thread's own connection
 * instead, with the same statements, the same synchronous=FULL COMMIT and the same rule: its promise
 * settles only after COMMIT returned. Every further write of that turn, and every write while the
 * worker holds some, goes to the worker; those wait until the inline COMMIT has returned, so the two
 * connections never contend for SQLite's write lock (whose busy handler sleeps in milliseconds).
 *
 * Until the worker has its connection open, requests wait here; if it cannot open one, they (and
 * all later ones) run in-process instead. If the worker dies later, the requests it held are
 * refused as `claim-writer-failed` (each may or may not have committed: a claim row left behind
 * is released first, so it reads unresolved — never a second run) and later writes run in-process.
 */
import type { Worker } from "node:worker_threads";
import type { Digest } from "../../../core/digest.js";
import { WorkerHold } from "../../../core/worker-hold.js";
import { StorageError, type WardenError } from "../../../core/errors.js";
import type { ClaimKey, NewClaim, StoredResult } from "../../../invocations/claim-store.js";
import type { ClaimWriteResult, ClaimWrites } from "./claim-writer.js";
import type { QueueWriteOp } from "./queue-writer.js";
import {
  applyClaimWrite,
  deserializeError,
  type ClaimWriteOp,
  type ClaimWriteReply,
  type ClaimWriteRequest,
  type ClaimWriterConfig,
  type SerializedError,
} from "./claim-write-protocol.js";

/**
 * Writes committed inline per event-loop turn while the worker is idle: one, a lone caller's claim
 * or record. A burst of callers still commits on the worker, off the event loop.
 */
export const INLINE_PER_TURN = 1;

type FromWorker =
  | { readonly kind: "opened" }
  | { readonly kind: "open-failed"; readonly error: SerializedError }
  | { readonly kind: "replies"; readonly replies: readonly ClaimWriteReply[]; readonly commits: number }
  | { readonly kind: "closed" };

interface Pending {
  readonly op: ClaimWriteOp;
  resolve(value: unknown): void;
  reject(error: unknown): void;
}

type State = "opening" | "open" | "in-process" | "closed";

export class ClaimWriteChannel implements ClaimWrites {
  readonly #worker: Worker;
  /** Holds the process open while the worker owes an answer: the open, a sent write, the close. */
  readonly #hold: WorkerHold;
  readonly #inProcess: () => ClaimWrites;
  #state: State = "opening";
  #local: ClaimWrites | undefined;
  #nextId = 0;
  /** Sent to the worker, awaiting its answer. */
  readonly #sent = new Map<number, Pending>();
  /** Not sent yet: waiting for this burst to end, or for the worker to open. */
  #queue: ClaimWriteRequest[] = [];
  readonly #queued = new Map<number, Pending>();
  #flushScheduled = false;
  #workerCommits = 0;
  /** Every offloaded write not settled yet: close lets them finish. */
  readonly #unsettled = new Set<Promise<unknown>>();
  #closing: Promise<void> | undefined;
  #onClosed: (() => void) | undefined;
  /** Writes committing on this thread's connection because the worker was idle. */
  #inlinePending = 0;
  /** Writes committed inline in this event-loop turn (reset by an immediate once the turn ends). */
  #inlineThisTurn = 0;
  #inlineCommits = 0;
  readonly #inlineAllowed: boolean;

  /**
   * `inProcess` builds the in-process writer used when the worker cannot serve (and, with
   * `inlineWhenIdle`, for a write made while the worker is idle).
   */
  constructor(worker: Worker, config: ClaimWriterConfig, inProcess: () => ClaimWrites, inlineWhenIdle = true) {
    this.#inlineAllowed = inlineWhenIdle;
    this.#worker = worker;
    this.#hold = new WorkerHold(worker);
    this.#inProcess = inProcess;
    worker.on("message", (message: FromWorker) => this.#receive(message));
    const fail = (): void => this.#workerFailed();
    worker.on("error", fail);
    worker.on("exit", fail);
    this.#hold.owe(); // until it answers the open
    worker.postMessage({ kind: "open", config });
  }

  get commits(): number {
    return this.#workerCommits + (this.#local?.commits ?? 0);
  }

  /** Writes committed on the calling thread because the worker was idle (tests and benches). */
  get inlineWrites(): number {
    return this.#inlineCommits;
  }

  /** True while writes go to the worker (or wait for it to open). */
  get offloaded(): boolean {
    return this.#state === "opening" || this.#state === "open";
  }

  claim(claim: NewClaim, dequeued = false): Promise<ClaimWriteResult> {
    return this.#submit({ op: "claim", claim, ...(dequeued ? { dequeued } : {}) }) as Promise<ClaimWriteResult>;
  }

  queue(op: QueueWriteOp): Promise<unknown> {
    return this.#submit({ op: "queue", queue: op });
  }

  record(key: ClaimKey, runId: string, result: StoredResult, claimHash: Digest): Promise<boolean> {
    return this.#submit({ op: "record", key: { scope: key.scope, id: key.id }, runId, result, claimHash }) as Promise<boolean>;
  }

  async release(key: ClaimKey, runId: string): Promise<void> {
    await this.#submit({ op: "release", key: { scope: key.scope, id: key.id }, runId });
  }

  adopt(key: ClaimKey, runId: string, from: string): Promise<boolean> {
    return this.#submit({ op: "adopt", key: { scope: key.scope, id: key.id }, runId, from }) as Promise<boolean>;
  }

  attachReceipt(key: ClaimKey, claimHash: Digest, receipt: string): Promise<boolean> {
    return this.#submit({ op: "attachReceipt", key: { scope: key.scope, id: key.id }, claimHash, receipt }) as Promise<boolean>;
  }

  prune(keys: readonly ClaimKey[], now: number): Promise<number> {
    return this.#submit({ op: "prune", keys: keys.map((k) => ({ scope: k.scope, id: k.id })), now }) as Promise<number>;
  }

  async noteProblem(key: ClaimKey, code: string | undefined, at: number): Promise<void> {
    await this.#submit({ op: "noteProblem", key: { scope: key.scope, id: key.id }, code, at });
  }

  /** Lets every write already made commit, then closes the worker's connection and the worker. */
  close(): Promise<void> {
    this.#closing ??= this.#close();
    return this.#closing;
  }

  async #close(): Promise<void> {
    const wasOffloaded = this.offloaded;
    // Everything submitted so far settles first (a worker still opening gets to open and serve it).
    await Promise.allSettled([...this.#unsettled]);
    this.#state = "closed";
    if (wasOffloaded && this.#worker.threadId !== -1) {
      const closed = new Promise<void>((resolve) => (this.#onClosed = resolve));
      this.#hold.owe(); // until it answers the close (or exits)
      this.#worker.postMessage({ kind: "close" });
      await Promise.race([closed, new Promise<void>((resolve) => this.#worker.once("exit", () => resolve()))]);
    }
    await this.#worker.terminate();
    await this.#local?.close();
  }

  #submit(op: ClaimWriteOp): Promise<unknown> {
    switch (this.#state) {
      case "closed":
        return Promise.reject(new StorageError("claim-store-closed", "the claim store is closed"));
      case "in-process":
        return applyClaimWrite(this.#localWriter(), op);
      default:
        break;
    }
    if (this.#state === "open" && this.#inlineWhenIdle) return this.#inline(op);
    const id = this.#nextId++;
    const settled = new Promise((resolve, reject) => {
      this.#queued.set(id, { op, resolve, reject });
      this.#queue.push({ ...op, id });
      if (this.#state === "open") this.#scheduleFlush();
    });
    this.#unsettled.add(settled);
    const forget = (): void => void this.#unsettled.delete(settled);
    settled.then(forget, forget);
    return settled;
  }

  /**
   * True when this write may commit here: the worker holds nothing and nothing waits for it, no
   * inline write is still committing, and this turn has not had its inline write yet.
   */
  get #inlineWhenIdle(): boolean {
    return this.#inlineAllowed && this.#sent.size === 0 && this.#queue.length === 0 && this.#inlinePending === 0 && this.#inlineThisTurn < INLINE_PER_TURN;
  }

  #inline(op: ClaimWriteOp): Promise<unknown> {
    if (this.#inlineThisTurn++ === 0) setImmediate(() => (this.#inlineThisTurn = 0));
    this.#inlinePending++;
    const settled = applyClaimWrite(this.#localWriter(), op);
    this.#unsettled.add(settled);
    const done = (): void => {
      this.#unsettled.delete(settled);
      this.#inlinePending--;
      this.#inlineCommits++;
      // Writes that arrived meanwhile were held for the worker until this COMMIT returned.
      if (this.#inlinePending === 0) this.#scheduleFlush();
    };
    settled.then(done, done);
    return settled;
  }

  #scheduleFlush(): void {
    if (this.#flushScheduled) return;
    this.#flushScheduled = true;
    queueMicrotask(() => {
      this.#flushScheduled = false;
      this.#flush();
    });
  }

  #flush(): void {
    if (this.#state !== "open" || this.#queue.length === 0 || this.#inlinePending > 0) return;
    const ops = this.#queue;
    this.#queue = [];
    const before = this.#sent.size;
    for (const op of ops) {
      const pending = this.#queued.get(op.id);
      this.#queued.delete(op.id);
      if (pending !== undefined) this.#sent.set(op.id, pending);
    }
    this.#hold.owe(this.#sent.size - before); // answers outstanding keep the process alive
    this.#worker.postMessage({ kind: "ops", ops });
  }

  #receive(message: FromWorker): void {
    switch (message.kind) {
      case "opened":
        if (this.#state !== "opening") return;
        this.#state = "open";
        this.#hold.paid();
        this.#flush();
        return;
      case "open-failed":
        this.#toInProcess();
        return;
      case "replies":
        this.#workerCommits = message.commits;
        for (const reply of message.replies) {
          const pending = this.#sent.get(reply.id);
          if (pending === undefined) continue;
          this.#sent.delete(reply.id);
          this.#hold.paid();
          if (reply.ok) pending.resolve(reply.value);
          else pending.reject(deserializeError(reply.error));
        }
        return;
      case "closed":
        this.#hold.paid();
        this.#onClosed?.();
        return;
    }
  }

  /** The worker could not open its connection: every write, queued or later, runs in-process. */
  #toInProcess(): void {
    if (this.#state === "closed") return;
    this.#state = "in-process";
    this.#hold.clear();
    void this.#worker.terminate();
    const queued = [...this.#queued.values()];
    this.#queued.clear();
    this.#queue = [];
    for (const p of queued) applyClaimWrite(this.#localWriter(), p.op).then(p.resolve, p.reject);
  }

  /**
   * The worker died: what it held is refused (it may have committed), the rest runs in-process.
   * A claim it held may have committed with nobody told it is theirs: it is released here, before
   * the refusal, so it reads unresolved (the run never started; an operator closes it) instead of
   * in_progress for as long as this process lives. Releasing a claim that never committed is a
   * no-op, and a claim is never released into a second owner.
   */
  #workerFailed(): void {
    if (this.#state === "closed" || this.#state === "in-process") return;
    const failure: WardenError = new StorageError("claim-writer-failed", "the claim store's write worker stopped; the write may or may not have committed");
    const held = [...this.#sent.values()];
    this.#sent.clear();
    this.#onClosed?.();
    this.#toInProcess();
    for (const p of held) {
      if (p.op.op !== "claim") {
        p.reject(failure);
        continue;
      }
      const released = applyClaimWrite(this.#localWriter(), { op: "release", key: { scope: p.op.claim.scope, id: p.op.claim.id }, runId: p.op.claim.run_id });
      released.then(
        () => p.reject(failure),
        () => p.reject(failure),
      );
    }
  }

  #localWriter(): ClaimWrites {
    this.#local ??= this.#inProcess();
    return this.#local;
  }
}
