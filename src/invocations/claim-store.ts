/**
 * The store interface the invocations domain needs from a backend. A backend stores claim rows
 * and answers owner liveness; every rule about what a row MEANS (outcomes, integrity, conflicts,
 * reconciliation) lives in the domain, so all backends behave the same.
 */
import type { Digest } from "../core/digest.js";
import type { WardenError } from "../core/errors.js";

export interface ClaimKey {
  readonly scope: string;
  readonly id: string;
}

/** Where a recorded run's journal stood when its result was recorded (checked on every replay). */
export interface JournalSeal {
  /** verified entries */
  readonly entries: number;
  /** lowercase hex sha256 of the last line, incl. its newline */
  readonly tail_hash: string;
  /** byte length of the whole journal */
  readonly bytes: number;
  /** sha256 of the whole journal file */
  readonly sha256: Digest;
}

export interface StoredResult {
  /** canonicalDigest of the payload */
  readonly hash: Digest;
  /** canonical JSON of the payload; absent once retention pruned it */
  readonly payload?: string;
  /** ms since the epoch */
  readonly recorded_at: number;
  /** ms since the epoch; set when retention dropped the payload */
  readonly pruned_at?: number;
  readonly journal: JournalSeal;
}

/** A claim row exactly as stored. */
/**
 * The owner of a parked run's claim on a store shared by live nodes (ClaimStore.park): not a
 * UUID, so no node incarnation ever holds its lock, and the claim reads as held by nobody alive.
 */
export const PARKED_OWNER = "parked";

export interface ClaimRecord extends ClaimKey {
  readonly request_hash: Digest;
  readonly agent: string;
  readonly run_id: string;
  /** the process incarnation (or node) that created the claim */
  readonly owner: string;
  /** ms since the epoch */
  readonly created_at: number;
  /** the owner gave the run up without a result */
  readonly released: boolean;
  /** digest over identity and outcome fields, as stored (see claim-hash.ts) */
  readonly claim_hash: Digest;
  readonly result?: StoredResult;
  /** canonical JSON of the signed reconciliation receipt */
  readonly receipt?: string;
}

/** A row plus its owner's liveness, answered by the backend when the row was read. */
export interface ClaimState extends ClaimRecord {
  /**
   * The owner is alive and still holds the run. Only meaningful for a claim with neither result
   * nor receipt; a backend may skip the liveness probe for the others and answer false.
   */
  readonly owner_alive: boolean;
}

/** Fields of a claim about to be created (its owner is the store's own owner id). */
export interface NewClaim extends ClaimKey {
  readonly request_hash: Digest;
  readonly agent: string;
  readonly run_id: string;
  readonly created_at: number;
  readonly claim_hash: Digest;
}

export type ClaimAttempt =
  | { readonly created: true; readonly claim: ClaimState }
  | { readonly created: false; readonly claim: ClaimState };

/**
 * A row `list` found that is not a well-formed claim (a column of the wrong type or out of range):
 * its key and the error reading it gave. A listing shows it rather than failing as a whole.
 */
export interface DamagedClaim extends ClaimKey {
  readonly damaged: WardenError;
}

export type ListedClaim = ClaimState | DamagedClaim;

export function isDamagedClaim(row: ListedClaim): row is DamagedClaim {
  return "damaged" in row;
}

/**
 * Which rows `list` scans: open = neither result nor receipt; queue = the open rows and the rows
 * with a recorded problem (`noteProblem`), both read from an index, merged in key order.
 */
export type ClaimListFilter = "all" | "open" | "queue" | "recorded" | "reconciled";

/** Where a `recordedSince` page ended: the last row's recorded_at and key. */
export interface RecordedCursor extends ClaimKey {
  readonly recorded_at: number;
}

export interface RecordedPage {
  readonly claims: readonly ListedClaim[];
  /** where the next page starts (also past a damaged row); undefined when this page was the last */
  readonly next: RecordedCursor | undefined;
}

/** Row counts by stored columns: open = neither result nor receipt. */
export interface ClaimTally {
  readonly total: number;
  readonly open: number;
  readonly reconciled: number;
  /** rows with a recorded problem that are not open, by what they are stored as */
  readonly problems: { readonly recorded: number; readonly reconciled: number };
}

export interface ClaimOptions {
  readonly onWrite?: () => void;
  /**
   * The claim starts a queued invocation (queue-store.ts): in the same transaction, the queue row
   * of the same key, which must be `leased` by this store's owner, becomes `started`. When it is
   * not (cancelled, or its lease went back to the queue), nothing is written and the claim is
   * refused with ConflictError `queue-lease-lost`: the run must not start.
   */
  readonly dequeued?: boolean;
}

export interface ClaimStore {
  /** The owner id this store writes on the claims it creates. */
  readonly ownerId: string;

  /**
   * Creates the claim when `(scope, id)` has none, durably (fsynced) before resolving (G1), and
   * refuses it with LimitError `capacity-exhausted` when the store is full (nothing deleted).
   * Otherwise returns the existing row and writes nothing. Concurrent calls for one key resolve
   * with exactly one `created: true`.
   *
   * `options.onWrite`, when given, is called (at most once, synchronously) as the store starts
   * writing a claim for a key its caller found no row for, so work only a fresh claim needs (its
   * journal's file) can proceed while the commit is on its way to disk. It is a hint: a store may
   * never call it, and a call does not mean the claim will be created (a concurrent caller may win).
   */
  claim(claim: NewClaim, options?: ClaimOptions): Promise<ClaimAttempt>;

  /** The row for a key, without writing or taking any lock a live owner could notice. */
  get(key: ClaimKey): Promise<ClaimState | undefined>;

  /**
   * Stores a result on an open claim this store's owner holds for `runId`. Resolves false (and
   * writes nothing) when the claim is not in that state any more.
   */
  record(key: ClaimKey, runId: string, result: StoredResult, claimHash: Digest): Promise<boolean>;

  /** Marks an open claim of this owner as given up, so it reads `unresolved` while we live on. */
  release(key: ClaimKey, runId: string): Promise<void>;

  /**
   * Optional: makes this store's owner the holder of an open, unreleased claim `from` held (a
   * parked run taken up by the node that answers its approval, DESIGN.md "Governed tool calls").
   * False (nothing written) when the row is not in that state. A store without it cannot park runs.
   */
  adopt?(key: ClaimKey, runId: string, from: string): Promise<boolean>;

  /**
   * Optional, for stores shared by live nodes (PostgreSQL): lets go of an open, unreleased claim of
   * this owner whose run has just parked: its owner becomes PARKED_OWNER, an id no node's lock
   * holds. Every node that answers the approval (the parker too) then adopts it from there, so of
   * nodes answering at once exactly one takes the run up. False (nothing written) when the row is
   * not in that state. A store without it keeps the claim with the parker (one node per store).
   */
  park?(key: ClaimKey, runId: string): Promise<boolean>;

  /** Attaches a receipt to a claim that has none and still has `claimHash`; false otherwise. */
  attachReceipt(key: ClaimKey, claimHash: Digest, receipt: string): Promise<boolean>;

  /** Rows after `after` in (scope, id) order; a malformed row is listed as a DamagedClaim. */
  list(filter: ClaimListFilter, after: ClaimKey | undefined, limit: number): Promise<readonly ListedClaim[]>;

  /**
   * Rows whose result (payload not pruned) was recorded at or after `from` (ms), after `after`,
   * in (recorded_at, scope, id) order, found by an index on recorded_at: the transparency log's
   * catch-up reads the recent ones without reading all claims.
   */
  recordedSince(from: number, after: RecordedCursor | undefined, limit: number): Promise<RecordedPage>;

  /** How many rows there are, and how many of them are open / carry a receipt, by their columns alone (no row checks). */
  tally(): Promise<ClaimTally>;

  /**
   * Records (`code`) or clears (undefined) the problem a check found on a row, durably, so the
   * row is listed by the `queue` filter until it is cleared. Attaching a receipt clears it too.
   */
  noteProblem(key: ClaimKey, code: string | undefined, at: number): Promise<void>;

  /** Drops payloads of results recorded before `olderThan` (ms); keeps everything else (G4). */
  pruneResults(olderThan: number, now: number): Promise<number>;

  close(): Promise<void>;
}
