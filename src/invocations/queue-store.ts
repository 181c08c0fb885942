/**
 * The store interface of queued invocations (DESIGN.md "Queued invocations"): rows waiting for a
 * node with room, kept in the claims store so that one transaction can move a row to `started`
 * and create its claim (ClaimOptions.dequeued). A backend stores rows and answers owner liveness;
 * which rows a node may take, and in which order, is decided here (queue-order.ts), the same for
 * every backend.
 */
import type { Digest } from "../core/digest.js";
import type { ClaimKey } from "./claim-store.js";

/**
 * `queued`: waiting; `leased`: a node took it and is starting it; `started`: its claim exists
 * (from then on the claim says what it is); `cancelled`, `expired`: known outcomes, never run;
 * `refused`: the node that took it could not start it for a reason a retry would not change (its
 * `error`), never run.
 */
export type QueueState = "queued" | "leased" | "started" | "cancelled" | "expired" | "refused";
export const QUEUE_STATES: readonly QueueState[] = ["queued", "leased", "started", "cancelled", "expired", "refused"];

/** Labels a row requires of the node that runs it, and labels a node has: name → value. */
export type Labels = Readonly<Record<string, string>>;

/** A queued invocation as it is submitted. */
export interface NewQueued extends ClaimKey {
  /** canonical JSON of the parsed request (what the claim's request hash is computed over) */
  readonly request: string;
  readonly request_hash: Digest;
  /** who submitted it (the scope: `api:<caller>` over HTTP); fairness is across principals */
  readonly principal: string;
  readonly workspace: string;
  readonly provider: string;
  /** higher runs first */
  readonly priority: number;
  readonly labels: Labels;
  /** ms since the epoch */
  readonly enqueued_at: number;
  /** ms since the epoch: still queued then, it expires */
  readonly deadline: number;
}

/** A row as stored. */
export interface QueuedRow extends NewQueued {
  readonly state: QueueState;
  /** the owner (node incarnation) holding the lease, from `leased` on */
  readonly lease_owner?: string;
  readonly leased_at?: number;
  readonly started_at?: number;
  /** when it became cancelled, expired or refused, or its run ended (counted running until then) */
  readonly ended_at?: number;
  /** who cancelled it (a queued row), or asked its run to stop (a started one) */
  readonly cancelled_by?: string;
  /** a refused row's error code */
  readonly error?: string;
}

/** What a node asks of `lease`: how many rows it can start now, and what it offers them. */
export interface LeaseRequest {
  /** rows to lease at most (the node's free slots) */
  readonly max: number;
  /** the node's labels */
  readonly labels: Labels;
  /** providers this node runs (a row of another provider is not eligible here) */
  readonly providers: readonly string[];
  /** ms since the epoch */
  readonly now: number;
  readonly limits: QueueLimits;
}

/** Fleet-wide limits, counted over queued runs that are leased or started and not ended. */
export interface QueueLimits {
  /** at most this many running per workspace */
  readonly workspace?: number;
  /** at most this many running per provider (account) */
  readonly provider?: number;
  /** provider → runs leased per minute at most */
  readonly rates?: Readonly<Record<string, number>>;
}

/** What `lease` did: the rows it leased (best first) and how many it found past their deadline and expired. */
export interface LeaseResult {
  readonly leased: readonly QueuedRow[];
  readonly expired: number;
}

/** Counts per principal (and per node for `running`) of the queue, for operators. */
export interface QueueView {
  /** rows `queued` */
  readonly depth: number;
  /** leased or started, not ended */
  readonly running: number;
  /** enqueued_at of the oldest queued row, ms since the epoch */
  readonly oldest_enqueued_at?: number;
  readonly principals: readonly {
    readonly principal: string;
    readonly queued: number;
    readonly running: number;
    readonly oldest_enqueued_at?: number;
  }[];
  readonly owners: readonly { readonly owner: string; readonly running: number }[];
}

/** Where a listing of queue rows goes on from. */
export interface QueuePage {
  readonly rows: readonly QueuedRow[];
}

export interface QueueStore {
  /** The owner id this store leases under (the claim store's). */
  readonly ownerId: string;

  /**
   * Stores the row when `(scope, id)` has none, durably before resolving; otherwise answers the
   * existing row and writes nothing (the caller compares request hashes).
   */
  enqueue(row: NewQueued): Promise<{ readonly created: boolean; readonly row: QueuedRow }>;

  /** The row for a key. */
  getQueued(key: ClaimKey): Promise<QueuedRow | undefined>;

  /**
   * In one transaction: expires the eligible rows past their deadline, picks up to `max` rows by
   * queue-order.ts within the limits, and leases them to this store's owner. Concurrent calls (on
   * any node) never lease one row twice, and never together pass a limit.
   */
  lease(request: LeaseRequest): Promise<LeaseResult>;

  /**
   * Cancels a row that is `queued` or `leased` (its start then fails: ClaimOptions.dequeued), or
   * notes on a `started` row who asked its run to stop. Answers the row as it stands after.
   */
  cancel(key: ClaimKey, by: string, at: number): Promise<QueuedRow | undefined>;

  /** Gives a lease of this owner back (`queued`), or refuses the row (`refused` with `error`). */
  unlease(key: ClaimKey, refusal?: { readonly error: string; readonly at: number }): Promise<void>;

  /** Marks the run of a started row of this owner ended (it no longer counts as running). */
  ended(key: ClaimKey, at: number): Promise<void>;

  /**
   * Rows whose lease owner is dead: `leased` ones go back to `queued` (their run never started:
   * the claim is written with the move to `started`), `started` ones are marked ended (their claim
   * reads unresolved by the usual rules). Also expires queued rows past their deadline. Answers
   * how many rows went back to the queue.
   */
  sweep(now: number): Promise<{ readonly requeued: number; readonly expired: number }>;

  /** Started rows of this owner, not ended, that someone asked to stop (cancelled_by set). */
  stopRequests(): Promise<readonly QueuedRow[]>;

  /** Rows in `state`, in (scope, id) order after `after`. */
  listQueued(state: QueueState, after: ClaimKey | undefined, limit: number): Promise<readonly QueuedRow[]>;

  view(): Promise<QueueView>;

  /**
   * Retention (DESIGN.md "Queued invocations"): rows that ended before `olderThan` (ms) give up
   * what only a run needed. A started row is removed (its claim keeps the identity, G4); a
   * cancelled, expired or refused row, whose identity is the row, keeps its key, request hash,
   * state and outcome fields and drops its request (`request` the empty string, `labels` `{}`).
   * Nothing leased within the rate window is touched. Answers how many rows went and how many
   * were emptied.
   */
  prune(olderThan: number, now: number): Promise<QueuePruned>;
}

/** What a queue retention pass did. */
export interface QueuePruned {
  readonly removed: number;
  readonly emptied: number;
}

/** A claim store that keeps the queue beside its claims (both backends' claim stores). */
export interface QueueHost {
  /** The queue of invocations submitted to wait for a node with room. */
  queue(): QueueStore;
}
