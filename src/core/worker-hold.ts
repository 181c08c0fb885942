/**
 * A worker thread that holds the process open exactly while it owes an answer. A ref'd worker
 * keeps Node running; the signer, the run checker, the hasher and the claim writer want that only
 * while a reply is outstanding, so that a process whose worker is idle (a CLI done with its work,
 * a test) exits by itself, and one waiting for a reply does not exit before it.
 *
 * `worker.unref()` alone does not stay true: a worker gaining its first "message" listener refs
 * its port again (nodejs/node#53036), so a listener attached after the unref (or removed and added
 * again) would hold the process forever. The hold applies its state again whenever that happens,
 * so listeners may be attached before or after it, in any order.
 */
import type { Worker } from "node:worker_threads";

export class WorkerHold {
  readonly worker: Worker;
  #owed = 0;

  constructor(worker: Worker) {
    this.worker = worker;
    // Node refs the port in its own "newListener" handler, which the Worker's constructor added
    // before this one: applying the state here, right after it, undoes that ref. Only on that ref's
    // cause (a first "message" listener): terminate() refs the worker too, so that the process
    // waits for it to stop, and that must stand.
    worker.on("newListener", (event: string | symbol) => {
      if (event === "message" && worker.listenerCount("message") === 0) this.#apply();
    });
    this.#apply();
  }

  /** Answers owed right now. */
  get owed(): number {
    return this.#owed;
  }

  /** `count` more answers are owed: the process stays open until they are paid. */
  owe(count = 1): void {
    if (count <= 0) return;
    const was = this.#owed;
    this.#owed += count;
    if (was === 0) this.#apply();
  }

  /** `count` answers arrived; with none owed any more, the worker no longer holds the process. */
  paid(count = 1): void {
    if (count <= 0 || this.#owed === 0) return;
    this.#owed = Math.max(0, this.#owed - count);
    if (this.#owed === 0) this.#apply();
  }

  /** Nothing is owed any more (the worker stopped, or what it held was redone elsewhere). */
  clear(): void {
    this.paid(this.#owed);
  }

  #apply(): void {
    if (this.#owed > 0) this.worker.ref();
    else this.worker.unref();
  }
}
