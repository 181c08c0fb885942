/**
 * Group commit for one SQLite connection: every write submitted during one event-loop turn runs
 * in ONE immediate transaction, so the whole batch costs one WAL fsync. Each submitter's promise
 * settles only after COMMIT has returned (synchronous=FULL: the batch is on disk), so no caller
 * ever learns of a write before it is durable.
 *
 * Each unit of work runs inside its own savepoint: a unit that throws (a refused claim, exhausted
 * capacity) is rolled back alone and rejects alone; the rest of the batch still commits.
 */
import type { WardenError } from "../../../core/errors.js";
import { sqliteFailure, type SqliteDatabase, type SqliteStatement } from "../../../storage/sqlite.js";

interface Pending {
  readonly work: () => unknown;
  readonly resolve: (value: unknown) => void;
  readonly reject: (error: unknown) => void;
}

type Settled = { readonly ok: true; readonly value: unknown } | { readonly ok: false; readonly error: unknown };

export class GroupCommit {
  readonly #db: SqliteDatabase;
  readonly #begin: SqliteStatement;
  readonly #commit: SqliteStatement;
  readonly #rollback: SqliteStatement;
  readonly #savepoint: SqliteStatement;
  readonly #releaseSavepoint: SqliteStatement;
  readonly #rollbackSavepoint: SqliteStatement;
  #queue: Pending[] = [];
  #scheduled = false;
  #batches = 0;

  constructor(db: SqliteDatabase) {
    this.#db = db;
    this.#begin = db.prepare("BEGIN IMMEDIATE");
    this.#commit = db.prepare("COMMIT");
    this.#rollback = db.prepare("ROLLBACK");
    this.#savepoint = db.prepare("SAVEPOINT unit");
    this.#releaseSavepoint = db.prepare("RELEASE unit");
    this.#rollbackSavepoint = db.prepare("ROLLBACK TO unit");
  }

  /** Transactions committed so far (for tests and benches that check batching happened). */
  get batches(): number {
    return this.#batches;
  }

  /** Queues `work` for the current turn's transaction; resolves with its value after COMMIT. */
  submit<T>(work: () => T): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      this.#queue.push({ work, resolve: resolve as (value: unknown) => void, reject });
      if (!this.#scheduled) {
        this.#scheduled = true;
        // setImmediate, not a microtask: callers woken by the same I/O poll all join this batch.
        setImmediate(() => this.#flush());
      }
    });
  }

  #flush(): void {
    this.#scheduled = false;
    const batch = this.#queue;
    this.#queue = [];
    if (batch.length === 0) return;
    let settled: Settled[];
    try {
      settled = this.#runBatch(batch);
    } catch (error) {
      const failure: WardenError = sqliteFailure(error, "commit the claim store transaction");
      for (const pending of batch) pending.reject(failure);
      return;
    }
    this.#batches++;
    batch.forEach((pending, i) => {
      const outcome = settled[i]!;
      if (outcome.ok) pending.resolve(outcome.value);
      else pending.reject(outcome.error);
    });
  }

  #runBatch(batch: readonly Pending[]): Settled[] {
    this.#begin.run();
    try {
      const settled: Settled[] = [];
      for (const pending of batch) {
        this.#savepoint.run();
        try {
          const value = pending.work();
          this.#releaseSavepoint.run();
          settled.push({ ok: true, value });
        } catch (error) {
          // SQLite may have rolled the whole transaction back itself (SQLITE_FULL, I/O errors).
          if (!this.#db.inTransaction) throw error;
          this.#rollbackSavepoint.run();
          this.#releaseSavepoint.run();
          settled.push({ ok: false, error: sqliteFailure(error, "write the claim store") });
        }
      }
      this.#commit.run();
      return settled;
    } catch (error) {
      if (this.#db.inTransaction) this.#rollback.run();
      throw error;
    }
  }
}
