/**
 * The embedded queue's writes (DESIGN.md "Queued invocations"), run by the claim writer inside its
 * group-commit transaction (claim-writer.ts), on whichever thread it lives: the dequeue reads its
 * candidates and counts and leases in that one immediate transaction, so no other writer (this
 * process's or another's) can come between them. Arguments and answers are plain data.
 */
import type { ClaimKey } from "../../../invocations/claim-store.js";
import { pastDeadline, pickRows, RATE_WINDOW_MS, type QueueCounts } from "../../../invocations/queue-order.js";
import type { LeaseRequest, LeaseResult, NewQueued, QueuedRow, QueuePruned } from "../../../invocations/queue-store.js";
import { candidatesPerPrincipal, labelsText, pruneCutoff, QUEUE_COLUMNS, rowToQueued, type QueueRowData } from "../../shared/queue-rows.js";
import type { SqliteDatabase, SqliteStatement } from "../../../storage/sqlite.js";

/** The queue writes a writer takes, as one message each. */
export type QueueWriteOp =
  | { readonly op: "enqueue"; readonly row: NewQueued }
  | { readonly op: "lease"; readonly request: LeaseRequest }
  | { readonly op: "cancel"; readonly key: ClaimKey; readonly by: string; readonly at: number }
  | { readonly op: "unlease"; readonly key: ClaimKey; readonly error?: string; readonly at: number }
  | { readonly op: "ended"; readonly key: ClaimKey; readonly at: number }
  | { readonly op: "requeue"; readonly deadOwners: readonly string[]; readonly now: number }
  | { readonly op: "prune"; readonly olderThan: number; readonly now: number };

type Key = [scope: string, id: string];

export class QueueWriter {
  readonly #owner: string;
  readonly #select: SqliteStatement<Key, QueueRowData>;
  readonly #insert: SqliteStatement<unknown[]>;
  readonly #principals: SqliteStatement<[], { principal: string }>;
  readonly #candidates: SqliteStatement<[string, number], QueueRowData>;
  readonly #going: SqliteStatement<[], { principal: string; workspace: string; provider: string }>;
  readonly #recent: SqliteStatement<[number], { provider: string; n: number }>;
  readonly #served: SqliteStatement<[string], number>;
  readonly #serve: SqliteStatement<[string, number]>;
  readonly #lease: SqliteStatement<[string, number, string, string]>;
  readonly #expireOne: SqliteStatement<[number, string, string, number]>;
  readonly #expireAll: SqliteStatement<[number, number]>;
  readonly #cancel: SqliteStatement<[string, number, string, string]>;
  readonly #askStop: SqliteStatement<[string, string, string]>;
  readonly #unlease: SqliteStatement<[string, string, string]>;
  readonly #refuse: SqliteStatement<[string, number, string, string, string]>;
  readonly #ended: SqliteStatement<[number, string, string]>;
  readonly #start: SqliteStatement<[number, string, string, string]>;
  readonly #startRaced: SqliteStatement<[number, string, string]>;
  readonly #requeue: SqliteStatement<[string]>;
  readonly #endDead: SqliteStatement<[number, string]>;
  readonly #removeStarted: SqliteStatement<[number]>;
  readonly #emptyEnded: SqliteStatement<[number]>;

  constructor(db: SqliteDatabase, owner: string) {
    this.#owner = owner;
    this.#select = db.prepare(`SELECT ${QUEUE_COLUMNS} FROM queue WHERE scope = ? AND id = ?`);
    this.#insert = db.prepare(
      "INSERT INTO queue (scope, id, request, request_hash, principal, workspace, provider, priority, labels, enqueued_at, deadline, state) " +
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'queued')",
    );
    this.#principals = db.prepare("SELECT DISTINCT principal FROM queue WHERE state = 'queued'");
    this.#candidates = db.prepare(
      `SELECT ${QUEUE_COLUMNS} FROM queue WHERE state = 'queued' AND principal = ? ORDER BY priority DESC, enqueued_at LIMIT ?`,
    );
    this.#going = db.prepare("SELECT principal, workspace, provider FROM queue WHERE state IN ('leased', 'started') AND ended_at IS NULL");
    this.#recent = db.prepare("SELECT provider, count(*) AS n FROM queue WHERE leased_at IS NOT NULL AND leased_at >= ? GROUP BY provider");
    this.#served = db.prepare<[string], number>("SELECT last_served FROM queue_principals WHERE principal = ?").pluck();
    this.#serve = db.prepare(
      "INSERT INTO queue_principals (principal, last_served) VALUES (?, ?) ON CONFLICT (principal) DO UPDATE SET last_served = max(last_served, excluded.last_served)",
    );
    this.#lease = db.prepare("UPDATE queue SET state = 'leased', lease_owner = ?, leased_at = ? WHERE scope = ? AND id = ? AND state = 'queued'");
    this.#expireOne = db.prepare("UPDATE queue SET state = 'expired', ended_at = ? WHERE scope = ? AND id = ? AND state = 'queued' AND deadline < ?");
    this.#expireAll = db.prepare("UPDATE queue SET state = 'expired', ended_at = ? WHERE state = 'queued' AND deadline < ?");
    this.#cancel = db.prepare(
      "UPDATE queue SET state = 'cancelled', cancelled_by = ?, ended_at = ? WHERE scope = ? AND id = ? AND state IN ('queued', 'leased')",
    );
    this.#askStop = db.prepare("UPDATE queue SET cancelled_by = ? WHERE scope = ? AND id = ? AND state = 'started' AND cancelled_by IS NULL");
    this.#unlease = db.prepare(
      "UPDATE queue SET state = 'queued', lease_owner = NULL, leased_at = NULL WHERE scope = ? AND id = ? AND state = 'leased' AND lease_owner = ?",
    );
    this.#refuse = db.prepare(
      "UPDATE queue SET state = 'refused', error = ?, ended_at = ? WHERE scope = ? AND id = ? AND state = 'leased' AND lease_owner = ?",
    );
    this.#ended = db.prepare("UPDATE queue SET ended_at = ? WHERE scope = ? AND id = ? AND state = 'started' AND ended_at IS NULL");
    this.#start = db.prepare("UPDATE queue SET state = 'started', started_at = ? WHERE scope = ? AND id = ? AND state = 'leased' AND lease_owner = ?");
    // The claim exists already (a caller started the id directly): the queue row follows it.
    this.#startRaced = db.prepare("UPDATE queue SET state = 'started', started_at = ? WHERE scope = ? AND id = ? AND state IN ('queued', 'leased')");
    this.#requeue = db.prepare("UPDATE queue SET state = 'queued', lease_owner = NULL, leased_at = NULL WHERE state = 'leased' AND lease_owner = ?");
    this.#endDead = db.prepare("UPDATE queue SET ended_at = ? WHERE state = 'started' AND ended_at IS NULL AND lease_owner = ?");
    this.#removeStarted = db.prepare("DELETE FROM queue WHERE state = 'started' AND ended_at < ?");
    this.#emptyEnded = db.prepare(
      "UPDATE queue SET request = '', labels = '{}' WHERE state IN ('cancelled', 'expired', 'refused') AND ended_at < ? AND request <> ''",
    );
  }

  apply(op: QueueWriteOp): unknown {
    switch (op.op) {
      case "enqueue":
        return this.enqueue(op.row);
      case "lease":
        return this.lease(op.request);
      case "cancel":
        return this.cancel(op.key, op.by, op.at);
      case "unlease":
        return this.unlease(op.key, op.error, op.at);
      case "ended":
        return this.#ended.run(op.at, op.key.scope, op.key.id).changes;
      case "requeue":
        return this.requeue(op.deadOwners, op.now);
      case "prune":
        return this.prune(op.olderThan, op.now);
    }
  }

  enqueue(row: NewQueued): { created: boolean; row: QueuedRow } {
    const existing = this.#select.get(row.scope, row.id);
    if (existing !== undefined) return { created: false, row: rowToQueued(existing) };
    this.#insert.run(
      row.scope, row.id, row.request, row.request_hash, row.principal, row.workspace, row.provider, row.priority,
      labelsText(row.labels), row.enqueued_at, row.deadline,
    );
    return { created: true, row: this.#read(row) };
  }

  lease(request: LeaseRequest): LeaseResult {
    const perPrincipal = candidatesPerPrincipal(request.max);
    const candidates: QueuedRow[] = [];
    for (const { principal } of this.#principals.all()) {
      for (const row of this.#candidates.all(principal, perPrincipal)) candidates.push(rowToQueued(row));
    }
    let expired = 0;
    for (const row of pastDeadline(candidates, request.now)) expired += this.#expireOne.run(request.now, row.scope, row.id, request.now).changes;
    if (request.max <= 0) return { leased: [], expired };
    const picked = pickRows(candidates, request, this.#counts(candidates, request.now));
    const leased: QueuedRow[] = [];
    for (const row of picked) {
      if (this.#lease.run(this.#owner, request.now, row.scope, row.id).changes !== 1) continue;
      this.#serve.run(row.principal, request.now);
      leased.push(this.#read(row));
    }
    return { leased, expired };
  }

  prune(olderThan: number, now: number): QueuePruned {
    const cutoff = pruneCutoff(olderThan, now);
    return { removed: this.#removeStarted.run(cutoff).changes, emptied: this.#emptyEnded.run(cutoff).changes };
  }

  cancel(key: ClaimKey, by: string, at: number): QueuedRow | undefined {
    if (this.#cancel.run(by, at, key.scope, key.id).changes === 0) this.#askStop.run(by, key.scope, key.id);
    const row = this.#select.get(key.scope, key.id);
    return row === undefined ? undefined : rowToQueued(row);
  }

  unlease(key: ClaimKey, error: string | undefined, at: number): number {
    return error === undefined
      ? this.#unlease.run(key.scope, key.id, this.#owner).changes
      : this.#refuse.run(error, at, key.scope, key.id, this.#owner).changes;
  }

  /** Inside the claim's own transaction: the leased row becomes started, or the claim must not be written. */
  start(key: ClaimKey, at: number, claimExists: boolean): boolean {
    if (claimExists) {
      this.#startRaced.run(at, key.scope, key.id);
      return true;
    }
    return this.#start.run(at, key.scope, key.id, this.#owner).changes === 1;
  }

  requeue(deadOwners: readonly string[], now: number): { requeued: number; expired: number } {
    let requeued = 0;
    for (const owner of deadOwners) {
      requeued += this.#requeue.run(owner).changes;
      this.#endDead.run(now, owner);
    }
    const expired = this.#expireAll.run(now, now).changes;
    return { requeued, expired };
  }

  #read(key: ClaimKey): QueuedRow {
    return rowToQueued(this.#select.get(key.scope, key.id)!);
  }

  #counts(candidates: readonly QueuedRow[], now: number): QueueCounts {
    const principal = new Map<string, number>();
    const workspace = new Map<string, number>();
    const provider = new Map<string, number>();
    const add = (map: Map<string, number>, key: string): void => {
      map.set(key, (map.get(key) ?? 0) + 1);
    };
    for (const row of this.#going.all()) {
      add(principal, row.principal);
      add(workspace, row.workspace);
      add(provider, row.provider);
    }
    const leasedLastMinute = new Map(this.#recent.all(now - RATE_WINDOW_MS).map((r) => [r.provider, r.n] as const));
    const lastServed = new Map<string, number>();
    for (const p of new Set(candidates.map((c) => c.principal))) {
      const at = this.#served.get(p);
      if (at !== undefined) lastServed.set(p, at);
    }
    return { principal, workspace, provider, leasedLastMinute, lastServed };
  }
}
