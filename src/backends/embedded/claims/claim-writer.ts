/**
 * The claim store's writes on one SQLite connection, grouped per event-loop turn into one durable
 * transaction (group-commit.ts). The same class runs on the store's own connection or, off the
 * event loop, on a worker thread's (claim-write-worker.ts): its arguments and answers are plain
 * data (rows as read, not yet interpreted), so they cross a thread as they are.
 */
import { IntegrityError, LimitError } from "../../../core/errors.js";
import type { Digest } from "../../../core/digest.js";
import type { ClaimKey, NewClaim, StoredResult } from "../../../invocations/claim-store.js";
import { CLAIM_COLUMNS, type ClaimRow } from "./claim-schema.js";
import { GroupCommit } from "../sqlite/group-commit.js";
import { QueueWriter, type QueueWriteOp } from "./queue-writer.js";
import { leaseLost } from "../../shared/queue-rows.js";
import type { SqliteDatabase, SqliteStatement } from "../../../storage/sqlite.js";

type Key = [scope: string, id: string];

/** A claim write's answer: whether it created the row, and the row as it now stands. */
export interface ClaimWriteResult {
  readonly created: boolean;
  readonly row: ClaimRow;
}

/** The store's writes, wherever they run. Every promise settles only after its COMMIT returned. */
export interface ClaimWrites {
  /** `dequeued`: the claim starts a queued invocation (ClaimOptions.dequeued). */
  claim(claim: NewClaim, dequeued?: boolean): Promise<ClaimWriteResult>;
  /** One write of the queue (queue-writer.ts); answers what QueueWriter.apply answers. */
  queue(op: QueueWriteOp): Promise<unknown>;
  record(key: ClaimKey, runId: string, result: StoredResult, claimHash: Digest): Promise<boolean>;
  release(key: ClaimKey, runId: string): Promise<void>;
  attachReceipt(key: ClaimKey, claimHash: Digest, receipt: string): Promise<boolean>;
  prune(keys: readonly ClaimKey[], now: number): Promise<number>;
  noteProblem(key: ClaimKey, code: string | undefined, at: number): Promise<void>;
  /** write transactions committed so far */
  readonly commits: number;
  /** Lets queued writes commit; later writes are refused. */
  close(): Promise<void>;
}

export class ClaimWriter implements ClaimWrites {
  readonly #owner: string;
  readonly #maxClaims: number;
  readonly #writes: GroupCommit;
  readonly #select: SqliteStatement<Key, ClaimRow>;
  readonly #insert: SqliteStatement<unknown[]>;
  readonly #count: SqliteStatement<[], number>;
  readonly #addCount: SqliteStatement<[number]>;
  readonly #record: SqliteStatement<unknown[]>;
  readonly #release: SqliteStatement<unknown[]>;
  readonly #attachReceipt: SqliteStatement<unknown[]>;
  readonly #prune: SqliteStatement<[number, string, string]>;
  readonly #noteProblem: SqliteStatement<[string, string, string, number]>;
  readonly #clearProblem: SqliteStatement<Key>;
  readonly #queue: QueueWriter;

  constructor(db: SqliteDatabase, owner: string, maxClaims: number) {
    this.#owner = owner;
    this.#maxClaims = maxClaims;
    this.#writes = new GroupCommit(db);
    this.#queue = new QueueWriter(db, owner);
    this.#select = db.prepare(`SELECT ${CLAIM_COLUMNS} FROM claims WHERE scope = ? AND id = ?`);
    const placeholders = `(${CLAIM_COLUMNS.split(",").map(() => "?").join(", ")})`;
    this.#insert = db.prepare(`INSERT INTO claims (${CLAIM_COLUMNS}) VALUES ${placeholders}`);
    this.#count = db.prepare<[], number>("SELECT value FROM counters WHERE name = 'claims'").pluck();
    this.#addCount = db.prepare("UPDATE counters SET value = value + ? WHERE name = 'claims'");
    this.#record = db.prepare(
      "UPDATE claims SET result_hash = ?, result = ?, recorded_at = ?, journal_entries = ?, journal_tail = ?, " +
        "journal_bytes = ?, journal_sha256 = ?, claim_hash = ? " +
        "WHERE scope = ? AND id = ? AND run_id = ? AND owner = ? AND released = 0 " +
        "AND result_hash IS NULL AND receipt IS NULL",
    );
    this.#release = db.prepare(
      "UPDATE claims SET released = 1 WHERE scope = ? AND id = ? AND run_id = ? AND owner = ? AND result_hash IS NULL",
    );
    this.#attachReceipt = db.prepare(
      "UPDATE claims SET receipt = ? WHERE scope = ? AND id = ? AND receipt IS NULL AND claim_hash = ?",
    );
    // The first finding's time stays: the row has been in the queue since then.
    this.#noteProblem = db.prepare(
      "INSERT INTO claim_problems (scope, id, code, found_at) VALUES (?, ?, ?, ?) " +
        "ON CONFLICT (scope, id) DO UPDATE SET code = excluded.code",
    );
    this.#clearProblem = db.prepare("DELETE FROM claim_problems WHERE scope = ? AND id = ?");
    this.#prune = db.prepare(
      "UPDATE claims SET result = NULL, pruned_at = ? WHERE scope = ? AND id = ? AND result IS NOT NULL",
    );
  }

  get commits(): number {
    return this.#writes.batches;
  }

  claim(claim: NewClaim, dequeued = false): Promise<ClaimWriteResult> {
    return this.#writes.submit(() => {
      // Read inside the transaction: an earlier unit of this batch or another process may have
      // created it since the caller looked; the first creator wins and everyone else sees its row.
      const raced = this.#select.get(claim.scope, claim.id);
      // A queued run starts only while its lease holds, in this transaction (its savepoint rolls
      // back alone when refused): cancelled or requeued meanwhile, nothing is written.
      if (dequeued && !this.#queue.start(claim, claim.created_at, raced !== undefined)) throw leaseLost(claim);
      if (raced !== undefined) return { created: false, row: raced };
      const count = this.#count.get() ?? 0;
      if (count >= this.#maxClaims) {
        throw new LimitError(
          "capacity-exhausted",
          `the claim store holds ${count} identities, its limit; no new claim was created and nothing was deleted`,
          { status: 507, details: { limit: this.#maxClaims } },
        );
      }
      this.#insert.run(
        claim.scope, claim.id, claim.request_hash, claim.agent, claim.run_id, this.#owner, claim.created_at, 0,
        claim.claim_hash, null, null, null, null, null, null, null, null, null,
      );
      this.#addCount.run(1);
      const row = this.#select.get(claim.scope, claim.id);
      if (row === undefined) throw new IntegrityError("claim-vanished", "a claim just inserted is not readable", { status: 500 });
      return { created: true, row };
    });
  }

  queue(op: QueueWriteOp): Promise<unknown> {
    return this.#writes.submit(() => this.#queue.apply(op));
  }

  record(key: ClaimKey, runId: string, result: StoredResult, claimHash: Digest): Promise<boolean> {
    return this.#writes.submit(() => {
      const changes = this.#record.run(
        result.hash, result.payload ?? null, result.recorded_at, result.journal.entries, result.journal.tail_hash,
        result.journal.bytes, result.journal.sha256, claimHash, key.scope, key.id, runId, this.#owner,
      ).changes;
      return changes === 1;
    });
  }

  async release(key: ClaimKey, runId: string): Promise<void> {
    await this.#writes.submit(() => this.#release.run(key.scope, key.id, runId, this.#owner));
  }

  attachReceipt(key: ClaimKey, claimHash: Digest, receipt: string): Promise<boolean> {
    return this.#writes.submit(() => {
      if (this.#attachReceipt.run(receipt, key.scope, key.id, claimHash).changes !== 1) return false;
      // Reviewed and closed: whatever problem put it in the queue is the receipt's to tell now.
      this.#clearProblem.run(key.scope, key.id);
      return true;
    });
  }

  async noteProblem(key: ClaimKey, code: string | undefined, at: number): Promise<void> {
    await this.#writes.submit(() =>
      code === undefined ? this.#clearProblem.run(key.scope, key.id) : this.#noteProblem.run(key.scope, key.id, code, at),
    );
  }

  prune(keys: readonly ClaimKey[], now: number): Promise<number> {
    return this.#writes.submit(() => {
      let n = 0;
      for (const k of keys) n += this.#prune.run(now, k.scope, k.id).changes;
      return n;
    });
  }

  async close(): Promise<void> {
    await this.#writes.submit(() => undefined).catch(() => undefined);
  }
}
