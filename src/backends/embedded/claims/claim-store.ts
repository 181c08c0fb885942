/**
 * The embedded ClaimStore: one SQLite database in the private state directory, writes grouped
 * per event-loop turn into one durable transaction (claim-writer.ts) — on a worker thread's own
 * connection when one is available (claim-write-channel.ts), so COMMIT's fsync never blocks the
 * event loop — and owner liveness through per-process flock files (owner.ts). Reads use the
 * store's own connection: WAL readers see every transaction committed before they start.
 */
import type { QueueHost } from "../../../invocations/queue-store.js";
import { setImmediate as yieldToLoop } from "node:timers/promises";
import type { Worker } from "node:worker_threads";
import { workerEntry } from "../../../core/worker-entry.js";
import { BoundedMap } from "../../../core/bounded-map.js";
import { LimitError, StorageError, ValidationError } from "../../../core/errors.js";
import type { Digest } from "../../../core/digest.js";
import type {
  ClaimAttempt,
  ClaimKey,
  ClaimOptions,
  ClaimListFilter,
  ClaimRecord,
  ClaimState,
  ClaimStore,
  ClaimTally,
  ListedClaim,
  RecordedCursor,
  RecordedPage,
  NewClaim,
  StoredResult,
} from "../../../invocations/claim-store.js";
import { CLAIM_COLUMNS, listedOf, recordedPage, rowToRecord, type ClaimRow } from "../../shared/claim-rows.js";
import { CLAIM_SCHEMA_MIGRATIONS } from "./claim-schema.js";
import { ClaimWriteChannel } from "./claim-write-channel.js";
import { ClaimWriter, type ClaimWrites } from "./claim-writer.js";
import { OwnerRegistry } from "./owner.js";
import { EmbeddedQueueStore } from "./queue-store.js";
import {
  migrateSchema,
  openPrivateDatabase,
  sqliteFailure,
  type OpenDatabaseOptions,
  type SqliteDatabase,
  type SqliteStatement,
} from "../../../storage/sqlite.js";

export interface EmbeddedClaimStoreOptions {
  /** the database file, inside a private directory */
  readonly path: string;
  /** the private directory of owner lock files */
  readonly ownersDir: string;
  /** identities the store may hold (Limits.maxClaims) */
  readonly maxClaims: number;
  readonly database?: OpenDatabaseOptions;
  /**
   * Starts the write worker (claim-write-worker); undefined writes in-process. Default: a plain
   * Worker on the compiled entry, in-process when run from TypeScript source.
   */
  readonly writeWorker?: (() => Worker) | undefined;
  /**
   * Whether a write made while the worker is idle commits on the store's own connection instead
   * (claim-write-channel.ts). Default true; false sends every write to the worker.
   */
  readonly inlineWhenIdle?: boolean;
}

// Without a worker (from source with no writeWorker passed, see worker-entry.ts) writes run in-process.
const CLAIM_WRITE_WORKER = workerEntry("claim-write-worker", import.meta.url);
export const CLAIM_WRITE_WORKER_URL = CLAIM_WRITE_WORKER.url;
const DEFAULT_WRITE_WORKER = CLAIM_WRITE_WORKER.defaultSpawn;

const PRUNE_CHUNK = 1000;
/** Settled rows `get` keeps while the database is unchanged (a replay reads the same rows again and again). */
const SETTLED_CACHE_ROWS = 4096;
const SETTLED_CACHE_BYTES = 16 * 1024 * 1024;
const DEFAULT_IMPORT_BATCH = 50_000;
const IMPORT_ROWS_PER_STATEMENT = 32;
/** Page cache while importing, KiB: large batches touch much of the index. */
const IMPORT_CACHE_KIB = 128 * 1024;

type Key = [scope: string, id: string];

/**
 * Counts read only partial indexes (open and reconciled rows are few beside recorded ones) and
 * the problems table, whose rows lead the joins (CROSS JOIN: else SQLite scanned the claims).
 * Problems of open rows are counted as open already.
 */
export const TALLY =
  "SELECT (SELECT count(*) FROM claims INDEXED BY claims_open WHERE result_hash IS NULL AND receipt IS NULL) AS open, " +
  "(SELECT count(*) FROM claims INDEXED BY claims_reconciled WHERE receipt IS NOT NULL) AS reconciled, " +
  "(SELECT count(*) FROM claim_problems p CROSS JOIN claims c ON c.scope = p.scope AND c.id = p.id " +
  "WHERE c.result_hash IS NOT NULL AND c.receipt IS NULL) AS recorded_problems, " +
  "(SELECT count(*) FROM claim_problems p CROSS JOIN claims c ON c.scope = p.scope AND c.id = p.id " +
  "WHERE c.receipt IS NOT NULL) AS reconciled_problems";

/**
 * A page of the queue: two index walks from the cursor (the open rows' partial index, the
 * problems' primary key), each stopped at the page's size, merged in key order, then each key's
 * row by its primary key (CROSS JOIN keeps that order: with `(scope, id) IN (…)` SQLite scanned
 * the whole table). The queue costs what its own rows cost, however many recorded rows sit
 * between them. Parameters: cursor, limit, cursor, limit, limit.
 */
export const QUEUE_PAGE =
  `SELECT ${CLAIM_COLUMNS.split(", ").map((c) => `c.${c}`).join(", ")} FROM (` +
  "SELECT scope, id FROM (SELECT scope, id FROM claims INDEXED BY claims_open WHERE result_hash IS NULL AND receipt IS NULL " +
  "AND (scope, id) > (?, ?) ORDER BY scope, id LIMIT ?) " +
  "UNION SELECT scope, id FROM (SELECT scope, id FROM claim_problems WHERE (scope, id) > (?, ?) ORDER BY scope, id LIMIT ?)" +
  ") AS k CROSS JOIN claims c ON c.scope = k.scope AND c.id = k.id ORDER BY k.scope, k.id LIMIT ?";

export class EmbeddedClaimStore implements ClaimStore, QueueHost {
  readonly #db: SqliteDatabase;
  readonly #owners: OwnerRegistry;
  readonly #writes: ClaimWrites;
  readonly #maxClaims: number;
  readonly #select: SqliteStatement<Key, ClaimRow>;
  readonly #insert: SqliteStatement<unknown[]>;
  readonly #insertMany: SqliteStatement<unknown[]>;
  readonly #count: SqliteStatement<[], number>;
  readonly #addCount: SqliteStatement<[number]>;
  readonly #tally: SqliteStatement<[], { open: number; reconciled: number; recorded_problems: number; reconciled_problems: number }>;
  readonly #list: Readonly<Record<Exclude<ClaimListFilter, "queue">, SqliteStatement<[string, string, number], ClaimRow>>>;
  readonly #queue: SqliteStatement<[string, string, number, string, string, number, number], ClaimRow>;
  readonly #recordedSince: SqliteStatement<[number, number, string, string, number], ClaimRow>;
  readonly #pruneCandidates: SqliteStatement<[number, number, string, string], { scope: string; id: string; recorded_at: number }>;
  readonly #dataVersion: SqliteStatement<[], number>;
  readonly #totalChanges: SqliteStatement<[], number>;
  /** Settled rows read while the database stood at #settledAt; see `get`. */
  readonly #settled = new BoundedMap<string, ClaimState>(SETTLED_CACHE_ROWS, SETTLED_CACHE_BYTES);
  #settledAt: { dataVersion: number; totalChanges: number } | undefined;
  #closed = false;
  #queueStore: EmbeddedQueueStore | undefined;

  private constructor(db: SqliteDatabase, owners: OwnerRegistry, options: EmbeddedClaimStoreOptions) {
    this.#db = db;
    this.#owners = owners;
    this.#maxClaims = options.maxClaims;
    this.#writes = claimWrites(db, owners.id, options);
    this.#select = db.prepare(`SELECT ${CLAIM_COLUMNS} FROM claims WHERE scope = ? AND id = ?`);
    const placeholders = `(${CLAIM_COLUMNS.split(",").map(() => "?").join(", ")})`;
    this.#insert = db.prepare(`INSERT INTO claims (${CLAIM_COLUMNS}) VALUES ${placeholders}`);
    this.#insertMany = db.prepare(
      `INSERT INTO claims (${CLAIM_COLUMNS}) VALUES ${Array<string>(IMPORT_ROWS_PER_STATEMENT).fill(placeholders).join(", ")}`,
    );
    this.#count = db.prepare<[], number>("SELECT value FROM counters WHERE name = 'claims'").pluck();
    this.#addCount = db.prepare("UPDATE counters SET value = value + ? WHERE name = 'claims'");
    this.#tally = db.prepare(TALLY);
    // Row-value comparisons let SQLite seek the index to the cursor instead of scanning up to it.
    const page = (where: string, index: string): SqliteStatement<[string, string, number], ClaimRow> =>
      db.prepare(`SELECT ${CLAIM_COLUMNS} FROM claims ${index} WHERE ${where} (scope, id) > (?, ?) ORDER BY scope, id LIMIT ?`);
    this.#list = {
      all: page("", ""),
      open: page("result_hash IS NULL AND receipt IS NULL AND", "INDEXED BY claims_open"),
      recorded: page("result_hash IS NOT NULL AND receipt IS NULL AND", ""),
      reconciled: page("receipt IS NOT NULL AND", "INDEXED BY claims_reconciled"),
    };
    // Two index walks from the cursor, each stopped at `limit` keys, merged in key order: the
    // queue costs what its own rows cost however many recorded rows sit between them.
    this.#queue = db.prepare(QUEUE_PAGE);
    this.#recordedSince = db.prepare(
      `SELECT ${CLAIM_COLUMNS} FROM claims INDEXED BY claims_prunable WHERE result IS NOT NULL AND recorded_at >= ? ` +
        "AND (recorded_at, scope, id) > (?, ?, ?) ORDER BY recorded_at, scope, id LIMIT ?",
    );
    this.#pruneCandidates = db.prepare(
      "SELECT scope, id, recorded_at FROM claims INDEXED BY claims_prunable WHERE result IS NOT NULL AND recorded_at < ? " +
        "AND (recorded_at, scope, id) > (?, ?, ?) ORDER BY recorded_at, scope, id LIMIT " +
        PRUNE_CHUNK,
    );
    this.#dataVersion = db.prepare<[], number>("PRAGMA data_version").pluck();
    this.#totalChanges = db.prepare<[], number>("SELECT total_changes()").pluck();
  }

  /** Opens (creating and migrating when needed) the store and registers this process as an owner. */
  static open(options: EmbeddedClaimStoreOptions): EmbeddedClaimStore {
    const db = openPrivateDatabase(options.path, options.database);
    try {
      migrateSchema(db, CLAIM_SCHEMA_MIGRATIONS, "claim store");
      const owners = OwnerRegistry.open(options.ownersDir);
      try {
        return new EmbeddedClaimStore(db, owners, options);
      } catch (error) {
        owners.close();
        throw error;
      }
    } catch (error) {
      db.close();
      throw sqliteFailure(error, "open the claim store");
    }
  }

  get ownerId(): string {
    return this.#owners.id;
  }

  /** The queue kept in this store's database (queue-store.ts), writing through this store's writer. */
  queue(): EmbeddedQueueStore {
    this.#assertOpen();
    this.#queueStore ??= new EmbeddedQueueStore(this.#db, this.#writes, this.#owners, () => this.#assertOpen());
    return this.#queueStore;
  }

  /** Write transactions committed so far: concurrent writes share them (group commit). */
  get commits(): number {
    return this.#writes.commits;
  }

  /** Writes committed on this thread while the write worker was idle (claim-write-channel.ts). */
  get inlineWrites(): number {
    return this.#writes instanceof ClaimWriteChannel ? this.#writes.inlineWrites : 0;
  }

  /** True when writes run on the write worker. */
  get writesOffThread(): boolean {
    return this.#writes instanceof ClaimWriteChannel && this.#writes.offloaded;
  }

  /**
   * No read first, as on PostgreSQL: callers look an id up before they claim it (Invocations.open,
   * or the facade's replay path), so a replay never gets here. A key created meanwhile is answered
   * from the writer's read inside its transaction; the first creator wins.
   */
  async claim(claim: NewClaim, options: ClaimOptions = {}): Promise<ClaimAttempt> {
    this.#assertOpen();
    const writing = this.#writes.claim(claim, options.dequeued === true);
    // The write is queued (its commit may already be on the way): what a fresh claim needs next
    // can start beside it. A claim another caller won discards it (it is named by this attempt's
    // own run id, never the winner's).
    options.onWrite?.();
    const written = await writing;
    return { created: written.created, claim: this.#state(written.row) } as ClaimAttempt;
  }

  /**
   * The row as stored now. A settled row (recorded, reconciled or released: its liveness is not
   * probed) is answered from memory while the database is unchanged since it was read: SQLite's
   * data_version changes when any other connection (the write worker's, another process's, a
   * repair tool's, an attacker's edit through SQLite) commits, and total_changes counts every row
   * this connection writes. The two cost a tenth of reading and mapping the row again; any change
   * at all empties the memory.
   */
  async get(key: ClaimKey): Promise<ClaimState | undefined> {
    this.#assertOpen();
    let dataVersion: number;
    let totalChanges: number;
    try {
      dataVersion = this.#dataVersion.get() ?? -1;
      totalChanges = this.#totalChanges.get() ?? -1;
    } catch (error) {
      throw sqliteFailure(error, "read a claim");
    }
    const at = this.#settledAt;
    if (at === undefined || at.dataVersion !== dataVersion || at.totalChanges !== totalChanges) {
      this.#settled.clear();
      this.#settledAt = { dataVersion, totalChanges };
    }
    const cacheKey = `${key.scope.length}:${key.scope}:${key.id}`;
    const known = this.#settled.get(cacheKey);
    if (known !== undefined) return known;
    const state = this.#read(key.scope, key.id);
    if (state !== undefined && (state.result !== undefined || state.receipt !== undefined || state.released)) {
      this.#settled.set(cacheKey, state, (state.result?.payload?.length ?? 0) + (state.receipt?.length ?? 0));
    }
    return state;
  }

  async record(key: ClaimKey, runId: string, result: StoredResult, claimHash: Digest): Promise<boolean> {
    this.#assertOpen();
    return this.#writes.record(key, runId, result, claimHash);
  }

  async release(key: ClaimKey, runId: string): Promise<void> {
    this.#assertOpen();
    await this.#writes.release(key, runId);
  }

  async adopt(key: ClaimKey, runId: string, from: string): Promise<boolean> {
    this.#assertOpen();
    return this.#writes.adopt(key, runId, from);
  }

  async attachReceipt(key: ClaimKey, claimHash: Digest, receipt: string): Promise<boolean> {
    this.#assertOpen();
    return this.#writes.attachReceipt(key, claimHash, receipt);
  }

  async list(filter: ClaimListFilter, after: ClaimKey | undefined, limit: number): Promise<readonly ListedClaim[]> {
    this.#assertOpen();
    // "" sorts before every scope (scopes are never empty), so no cursor means "from the start".
    const scope = after?.scope ?? "";
    const id = after?.id ?? "";
    try {
      const rows = filter === "queue" ? this.#queue.all(scope, id, limit, scope, id, limit, limit) : this.#list[filter].all(scope, id, limit);
      return rows.map((row) => listedOf(row, (r) => this.#state(r)));
    } catch (error) {
      throw sqliteFailure(error, "list claims");
    }
  }

  async noteProblem(key: ClaimKey, code: string | undefined, at: number): Promise<void> {
    this.#assertOpen();
    await this.#writes.noteProblem(key, code, at);
  }

  async recordedSince(from: number, after: RecordedCursor | undefined, limit: number): Promise<RecordedPage> {
    this.#assertOpen();
    try {
      const rows = this.#recordedSince.all(from, after?.recorded_at ?? -1, after?.scope ?? "", after?.id ?? "", limit);
      return recordedPage(rows, limit, (row) => listedOf(row, (r) => this.#state(r)));
    } catch (error) {
      throw sqliteFailure(error, "list recently recorded claims");
    }
  }

  async pruneResults(olderThan: number, now: number): Promise<number> {
    this.#assertOpen();
    let pruned = 0;
    // Every recorded_at is at least 0 and "" sorts before every scope: no cursor is "from the start".
    let after: [number, string, string] = [-1, "", ""];
    for (;;) {
      const keys = this.#pruneCandidates.all(olderThan, after[0], after[1], after[2]);
      if (keys.length === 0) return pruned;
      pruned += await this.#writes.prune(keys, now);
      const last = keys[keys.length - 1]!;
      after = [last.recorded_at, last.scope, last.id];
      await yieldToLoop();
    }
  }

  /**
   * Bulk import of recorded claims, for seeding benchmarks and for migrating identities from
   * another node: rows are inserted as given (their claim hashes must already be right: every
   * read verifies them like any other row), in transactions of `batchSize` rows. Refuses a key
   * that exists (nothing of that transaction is written) and respects the capacity limit.
   */
  importRecorded(rows: Iterable<ClaimRecord>, options: { batchSize?: number } = {}): number {
    this.#assertOpen();
    const batchSize = options.batchSize ?? DEFAULT_IMPORT_BATCH;
    let imported = 0;
    let batch: ClaimRecord[] = [];
    const insertBatch = this.#db.transaction((records: readonly ClaimRecord[]) => {
      const count = this.#count.get() ?? 0;
      if (count + records.length > this.#maxClaims) {
        throw new LimitError("capacity-exhausted", "importing these claims would exceed the claim limit", {
          status: 507,
          details: { limit: this.#maxClaims },
        });
      }
      // Many rows per statement: the per-call cost of a statement is most of a small row's insert.
      let i = 0;
      for (; i + IMPORT_ROWS_PER_STATEMENT <= records.length; i += IMPORT_ROWS_PER_STATEMENT) {
        this.#insertMany.run(...records.slice(i, i + IMPORT_ROWS_PER_STATEMENT).flatMap(importValues));
      }
      for (; i < records.length; i++) this.#insert.run(...importValues(records[i]!));
      this.#addCount.run(records.length);
    });
    const flush = (): void => {
      // Key order turns random B-tree inserts into one ordered pass over the index per batch (a
      // performance hint only: UTF-16 order differs from SQLite's in rare cases, which is harmless).
      batch.sort((a, b) => (a.scope === b.scope ? compareText(a.id, b.id) : compareText(a.scope, b.scope)));
      try {
        insertBatch.immediate(batch);
      } catch (error) {
        throw sqliteFailure(error, "import claims");
      }
      imported += batch.length;
      batch = [];
    };
    const cacheSize = this.#db.pragma("cache_size", { simple: true });
    this.#db.pragma(`cache_size = -${IMPORT_CACHE_KIB}`);
    try {
      for (const row of rows) {
        batch.push(row);
        if (batch.length >= batchSize) flush();
      }
      if (batch.length > 0) flush();
    } finally {
      this.#db.pragma(`cache_size = ${Number(cacheSize)}`);
    }
    return imported;
  }

  async tally(): Promise<ClaimTally> {
    this.#assertOpen();
    try {
      const row = this.#tally.get()!;
      return {
        total: this.#count.get() ?? 0,
        open: row.open,
        reconciled: row.reconciled,
        problems: { recorded: row.recorded_problems, reconciled: row.reconciled_problems },
      };
    } catch (error) {
      throw sqliteFailure(error, "count claims");
    }
  }

  /** Identities held (the capacity counter). */
  count(): number {
    this.#assertOpen();
    return this.#count.get() ?? 0;
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    // Let writes already queued commit before the connections go away.
    await this.#writes.close();
    this.#closed = true;
    try {
      this.#db.close();
    } finally {
      this.#owners.close();
    }
  }

  #assertOpen(): void {
    if (this.#closed) throw new StorageError("claim-store-closed", "the claim store is closed");
  }

  #read(scope: string, id: string): ClaimState | undefined {
    let row: ClaimRow | undefined;
    try {
      row = this.#select.get(scope, id);
    } catch (error) {
      throw sqliteFailure(error, "read a claim");
    }
    return row === undefined ? undefined : this.#state(row);
  }

  #state(row: ClaimRow): ClaimState {
    const record = rowToRecord(row);
    const open = record.result === undefined && record.receipt === undefined && !record.released;
    return { ...record, owner_alive: open && this.#owners.isAlive(record.owner) };
  }
}

/** The store's writes: on the write worker when one starts, else on the store's own connection. */
function claimWrites(db: SqliteDatabase, owner: string, options: EmbeddedClaimStoreOptions): ClaimWrites {
  const inProcess = (): ClaimWrites => new ClaimWriter(db, owner, options.maxClaims);
  const spawn = "writeWorker" in options ? options.writeWorker : DEFAULT_WRITE_WORKER;
  if (spawn === undefined) return inProcess();
  let worker: Worker;
  try {
    worker = spawn();
  } catch {
    return inProcess();
  }
  const config = { path: options.path, owner, maxClaims: options.maxClaims, ...(options.database === undefined ? {} : { database: options.database }) };
  return new ClaimWriteChannel(worker, config, inProcess, options.inlineWhenIdle ?? true);
}

/** The INSERT values of an imported (recorded) claim, in CLAIM_COLUMNS order. */
function importValues(r: ClaimRecord): unknown[] {
  if (r.result === undefined) throw new ValidationError("import-not-recorded", "only recorded claims can be imported");
  return [
    r.scope, r.id, r.request_hash, r.agent, r.run_id, r.owner, r.created_at, r.released ? 1 : 0, r.claim_hash,
    r.result.hash, r.result.payload ?? null, r.result.recorded_at, r.result.pruned_at ?? null,
    r.result.journal.entries, r.result.journal.tail_hash, r.result.journal.bytes, r.result.journal.sha256,
    r.receipt ?? null,
  ];
}

function compareText(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
