/**
 * Group commit for the postgres backend: writes that queue up while statements are in flight
 * are sent together as ONE statement, so concurrent callers share a round trip and a WAL flush.
 * Up to `maxInFlight` statements run at once (on different pooled connections): a caller waits
 * for its own statement, not behind a queue of them, and batches grow by themselves when the
 * database is slower than the callers. A submitter's promise settles only after its statement
 * returned (committed).
 *
 * Items carry a key, and a key is never in two statements at once: items of one key (the lines of
 * one journal, the claims of one id) are sent in submission order, each statement after the one
 * before it for that key has finished.
 */

export type Outcome<R> = { readonly ok: true; readonly value: R } | { readonly ok: false; readonly error: unknown };

/** Runs one batch; answers one outcome per item, in order, or throws to fail them all. */
export type BatchRunner<I, R> = (items: readonly I[]) => Promise<readonly Outcome<R>[]>;

export interface BatcherOptions<I> {
  /** statements in flight at once */
  readonly maxInFlight: number;
  /** items of one key keep their order and share no two statements */
  readonly keyOf: (item: I) => string;
  /** largest batch */
  readonly maxItems?: number;
  /**
   * When queued items are sent. "immediate" (the default): after the event loop's I/O poll, so
   * callers woken by every socket that poll read join one batch — the most sharing, for writes.
   * "tick": as soon as the callback whose callers queued them has finished, before the next
   * socket's results are handled. With maxItems below the callers' number this keeps several
   * statements in flight that take turns: the database answers one while this process handles
   * the results of another, instead of every caller converging on one statement that the
   * database and this process work on strictly by turns (a convoy, whose cycle every caller
   * waits out in full).
   */
  readonly drainOn?: "immediate" | "tick";
}

interface Pending<I, R> {
  readonly item: I;
  readonly key: string;
  readonly resolve: (value: R) => void;
  readonly reject: (error: unknown) => void;
}

const DEFAULT_MAX_ITEMS = 1000;

export class Batcher<I, R> {
  readonly #run: BatchRunner<I, R>;
  readonly #options: BatcherOptions<I>;
  #queue: Pending<I, R>[] = [];
  /** keys with an item in a statement now */
  readonly #busy = new Set<string>();
  #inFlight = 0;
  #scheduled = false;
  #batches = 0;
  #idle: (() => void)[] = [];

  constructor(run: BatchRunner<I, R>, options: BatcherOptions<I>) {
    this.#run = run;
    this.#options = options;
  }

  /** Statements sent so far. */
  get batches(): number {
    return this.#batches;
  }

  submit(item: I): Promise<R> {
    return new Promise<R>((resolve, reject) => {
      this.#queue.push({ item, key: this.#options.keyOf(item), resolve, reject });
      if (!this.#scheduled) {
        this.#scheduled = true;
        // Not a microtask: every caller the current callback wakes has queued before it runs.
        const drain = (): void => {
          this.#scheduled = false;
          this.#drain();
        };
        if (this.#options.drainOn === "tick") process.nextTick(drain);
        else setImmediate(drain);
      }
    });
  }

  /** Resolves once nothing is queued or in flight. */
  settled(): Promise<void> {
    if (this.#inFlight === 0 && !this.#scheduled && this.#queue.length === 0) return Promise.resolve();
    return new Promise((resolve) => this.#idle.push(resolve));
  }

  #drain(): void {
    const maxItems = this.#options.maxItems ?? DEFAULT_MAX_ITEMS;
    while (this.#inFlight < this.#options.maxInFlight && this.#queue.length > 0) {
      const batch: Pending<I, R>[] = [];
      const rest: Pending<I, R>[] = [];
      const taken = new Set<string>();
      const skipped = new Set<string>();
      for (const p of this.#queue) {
        // A key already in flight, or one whose earlier item had to wait, waits as a whole.
        const eligible = !this.#busy.has(p.key) && !skipped.has(p.key) && (batch.length < maxItems || taken.has(p.key));
        if (eligible) {
          batch.push(p);
          taken.add(p.key);
        } else {
          rest.push(p);
          skipped.add(p.key);
        }
      }
      if (batch.length === 0) break;
      this.#queue = rest;
      for (const key of taken) this.#busy.add(key);
      this.#inFlight++;
      void this.#send(batch, taken);
    }
    if (this.#inFlight === 0 && this.#queue.length === 0) {
      const idle = this.#idle;
      this.#idle = [];
      for (const resolve of idle) resolve();
    }
  }

  async #send(batch: readonly Pending<I, R>[], keys: ReadonlySet<string>): Promise<void> {
    let outcomes: readonly Outcome<R>[] | undefined;
    let failure: unknown;
    try {
      outcomes = await this.#run(batch.map((p) => p.item));
      this.#batches++;
    } catch (error) {
      failure = error;
    }
    for (const key of keys) this.#busy.delete(key);
    this.#inFlight--;
    batch.forEach((p, i) => {
      const outcome = outcomes?.[i];
      if (outcomes === undefined) p.reject(failure);
      else if (outcome === undefined) p.reject(new Error("batch answered fewer outcomes than items"));
      else if (outcome.ok) p.resolve(outcome.value);
      else p.reject(outcome.error);
    });
    this.#drain();
  }
}
