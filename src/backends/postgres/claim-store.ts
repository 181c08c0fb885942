/**
 * The postgres ClaimStore. The (scope, id) primary key makes a claim atomic across every node on
 * the database: a batch of new claims is one `INSERT … ON CONFLICT DO NOTHING` statement, so of
 * any number of concurrent callers on any number of nodes exactly one row is created and
 * everyone else reads it. The statement creates rows only while this incarnation's owner lock is
 * held (checked in the same statement), and counts them against the capacity in the same
 * statement, which aborts whole when the count would pass the limit.
 *
 * Reads answer owner liveness in the same query (warden_owner_alive, a read of pg_locks), and
 * only for claims that are still open: a replay of a recorded claim never looks at locks.
 */
import type { QueueHost } from "../../invocations/queue-store.js";
import { IntegrityError, LimitError, StorageError, isWardenError } from "../../core/errors.js";
import { EMPTY_SHA256, type Digest } from "../../core/digest.js";
import type {
  ClaimAttempt,
  ClaimKey,
  ClaimListFilter,
  ClaimOptions,
  ClaimState,
  ClaimStore,
  ClaimTally,
  ListedClaim,
  RecordedCursor,
  RecordedPage,
  NewClaim,
  StoredResult,
} from "../../invocations/claim-store.js";
import { PARKED_OWNER } from "../../invocations/claim-store.js";
import { CLAIM_COLUMNS, listedOf, recordedPage, rowToRecord, type ClaimRow } from "../shared/claim-rows.js";
import { Batcher, type Outcome } from "./batcher.js";
import { pgFailure, query, ROW_CHECKED_TYPES, sqlState, transaction, type PgPool, type PgQueryable } from "./connection.js";
import { PostgresQueueStore } from "./queue-store.js";
import { leaseLost } from "../shared/queue-rows.js";
import type { JournalPrefetch } from "./journal-store.js";
import type { OwnerSession } from "./owner.js";

export interface PostgresClaimStoreOptions {
  readonly pool: PgPool;
  readonly owner: OwnerSession;
  /** identities the database may hold (Limits.maxClaims), across all nodes */
  readonly maxClaims: number;
  /** where the journals read together with recorded claims are handed to the journal store */
  readonly prefetch: JournalPrefetch;
}

const PRUNE_CHUNK = 1000;
/** Statements in flight at once, per kind (claims, records, reads); one key is never in two. */
const WRITES_IN_FLIGHT = 3;
const READS_IN_FLIGHT = 3;
/**
 * Keys per read statement. Reads are sent as soon as their callers have queued them (Batcher
 * drainOn "tick") and capped here, so many concurrent replays split into statements that take
 * turns (pipelined) rather than all riding one, during which the database or this process idles.
 * A statement's own cost (a round trip, a result description) is small against 32 rows.
 */
const READ_BATCH_ITEMS = 32;
const CAPACITY_SQLSTATE = "WCAP1";

/** The embedded row shape, so both backends share one row-to-record mapping. */
const COLUMNS = CLAIM_COLUMNS.split(", ")
  .map((c) => (c === "released" ? "released::int AS released" : c))
  .join(", ");
const SELECT_STATE =
  `SELECT ${COLUMNS}, CASE WHEN result_hash IS NULL AND receipt IS NULL AND NOT released ` +
  "THEN warden_owner_alive(owner) ELSE false END AS owner_alive FROM warden_claims";

/**
 * Claims by key, with owner liveness for open ones and, for recorded ones, the digest of their
 * journal as far as the seal reaches (its lines, plus one to notice growth): its length, sha256
 * and last line, computed by the database, so a replay reads row and journal in this one
 * statement and the journal's bytes stay where they are (the digest is handed on through the
 * prefetch). The sha256 is the same check as hashing the bytes here: any changed byte changes it.
 * The lines are bounded by count (the seal's entries, one line each), which the primary key's
 * order answers directly; bounding them by bytes took a running sum over every line first.
 *
 * The journal is found by a per-row index probe (a LATERAL with LIMIT cannot be flattened): as an
 * EXISTS in the select list the planner may hash the whole journals table on every statement. The
 * last line travels as base64 text: it may be any bytes, and a third smaller than bytea's hex.
 */
const READ_BATCH = `
  SELECT r.i, ${COLUMNS.split(", ")
    .map((c) => `c.${c}`)
    .join(", ")},
    CASE WHEN c.result_hash IS NULL AND c.receipt IS NULL AND NOT c.released THEN warden_owner_alive(c.owner) ELSE false END AS owner_alive,
    jt.present IS NOT NULL AS journal_present, encode(sha256(jt.journal), 'hex') AS stored_sha256,
    encode(jt.last_line, 'base64') AS stored_tail, jt.journal_end
  FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS r(scope, id, i)
  JOIN warden_claims c ON c.scope = r.scope AND c.id = r.id
  LEFT JOIN LATERAL (
    SELECT true AS present, t.journal, t.journal_end, t.last_line FROM warden_journals j
    CROSS JOIN LATERAL (
      SELECT string_agg(s.line, ''::bytea ORDER BY s.line_no) AS journal, sum(octet_length(s.line)) AS journal_end,
        (array_agg(s.line ORDER BY s.line_no DESC))[1] AS last_line
      FROM (
        SELECT l.line_no, l.line FROM warden_journal_lines l WHERE l.run_id = j.run_id ORDER BY l.line_no LIMIT c.journal_entries + 1
      ) s
    ) t
    WHERE j.run_id = c.run_id AND c.result_hash IS NOT NULL
    LIMIT 1
  ) jt ON true`;

const INSERT_BATCH = `
  WITH input AS (
    SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::bigint[], $7::text[])
      AS t(scope, id, request_hash, agent, run_id, created_at, claim_hash)
  ), owner AS (
    SELECT warden_owner_alive($8) AS ok
  ), ins AS (
    INSERT INTO warden_claims (scope, id, request_hash, agent, run_id, owner, created_at, claim_hash)
    SELECT scope, id, request_hash, agent, run_id, $8, created_at, claim_hash FROM input
    WHERE (SELECT ok FROM owner)
    ON CONFLICT (scope, id) DO NOTHING
    RETURNING scope, id
  ), added AS (
    SELECT count(*) AS n FROM ins
  ), counted AS (
    -- Only when rows were created: a batch of existing keys writes nothing at all.
    UPDATE warden_counters SET value = value + added.n FROM added WHERE name = 'claims' AND added.n > 0 RETURNING value
  )
  SELECT (SELECT ok FROM owner) AS owner_ok,
         (SELECT warden_check_capacity(value, $9) FROM counted) AS within,
         COALESCE((SELECT json_agg(json_build_array(scope, id)) FROM ins), '[]'::json) AS inserted`;

const RECORD_BATCH = `
  WITH input AS (
    SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::bigint[], $7::bigint[],
                         $8::text[], $9::bigint[], $10::text[], $11::text[])
      AS t(scope, id, run_id, result_hash, result, recorded_at, journal_entries, journal_tail, journal_bytes,
           journal_sha256, claim_hash)
  )
  UPDATE warden_claims c SET result_hash = i.result_hash, result = i.result, recorded_at = i.recorded_at,
    journal_entries = i.journal_entries, journal_tail = i.journal_tail, journal_bytes = i.journal_bytes,
    journal_sha256 = i.journal_sha256, claim_hash = i.claim_hash
  FROM input i
  WHERE c.scope = i.scope AND c.id = i.id AND c.run_id = i.run_id AND c.owner = $12 AND NOT c.released
    AND c.result_hash IS NULL AND c.receipt IS NULL AND (SELECT warden_owner_alive($12))
  RETURNING c.scope, c.id`;

/**
 * A page of the queue (see the embedded QUEUE_PAGE): two index walks from the cursor, each
 * stopped at the page's size, merged in key order, then each key's row by its primary key (a
 * LATERAL with LIMIT is never flattened into a join the planner could turn into a scan).
 */
const QUEUE_PAGE =
  "SELECT c.* FROM (SELECT scope, id FROM (SELECT scope, id FROM warden_claims WHERE result_hash IS NULL AND receipt IS NULL " +
  "AND (scope, id) > ($1, $2) ORDER BY scope, id LIMIT $3) o " +
  "UNION SELECT scope, id FROM (SELECT scope, id FROM warden_claim_problems WHERE (scope, id) > ($1, $2) ORDER BY scope, id LIMIT $3) p) k " +
  `CROSS JOIN LATERAL (${SELECT_STATE} WHERE scope = k.scope AND id = k.id LIMIT 1) c ORDER BY k.scope, k.id LIMIT $3`;

const LIST_FILTERS: Readonly<Record<Exclude<ClaimListFilter, "queue">, string>> = {
  all: "",
  open: "result_hash IS NULL AND receipt IS NULL AND",
  recorded: "result_hash IS NOT NULL AND receipt IS NULL AND",
  reconciled: "receipt IS NOT NULL AND",
};

interface RecordItem {
  readonly key: ClaimKey;
  readonly runId: string;
  readonly result: StoredResult;
  readonly claimHash: Digest;
}

type StateRow = ClaimRow & { owner_alive: boolean };
type ReadRow = StateRow & {
  i: number;
  journal_present: boolean;
  stored_sha256: string | null;
  stored_tail: string | null;
  journal_end: number | null;
};

export class PostgresClaimStore implements ClaimStore, QueueHost {
  readonly #pool: PgPool;
  readonly #owner: OwnerSession;
  readonly #maxClaims: number;
  readonly #prefetch: JournalPrefetch;
  readonly #reads: Batcher<ClaimKey, ClaimState | undefined>;
  readonly #claims: Batcher<NewClaim, ClaimAttempt>;
  readonly #records: Batcher<RecordItem, boolean>;
  #closed = false;
  #queueStore: PostgresQueueStore | undefined;

  constructor(options: PostgresClaimStoreOptions) {
    this.#pool = options.pool;
    this.#owner = options.owner;
    this.#maxClaims = options.maxClaims;
    this.#prefetch = options.prefetch;
    this.#reads = new Batcher<ClaimKey, ClaimState | undefined>((keys) => this.#readBatch(keys), {
      maxInFlight: READS_IN_FLIGHT,
      maxItems: READ_BATCH_ITEMS,
      drainOn: "tick",
      keyOf,
    });
    this.#claims = new Batcher<NewClaim, ClaimAttempt>((items) => this.#claimBatch(items), { maxInFlight: WRITES_IN_FLIGHT, keyOf });
    this.#records = new Batcher<RecordItem, boolean>((items) => this.#recordBatch(items), { maxInFlight: WRITES_IN_FLIGHT, keyOf: (r) => keyOf(r.key) });
  }

  get ownerId(): string {
    return this.#owner.id;
  }

  /** Write statements sent so far: concurrent writes share them (group commit). */
  get commits(): number {
    return this.#claims.batches + this.#records.batches;
  }

  /** Read statements sent so far: concurrent reads share them. */
  get reads(): number {
    return this.#reads.batches;
  }

  /**
   * No read first: callers look an id up before they claim it (a replay never gets here), so the
   * insert is the first statement. For a key that exists it inserts nothing and writes nothing
   * (ON CONFLICT DO NOTHING, no counter update); the row is then read and answered.
   */
  async claim(claim: NewClaim, options: ClaimOptions = {}): Promise<ClaimAttempt> {
    this.#assertOpen();
    this.#owner.assertHealthy("create a claim");
    if (options.dequeued === true) return this.#claimDequeued(claim);
    return this.#claims.submit(claim);
  }

  /**
   * A queued run's claim (ClaimOptions.dequeued): one transaction moves its queue row from
   * `leased` (by this owner) to `started` — the row's lock orders it against a cancel — and
   * inserts the claim; a row no longer leased here writes nothing.
   */
  async #claimDequeued(claim: NewClaim): Promise<ClaimAttempt> {
    const owner = this.#owner.id;
    const inserted = await transaction(this.#pool, "start a queued invocation", async (client) => {
      const moved = await client.query({
        name: "warden-queue-start",
        text: "UPDATE warden_queue SET state = 'started', started_at = $3 WHERE scope = $1 AND id = $2 AND state = 'leased' AND lease_owner = $4",
        values: [claim.scope, claim.id, claim.created_at, owner],
      });
      if (moved.rowCount !== 1) {
        // A claim made directly for the id meanwhile: the row follows it (it is started).
        const raced = await client.query({
          text: "UPDATE warden_queue SET state = 'started', started_at = $3 WHERE scope = $1 AND id = $2 AND state IN ('queued', 'leased') " +
            "AND EXISTS (SELECT 1 FROM warden_claims c WHERE c.scope = $1 AND c.id = $2)",
          values: [claim.scope, claim.id, claim.created_at],
        });
        if (raced.rowCount !== 1) throw leaseLost(claim);
        return new Set<string>();
      }
      return this.#insert([claim], client);
    });
    const [answer] = await this.#answer([claim], inserted);
    if (answer === undefined || !answer.ok) throw answer?.error ?? new IntegrityError("claim-vanished", "a queued run's claim was neither created nor found", { status: 500 });
    return answer.value;
  }

  /** The queue kept in this store's database (queue-store.ts). */
  queue(): PostgresQueueStore {
    this.#assertOpen();
    this.#queueStore ??= new PostgresQueueStore(this.#pool, this.#owner, () => this.#assertOpen());
    return this.#queueStore;
  }

  async get(key: ClaimKey): Promise<ClaimState | undefined> {
    this.#assertOpen();
    return this.#reads.submit(key);
  }

  async record(key: ClaimKey, runId: string, result: StoredResult, claimHash: Digest): Promise<boolean> {
    this.#assertOpen();
    this.#owner.assertHealthy("record a result");
    if (await this.#records.submit({ key, runId, result, claimHash })) return true;
    // Not recorded. If it is because this node lost its owner lock meanwhile, say so: the run was
    // fine, the database connection was not (its claim now reads unresolved everywhere).
    const row = await this.get(key);
    if (row !== undefined && row.run_id === runId && this.#owner.ids.includes(row.owner) && !row.owner_alive && !row.released) {
      throw new StorageError("storage-unavailable", `the owner lock was lost while run ${runId} was going; its claim reads unresolved`);
    }
    return false;
  }

  async release(key: ClaimKey, runId: string): Promise<void> {
    this.#assertOpen();
    // Any incarnation of this process may give its runs up: marking a claim released only makes
    // explicit what a lost lock already means.
    await query(this.#pool, "release a claim", {
      name: "warden-claim-release",
      text:
        "UPDATE warden_claims SET released = true WHERE scope = $1 AND id = $2 AND run_id = $3 " +
        "AND owner = ANY($4::text[]) AND result_hash IS NULL",
      values: [key.scope, key.id, runId, [...this.#owner.ids]],
    });
  }

  /**
   * Makes this node the holder of a parked run's open, unreleased claim held by `from` (the
   * embedded semantics). One statement: of any number of nodes adopting the same row at once, the
   * first UPDATE to commit changes the owner and every other re-reads the row under its lock, finds
   * another owner and writes nothing. Only while this incarnation's owner lock is held.
   */
  async adopt(key: ClaimKey, runId: string, from: string): Promise<boolean> {
    this.#assertOpen();
    this.#owner.assertHealthy("take up a parked run");
    const result = await query(this.#pool, "take up a claim", {
      name: "warden-claim-adopt",
      text:
        "UPDATE warden_claims SET owner = $1 WHERE scope = $2 AND id = $3 AND run_id = $4 AND owner = $5 AND NOT released " +
        "AND result_hash IS NULL AND receipt IS NULL AND warden_owner_alive($1)",
      values: [this.#owner.id, key.scope, key.id, runId, from],
    });
    return result.rowCount === 1;
  }

  /**
   * Lets go of a run this node parked (ClaimStore.park): its owner becomes PARKED_OWNER, so that
   * whichever node answers the approval — this one too — adopts it from there and exactly one does.
   */
  async park(key: ClaimKey, runId: string): Promise<boolean> {
    this.#assertOpen();
    const result = await query(this.#pool, "park a claim", {
      name: "warden-claim-park",
      text:
        "UPDATE warden_claims SET owner = $1 WHERE scope = $2 AND id = $3 AND run_id = $4 AND owner = ANY($5::text[]) AND NOT released " +
        "AND result_hash IS NULL AND receipt IS NULL",
      values: [PARKED_OWNER, key.scope, key.id, runId, [...this.#owner.ids]],
    });
    return result.rowCount === 1;
  }

  async attachReceipt(key: ClaimKey, claimHash: Digest, receipt: string): Promise<boolean> {
    this.#assertOpen();
    const result = await query(this.#pool, "attach a receipt", {
      name: "warden-claim-receipt",
      // Reviewed and closed: whatever problem put it in the queue is the receipt's to tell now.
      text:
        "WITH attached AS (UPDATE warden_claims SET receipt = $1 WHERE scope = $2 AND id = $3 AND receipt IS NULL AND claim_hash = $4 " +
        "RETURNING scope, id), cleared AS (DELETE FROM warden_claim_problems p USING attached a WHERE p.scope = a.scope AND p.id = a.id) " +
        "SELECT count(*)::int AS n FROM attached",
      values: [receipt, key.scope, key.id, claimHash],
    });
    return (result.rows[0] as { n: number } | undefined)?.n === 1;
  }

  async noteProblem(key: ClaimKey, code: string | undefined, at: number): Promise<void> {
    this.#assertOpen();
    // The first finding's time stays: the row has been in the queue since then.
    await query(this.#pool, "record a claim's problem", {
      name: code === undefined ? "warden-claim-problem-clear" : "warden-claim-problem-note",
      text:
        code === undefined
          ? "DELETE FROM warden_claim_problems WHERE scope = $1 AND id = $2"
          : "INSERT INTO warden_claim_problems (scope, id, code, found_at) VALUES ($1, $2, $3, $4) " +
            "ON CONFLICT (scope, id) DO UPDATE SET code = excluded.code",
      values: code === undefined ? [key.scope, key.id] : [key.scope, key.id, code, at],
    });
  }

  async list(filter: ClaimListFilter, after: ClaimKey | undefined, limit: number): Promise<readonly ListedClaim[]> {
    this.#assertOpen();
    // "" sorts before every scope (scopes are never empty), so no cursor means "from the start".
    const result = await query<StateRow>(this.#pool, "list claims", {
      name: `warden-claim-list-${filter}`,
      text: filter === "queue" ? QUEUE_PAGE : `${SELECT_STATE} WHERE ${LIST_FILTERS[filter]} (scope, id) > ($1, $2) ORDER BY scope, id LIMIT $3`,
      values: [after?.scope ?? "", after?.id ?? "", limit],
      types: ROW_CHECKED_TYPES,
    });
    return result.rows.map((row) => listedOf(row, stateOf));
  }

  async recordedSince(from: number, after: RecordedCursor | undefined, limit: number): Promise<RecordedPage> {
    this.#assertOpen();
    // warden_claims_prunable (recorded_at) WHERE result IS NOT NULL finds them.
    const result = await query<StateRow>(this.#pool, "list recently recorded claims", {
      name: "warden-claim-recorded-since",
      text: `${SELECT_STATE} WHERE result IS NOT NULL AND recorded_at >= $1 AND (recorded_at, scope, id) > ($2, $3, $4) ORDER BY recorded_at, scope, id LIMIT $5`,
      values: [from, after?.recorded_at ?? -1, after?.scope ?? "", after?.id ?? "", limit],
      types: ROW_CHECKED_TYPES,
    });
    return recordedPage(result.rows, limit, (row) => listedOf(row, stateOf));
  }

  async pruneResults(olderThan: number, now: number): Promise<number> {
    this.#assertOpen();
    let pruned = 0;
    for (;;) {
      const result = await query(this.#pool, "prune results", {
        name: "warden-claim-prune",
        text:
          "UPDATE warden_claims SET result = NULL, pruned_at = $2 WHERE (scope, id) IN (" +
          "SELECT scope, id FROM warden_claims WHERE result IS NOT NULL AND recorded_at < $1 " +
          `ORDER BY recorded_at LIMIT ${PRUNE_CHUNK} FOR UPDATE SKIP LOCKED)`,
        values: [olderThan, now],
      });
      const n = result.rowCount ?? 0;
      pruned += n;
      if (n === 0) return pruned;
    }
  }

  async tally(): Promise<ClaimTally> {
    this.#assertOpen();
    type Row = { total: number; open: number; reconciled: number; recorded_problems: number; reconciled_problems: number };
    const result = await query<Row>(this.#pool, "count claims", {
      text:
        "SELECT (SELECT value FROM warden_counters WHERE name = 'claims')::float8 AS total, " +
        "count(*) FILTER (WHERE result_hash IS NULL AND receipt IS NULL)::float8 AS open, " +
        "count(*) FILTER (WHERE receipt IS NOT NULL)::float8 AS reconciled, " +
        // Problems of open rows are counted as open already. Each problem row probes its claim (a
        // LATERAL with LIMIT): a join could be planned as a scan of every claim.
        "(SELECT count(*) FROM warden_claim_problems p CROSS JOIN LATERAL (SELECT result_hash, receipt FROM warden_claims c " +
        "WHERE c.scope = p.scope AND c.id = p.id LIMIT 1) c WHERE c.result_hash IS NOT NULL AND c.receipt IS NULL)::float8 AS recorded_problems, " +
        "(SELECT count(*) FROM warden_claim_problems p CROSS JOIN LATERAL (SELECT receipt FROM warden_claims c " +
        "WHERE c.scope = p.scope AND c.id = p.id LIMIT 1) c WHERE c.receipt IS NOT NULL)::float8 AS reconciled_problems " +
        "FROM warden_claims WHERE result_hash IS NULL OR receipt IS NOT NULL",
    });
    const row = result.rows[0];
    return {
      total: Number(row?.total ?? 0),
      open: Number(row?.open ?? 0),
      reconciled: Number(row?.reconciled ?? 0),
      problems: { recorded: Number(row?.recorded_problems ?? 0), reconciled: Number(row?.reconciled_problems ?? 0) },
    };
  }

  /** Identities held by the whole database (the capacity counter). */
  async count(): Promise<number> {
    const result = await query<{ value: number }>(this.#pool, "count claims", {
      text: "SELECT value FROM warden_counters WHERE name = 'claims'",
    });
    return result.rows[0]?.value ?? 0;
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    // Writes already queued commit before the pool goes away.
    await Promise.all([this.#claims.settled(), this.#records.settled()]);
    this.#closed = true;
  }

  #assertOpen(): void {
    if (this.#closed) throw new StorageError("claim-store-closed", "the claim store is closed");
  }

  async #claimBatch(items: readonly NewClaim[]): Promise<Outcome<ClaimAttempt>[]> {
    // One row per key; later items of a key read the row the first one created.
    const unique = new Map<string, NewClaim>();
    for (const c of items) if (!unique.has(keyOf(c))) unique.set(keyOf(c), c);
    const rows = [...unique.values()];
    let inserted: Set<string>;
    try {
      inserted = await this.#insert(rows);
    } catch (error) {
      if (sqlState(error) !== CAPACITY_SQLSTATE || rows.length === 1) throw capacityOr(error, this.#maxClaims);
      // The batch would pass the limit: claims one by one, so the ones that still fit are created.
      return this.#oneByOne(items);
    }
    return this.#answer(items, inserted);
  }

  async #oneByOne(items: readonly NewClaim[]): Promise<Outcome<ClaimAttempt>[]> {
    const outcomes: Outcome<ClaimAttempt>[] = [];
    for (const item of items) {
      try {
        const inserted = await this.#insert([item]);
        outcomes.push(...(await this.#answer([item], inserted)));
      } catch (error) {
        outcomes.push({ ok: false, error: capacityOr(error, this.#maxClaims) });
      }
    }
    return outcomes;
  }

  /** Runs the insert statement; the keys it created. */
  async #insert(rows: readonly NewClaim[], db: PgQueryable = this.#pool): Promise<Set<string>> {
    const owner = this.#owner.id;
    let result;
    try {
      result = await db.query<{ owner_ok: boolean; inserted: [string, string][] }>({
        name: "warden-claim-insert",
        text: INSERT_BATCH,
        values: [
          rows.map((r) => r.scope),
          rows.map((r) => r.id),
          rows.map((r) => r.request_hash),
          rows.map((r) => r.agent),
          rows.map((r) => r.run_id),
          rows.map((r) => r.created_at),
          rows.map((r) => r.claim_hash),
          owner,
          this.#maxClaims,
        ],
      });
    } catch (error) {
      if (sqlState(error) === CAPACITY_SQLSTATE) throw error;
      throw pgFailure(error, "create claims");
    }
    const answer = result.rows[0];
    if (answer?.owner_ok !== true) {
      throw new StorageError("storage-unavailable", "this node's owner lock is gone; no claim was created (the node reconnects as a new owner)");
    }
    return new Set(answer.inserted.map(([scope, id]) => keyOf({ scope, id })));
  }

  async #answer(items: readonly NewClaim[], inserted: Set<string>): Promise<Outcome<ClaimAttempt>[]> {
    const owner = this.#owner.id;
    const created = new Map<string, ClaimState>();
    const answered = new Set<string>();
    const existing = new Map<string, ClaimState>();
    const others = items.filter((c) => !inserted.has(keyOf(c)));
    if (others.length > 0) {
      for (const outcome of await this.#readBatch(others)) {
        if (outcome.ok && outcome.value !== undefined) existing.set(keyOf(outcome.value), outcome.value);
      }
    }
    return items.map((c): Outcome<ClaimAttempt> => {
      const key = keyOf(c);
      if (inserted.has(key)) {
        let state = created.get(key);
        if (state === undefined) {
          state = { ...c, owner, released: false, owner_alive: true };
          created.set(key, state);
        }
        if (answered.has(key)) return { ok: true, value: { created: false, claim: state } };
        answered.add(key);
        return { ok: true, value: { created: true, claim: state } };
      }
      const state = existing.get(key);
      if (state === undefined) {
        return { ok: false, error: new IntegrityError("claim-vanished", `claim ${key} was neither created nor found`, { status: 500 }) };
      }
      return { ok: true, value: { created: false, claim: state } };
    });
  }

  async #readBatch(keys: readonly ClaimKey[]): Promise<Outcome<ClaimState | undefined>[]> {
    const result = await query<ReadRow>(this.#pool, "read claims", {
      name: "warden-claim-read",
      text: READ_BATCH,
      values: [keys.map((k) => k.scope), keys.map((k) => k.id)],
      types: ROW_CHECKED_TYPES,
    });
    const states: Outcome<ClaimState | undefined>[] = keys.map(() => ({ ok: true, value: undefined }));
    for (const row of result.rows) {
      let state: ClaimState;
      try {
        state = stateOf(row);
      } catch (error) {
        // A damaged row fails its own caller only, not the others read in the same statement.
        states[row.i - 1] = { ok: false, error };
        continue;
      }
      states[row.i - 1] = { ok: true, value: state };
      if (state.result !== undefined) {
        this.#prefetch.offer(
          state.run_id,
          state.result.journal.bytes,
          row.journal_present
            ? {
                bytes: row.journal_end ?? 0,
                sha256: row.stored_sha256 === null ? EMPTY_SHA256 : `sha256:${row.stored_sha256}`,
                tail: row.stored_tail === null ? Buffer.alloc(0) : Buffer.from(row.stored_tail, "base64"),
              }
            : null,
        );
      }
    }
    return states;
  }

  async #recordBatch(items: readonly RecordItem[]): Promise<Outcome<boolean>[]> {
    const result = await query<{ scope: string; id: string }>(this.#pool, "record results", {
      name: "warden-claim-record",
      text: RECORD_BATCH,
      values: [
        items.map((r) => r.key.scope),
        items.map((r) => r.key.id),
        items.map((r) => r.runId),
        items.map((r) => r.result.hash),
        items.map((r) => r.result.payload ?? null),
        items.map((r) => r.result.recorded_at),
        items.map((r) => r.result.journal.entries),
        items.map((r) => r.result.journal.tail_hash),
        items.map((r) => r.result.journal.bytes),
        items.map((r) => r.result.journal.sha256),
        items.map((r) => r.claimHash),
        this.#owner.id,
      ],
    });
    const updated = new Set(result.rows.map(keyOf));
    return items.map((r) => ({ ok: true, value: updated.has(keyOf(r.key)) }));
  }
}

function keyOf(key: ClaimKey): string {
  return `${key.scope}\n${key.id}`;
}

function stateOf(row: StateRow): ClaimState {
  // The record is fresh and ours: extended in place rather than copied (this runs per replay).
  return Object.assign(rowToRecord(row), { owner_alive: row.owner_alive === true });
}

function capacityOr(error: unknown, limit: number): unknown {
  if (isWardenError(error) || sqlState(error) !== CAPACITY_SQLSTATE) return error;
  return new LimitError("capacity-exhausted", `the claim store holds its limit of ${limit} identities; no new claim was created and nothing was deleted`, {
    status: 507,
    details: { limit },
  });
}
