/**
 * The claim store's writes on a worker thread (claim-write-worker.ts), so that COMMIT and its WAL
 * fsync never block the event loop. Requests made in one burst of callbacks travel in one message;
 * the worker groups them (with whatever else is queued) into one transaction and answers each only
 * after that transaction's COMMIT returned, so nothing resolves before it is durable — exactly the
 * contract of the in-process group commit.
 *
 * Until the worker has its connection open, requests wait here; if it cannot open one, they (and
 * all later ones) run in-process instead. If the worker dies later, the requests it held are
 * refused as `claim-writer-failed` (each may or may not have committed: a claim row left behind
 * is released first, so it reads unresolved — never a second run) and later writes run in-process.
 */
import type { Worker } from "node:worker_threads";
import type { Digest } from "../../../core/digest.js";
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

  /** `inProcess` builds the in-process writer used when the worker cannot serve. */
  constructor(worker: Worker, config: ClaimWriterConfig, inProcess: () => ClaimWrites) {
    this.#worker = worker;
    this.#inProcess = inProcess;
    worker.unref();
    worker.on("message", (message: FromWorker) => this.#receive(message));
    const fail = (): void => this.#workerFailed();
    worker.on("error", fail);
    worker.on("exit", fail);
    worker.ref(); // until it answers the open
    worker.postMessage({ kind: "open", config });
  }

  get commits(): number {
    return this.#workerCommits + (this.#local?.commits ?? 0);
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
      this.#worker.ref();
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

  #scheduleFlush(): void {
    if (this.#flushScheduled) return;
    this.#flushScheduled = true;
    queueMicrotask(() => {
      this.#flushScheduled = false;
      this.#flush();
    });
  }

  #flush(): void {
    if (this.#state !== "open" || this.#queue.length === 0) return;
    const ops = this.#queue;
    this.#queue = [];
    for (const op of ops) {
      const pending = this.#queued.get(op.id);
      this.#queued.delete(op.id);
      if (pending !== undefined) this.#sent.set(op.id, pending);
    }
    this.#worker.ref(); // answers outstanding keep the process alive
    this.#worker.postMessage({ kind: "ops", ops });
  }

  #receive(message: FromWorker): void {
    switch (message.kind) {
      case "opened":
        if (this.#state !== "opening") return;
        this.#state = "open";
        this.#worker.unref();
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
          if (reply.ok) pending.resolve(reply.value);
          else pending.reject(deserializeError(reply.error));
        }
        if (this.#sent.size === 0) this.#worker.unref();
        return;
      case "closed":
        this.#onClosed?.();
        return;
    }
  }

  /** The worker could not open its connection: every write, queued or later, runs in-process. */
  #toInProcess(): void {
    if (this.#state === "closed") return;
    this.#state = "in-process";
    this.#worker.unref();
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
