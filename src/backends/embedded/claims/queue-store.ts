/**
 * The embedded QueueStore (DESIGN.md "Queued invocations"): the `queue` table of the claims
 * database. Writes go through the claim store's writer (one group-commit transaction each, on the
 * write worker when there is one: queue-writer.ts); reads use the store's own connection. A
 * lease's owner is a claim owner, alive while its process holds its flock (owner.ts).
 */
import type { ClaimKey } from "../../../invocations/claim-store.js";
import type { LeaseRequest, LeaseResult, NewQueued, QueuedRow, QueuePruned, QueueState, QueueStore, QueueView } from "../../../invocations/queue-store.js";
import { QUEUE_COLUMNS, queueViewOf, rowToQueued, type QueueRowData } from "../../shared/queue-rows.js";
import { sqliteFailure, type SqliteDatabase, type SqliteStatement } from "../../../storage/sqlite.js";
import type { ClaimWrites } from "./claim-writer.js";
import type { OwnerRegistry } from "./owner.js";

type Key = [scope: string, id: string];

export class EmbeddedQueueStore implements QueueStore {
  readonly #writes: ClaimWrites;
  readonly #owners: OwnerRegistry;
  readonly #assertOpen: () => void;
  readonly #select: SqliteStatement<Key, QueueRowData>;
  readonly #list: SqliteStatement<[string, string, string, number], QueueRowData>;
  readonly #listWaiting: SqliteStatement<[string, string, number], QueueRowData>;
  readonly #goingOwners: SqliteStatement<[], string>;
  readonly #stops: SqliteStatement<[string], QueueRowData>;
  readonly #byPrincipal: SqliteStatement<[], { principal: string; queued: number; running: number; oldest: number | null }>;
  readonly #byOwner: SqliteStatement<[], { owner: string; running: number }>;

  constructor(db: SqliteDatabase, writes: ClaimWrites, owners: OwnerRegistry, assertOpen: () => void) {
    this.#writes = writes;
    this.#owners = owners;
    this.#assertOpen = assertOpen;
    this.#select = db.prepare(`SELECT ${QUEUE_COLUMNS} FROM queue WHERE scope = ? AND id = ?`);
    this.#list = db.prepare(`SELECT ${QUEUE_COLUMNS} FROM queue WHERE state = ? AND (scope, id) > (?, ?) ORDER BY scope, id LIMIT ?`);
    // `queued` as operators see it: waiting, or taken by a node and not started yet.
    this.#listWaiting = db.prepare(
      `SELECT ${QUEUE_COLUMNS} FROM queue WHERE state IN ('queued', 'leased') AND (scope, id) > (?, ?) ORDER BY scope, id LIMIT ?`,
    );
    this.#goingOwners = db.prepare<[], string>("SELECT DISTINCT lease_owner FROM queue WHERE state IN ('leased', 'started') AND ended_at IS NULL").pluck();
    this.#stops = db.prepare(
      `SELECT ${QUEUE_COLUMNS} FROM queue WHERE lease_owner = ? AND state = 'started' AND ended_at IS NULL AND cancelled_by IS NOT NULL`,
    );
    this.#byPrincipal = db.prepare(
      "SELECT principal, count(*) FILTER (WHERE state = 'queued') AS queued, count(*) FILTER (WHERE state IN ('leased', 'started') AND ended_at IS NULL) AS running, " +
        "min(enqueued_at) FILTER (WHERE state = 'queued') AS oldest FROM queue WHERE state = 'queued' OR (state IN ('leased', 'started') AND ended_at IS NULL) " +
        "GROUP BY principal ORDER BY principal",
    );
    this.#byOwner = db.prepare(
      "SELECT lease_owner AS owner, count(*) AS running FROM queue WHERE state IN ('leased', 'started') AND ended_at IS NULL GROUP BY lease_owner ORDER BY lease_owner",
    );
  }

  get ownerId(): string {
    return this.#owners.id;
  }

  async enqueue(row: NewQueued): Promise<{ readonly created: boolean; readonly row: QueuedRow }> {
    this.#assertOpen();
    return (await this.#writes.queue({ op: "enqueue", row })) as { created: boolean; row: QueuedRow };
  }

  async getQueued(key: ClaimKey): Promise<QueuedRow | undefined> {
    this.#assertOpen();
    const row = this.#read(() => this.#select.get(key.scope, key.id), "read a queued invocation");
    return row === undefined ? undefined : rowToQueued(row);
  }

  async lease(request: LeaseRequest): Promise<LeaseResult> {
    this.#assertOpen();
    return (await this.#writes.queue({ op: "lease", request })) as LeaseResult;
  }

  async cancel(key: ClaimKey, by: string, at: number): Promise<QueuedRow | undefined> {
    this.#assertOpen();
    return (await this.#writes.queue({ op: "cancel", key: { scope: key.scope, id: key.id }, by, at })) as QueuedRow | undefined;
  }

  async unlease(key: ClaimKey, refusal?: { readonly error: string; readonly at: number }): Promise<void> {
    this.#assertOpen();
    await this.#writes.queue({ op: "unlease", key: { scope: key.scope, id: key.id }, at: refusal?.at ?? 0, ...(refusal === undefined ? {} : { error: refusal.error }) });
  }

  async ended(key: ClaimKey, at: number): Promise<void> {
    this.#assertOpen();
    await this.#writes.queue({ op: "ended", key: { scope: key.scope, id: key.id }, at });
  }

  async sweep(now: number): Promise<{ readonly requeued: number; readonly expired: number }> {
    this.#assertOpen();
    // An owner found dead stays dead (an owner id is one process's incarnation): deciding here,
    // outside the write, cannot requeue a lease a live node still holds.
    const owners = this.#read(() => this.#goingOwners.all(), "read the queue's leases");
    const dead = owners.filter((owner) => !this.#owners.isAlive(owner));
    return (await this.#writes.queue({ op: "requeue", deadOwners: dead, now })) as { requeued: number; expired: number };
  }

  async stopRequests(): Promise<readonly QueuedRow[]> {
    this.#assertOpen();
    return this.#read(() => this.#stops.all(this.#owners.id), "read the queue's stop requests").map(rowToQueued);
  }

  async listQueued(state: QueueState, after: ClaimKey | undefined, limit: number): Promise<readonly QueuedRow[]> {
    this.#assertOpen();
    const scope = after?.scope ?? "";
    const id = after?.id ?? "";
    const rows = this.#read(() => (state === "queued" ? this.#listWaiting.all(scope, id, limit) : this.#list.all(state, scope, id, limit)), "list queued invocations");
    return rows.map(rowToQueued);
  }

  async prune(olderThan: number, now: number): Promise<QueuePruned> {
    this.#assertOpen();
    return (await this.#writes.queue({ op: "prune", olderThan, now })) as QueuePruned;
  }

  async view(): Promise<QueueView> {
    this.#assertOpen();
    return this.#read(() => queueViewOf(this.#byPrincipal.all(), this.#byOwner.all()), "read the queue's counts");
  }

  #read<T>(read: () => T, doing: string): T {
    try {
      return read();
    } catch (error) {
      throw sqliteFailure(error, doing);
    }
  }
}
