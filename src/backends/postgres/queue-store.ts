/**
 * The postgres QueueStore (DESIGN.md "Queued invocations"): `warden_queue`, shared by the fleet.
 *
 * A dequeue is one transaction: the candidates (per principal with queued rows, its best rows)
 * are read `FOR UPDATE SKIP LOCKED`, so two nodes never read the same row as free; the limited
 * keys (a workspace, a provider, a provider's rate) of the candidates are locked with
 * `pg_try_advisory_xact_lock` — a key another node holds is skipped this round, never waited for —
 * and only then are the runs going counted, so two nodes never both see room for the last run;
 * the picks are leased to this node's owner, in the same transaction, only while its owner lock
 * is held. A lease's liveness is that owner lock (owner.ts): the sweep returns the leases of dead
 * owners to the queue.
 */
import type pg from "pg";
import type { ClaimKey } from "../../invocations/claim-store.js";
import { pastDeadline, pickRows, RATE_WINDOW_MS, type QueueCounts } from "../../invocations/queue-order.js";
import type { LeaseRequest, LeaseResult, NewQueued, QueuedRow, QueuePruned, QueueState, QueueStore, QueueView } from "../../invocations/queue-store.js";
import { eligibleCandidatesPerPrincipal, labelsText, pruneCutoff, QUEUE_COLUMNS, queueViewOf, rowToQueued, type QueueRowData } from "../shared/queue-rows.js";
import { query, transaction, type PgPool } from "./connection.js";
import type { OwnerSession } from "./owner.js";

/** The first half of the two-int advisory keys of queue limits ("WQL1"): apart from owner locks (one bigint key). */
const LIMIT_LOCK_SPACE = 0x57514c31;

const SELECT = `SELECT ${QUEUE_COLUMNS} FROM warden_queue`;

// Only rows this node could run are read (and locked): a row locked here is skipped by every
// other node's dequeue until this transaction ends, so a lock taken on a row that is then passed
// over (another provider, a label this node lacks) is a row a node that could run it misses.
// Labels are the node's to cover: the row's object contained in the node's (queue-order.ts labelsCover).
const CANDIDATES = `
  SELECT c.* FROM (SELECT DISTINCT principal FROM warden_queue WHERE state = 'queued') p
  CROSS JOIN LATERAL (
    SELECT ${QUEUE_COLUMNS} FROM warden_queue w WHERE w.state = 'queued' AND w.principal = p.principal
    AND w.provider = ANY($2::text[]) AND w.labels::jsonb <@ $3::jsonb
    ORDER BY w.priority DESC, w.enqueued_at LIMIT $1 FOR UPDATE SKIP LOCKED
  ) c`;

// What the picks are counted against, in one round trip: runs going per (principal, workspace,
// provider); with rates ($3), rows leased per provider since $1; when each candidate principal
// ($2) was last served.
const COUNTS = `
  SELECT 'going' AS kind, principal, workspace, provider, count(*)::int AS n, NULL::float8 AS at FROM warden_queue
    WHERE state IN ('leased', 'started') AND ended_at IS NULL GROUP BY principal, workspace, provider
  UNION ALL
  SELECT 'recent', NULL, NULL, provider, count(*)::int, NULL FROM warden_queue
    WHERE $3::boolean AND leased_at IS NOT NULL AND leased_at >= $1 GROUP BY provider
  UNION ALL
  SELECT 'served', principal, NULL, NULL, 0, last_served::float8 FROM warden_queue_principals WHERE principal = ANY($2::text[])`;

export class PostgresQueueStore implements QueueStore {
  readonly #pool: PgPool;
  readonly #owner: OwnerSession;
  readonly #assertOpen: () => void;

  constructor(pool: PgPool, owner: OwnerSession, assertOpen: () => void) {
    this.#pool = pool;
    this.#owner = owner;
    this.#assertOpen = assertOpen;
  }

  get ownerId(): string {
    return this.#owner.id;
  }

  async enqueue(row: NewQueued): Promise<{ readonly created: boolean; readonly row: QueuedRow }> {
    this.#assertOpen();
    const inserted = await query<QueueRowData>(this.#pool, "queue an invocation", {
      name: "warden-queue-insert",
      text:
        "INSERT INTO warden_queue (scope, id, request, request_hash, principal, workspace, provider, priority, labels, enqueued_at, deadline, state) " +
        `VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, 'queued') ON CONFLICT (scope, id) DO NOTHING RETURNING ${QUEUE_COLUMNS}`,
      values: [row.scope, row.id, row.request, row.request_hash, row.principal, row.workspace, row.provider, row.priority, labelsText(row.labels), row.enqueued_at, row.deadline],
    });
    if (inserted.rows[0] !== undefined) return { created: true, row: rowToQueued(inserted.rows[0]) };
    const existing = await this.getQueued(row);
    if (existing === undefined) return this.enqueue(row); // removed in between: there is no removal, but never answer nothing
    return { created: false, row: existing };
  }

  async getQueued(key: ClaimKey): Promise<QueuedRow | undefined> {
    this.#assertOpen();
    const result = await query<QueueRowData>(this.#pool, "read a queued invocation", {
      name: "warden-queue-get",
      text: `${SELECT} WHERE scope = $1 AND id = $2`,
      values: [key.scope, key.id],
    });
    return result.rows[0] === undefined ? undefined : rowToQueued(result.rows[0]);
  }

  async lease(request: LeaseRequest): Promise<LeaseResult> {
    this.#assertOpen();
    this.#owner.assertHealthy("lease queued invocations");
    const owner = this.#owner.id;
    return transaction(this.#pool, "lease queued invocations", async (client) => {
      const candidates = (
        await client.query<QueueRowData>({
          name: "warden-queue-candidates",
          text: CANDIDATES,
          values: [eligibleCandidatesPerPrincipal(request), [...request.providers], labelsText(request.labels)],
        })
      ).rows.map(rowToQueued);
      const late = pastDeadline(candidates, request.now);
      let expired = 0;
      if (late.length > 0) {
        const result = await client.query({
          name: "warden-queue-expire-some",
          text:
            "UPDATE warden_queue q SET state = 'expired', ended_at = $1 FROM unnest($2::text[], $3::text[]) AS k(scope, id) " +
            "WHERE q.scope = k.scope AND q.id = k.id AND q.state = 'queued'",
          values: [request.now, late.map((r) => r.scope), late.map((r) => r.id)],
        });
        expired = result.rowCount ?? 0;
      }
      if (request.max <= 0 || candidates.length === late.length) return { leased: [], expired };
      const held = await this.#lockLimitedKeys(client, candidates, request);
      const usable = candidates.filter((row) => limitedKeysOf(row, request).every((k) => held.has(k)));
      const counts = await countsOf(client, usable, request);
      const picked = pickRows(usable, request, counts);
      if (picked.length === 0) return { leased: [], expired };
      // The lease and its principals' last service in one statement (one round trip).
      const leased = await client.query<QueueRowData>({
        name: "warden-queue-lease",
        text:
          "WITH l AS (UPDATE warden_queue q SET state = 'leased', lease_owner = $1, leased_at = $2 FROM unnest($3::text[], $4::text[]) AS k(scope, id) " +
          `WHERE q.scope = k.scope AND q.id = k.id AND q.state = 'queued' AND warden_owner_alive($1) RETURNING ${QUEUE_COLUMNS.split(", ").map((c) => `q.${c}`).join(", ")}), ` +
          "s AS (INSERT INTO warden_queue_principals (principal, last_served) SELECT DISTINCT principal, $2 FROM l " +
          "ON CONFLICT (principal) DO UPDATE SET last_served = GREATEST(warden_queue_principals.last_served, excluded.last_served)) " +
          "SELECT * FROM l",
        values: [owner, request.now, picked.map((r) => r.scope), picked.map((r) => r.id)],
      });
      const byKey = new Map(leased.rows.map(rowToQueued).map((r) => [`${r.scope}\0${r.id}`, r] as const));
      // Best first, as picked.
      return { leased: picked.flatMap((r) => byKey.get(`${r.scope}\0${r.id}`) ?? []), expired };
    });
  }

  /** Takes the advisory locks of the candidates' limited keys that no other node holds; the ones taken. */
  async #lockLimitedKeys(client: pg.PoolClient, candidates: readonly QueuedRow[], request: LeaseRequest): Promise<Set<string>> {
    const keys = [...new Set(candidates.flatMap((row) => limitedKeysOf(row, request)))].sort();
    if (keys.length === 0) return new Set();
    const result = await client.query<{ k: string; ok: boolean }>({
      name: "warden-queue-limit-locks",
      text: "SELECT k, pg_try_advisory_xact_lock($2, hashtext(k)) AS ok FROM unnest($1::text[]) AS k",
      values: [keys, LIMIT_LOCK_SPACE],
    });
    return new Set(result.rows.filter((r) => r.ok).map((r) => r.k));
  }

  async cancel(key: ClaimKey, by: string, at: number): Promise<QueuedRow | undefined> {
    this.#assertOpen();
    const cancelled = await query(this.#pool, "cancel a queued invocation", {
      name: "warden-queue-cancel",
      // The row's lock orders this against a start (which needs the row `leased`): one of them wins.
      text: "UPDATE warden_queue SET state = 'cancelled', cancelled_by = $3, ended_at = $4 WHERE scope = $1 AND id = $2 AND state IN ('queued', 'leased')",
      values: [key.scope, key.id, by, at],
    });
    if (cancelled.rowCount === 0) {
      // Started (maybe just now: a new statement sees it): the runner's node stops the run.
      await query(this.#pool, "ask a queued run to stop", {
        name: "warden-queue-ask-stop",
        text: "UPDATE warden_queue SET cancelled_by = $3 WHERE scope = $1 AND id = $2 AND state = 'started' AND cancelled_by IS NULL",
        values: [key.scope, key.id, by],
      });
    }
    return this.getQueued(key);
  }

  async unlease(key: ClaimKey, refusal?: { readonly error: string; readonly at: number }): Promise<void> {
    this.#assertOpen();
    await query(this.#pool, "give a lease back", {
      text:
        refusal === undefined
          ? "UPDATE warden_queue SET state = 'queued', lease_owner = NULL, leased_at = NULL WHERE scope = $1 AND id = $2 AND state = 'leased' AND lease_owner = ANY($3::text[])"
          : "UPDATE warden_queue SET state = 'refused', error = $4, ended_at = $5 WHERE scope = $1 AND id = $2 AND state = 'leased' AND lease_owner = ANY($3::text[])",
      values: refusal === undefined ? [key.scope, key.id, [...this.#owner.ids]] : [key.scope, key.id, [...this.#owner.ids], refusal.error, refusal.at],
    });
  }

  async ended(key: ClaimKey, at: number): Promise<void> {
    this.#assertOpen();
    await query(this.#pool, "mark a queued run ended", {
      name: "warden-queue-ended",
      text: "UPDATE warden_queue SET ended_at = $3 WHERE scope = $1 AND id = $2 AND state = 'started' AND ended_at IS NULL",
      values: [key.scope, key.id, at],
    });
  }

  async sweep(now: number): Promise<{ readonly requeued: number; readonly expired: number }> {
    this.#assertOpen();
    const result = await query<{ requeued: number; expired: number }>(this.#pool, "sweep the queue", {
      name: "warden-queue-sweep",
      // A dead owner never comes back (an owner id is one incarnation's): its leases go back to
      // the queue (no claim: never started), its started runs stop counting (their claims read
      // unresolved by the usual rule).
      text:
        "WITH r AS (UPDATE warden_queue SET state = 'queued', lease_owner = NULL, leased_at = NULL " +
        "WHERE state = 'leased' AND NOT warden_owner_alive(lease_owner) RETURNING 1), " +
        "e AS (UPDATE warden_queue SET ended_at = $1 WHERE state = 'started' AND ended_at IS NULL AND NOT warden_owner_alive(lease_owner) RETURNING 1), " +
        "x AS (UPDATE warden_queue SET state = 'expired', ended_at = $1 WHERE state = 'queued' AND deadline < $1 RETURNING 1) " +
        "SELECT (SELECT count(*) FROM r)::int AS requeued, (SELECT count(*) FROM x)::int AS expired, (SELECT count(*) FROM e)::int AS ended",
      values: [now],
    });
    const row = result.rows[0]!;
    return { requeued: row.requeued, expired: row.expired };
  }

  async stopRequests(): Promise<readonly QueuedRow[]> {
    this.#assertOpen();
    const result = await query<QueueRowData>(this.#pool, "read the queue's stop requests", {
      name: "warden-queue-stops",
      text: `${SELECT} WHERE lease_owner = ANY($1::text[]) AND state = 'started' AND ended_at IS NULL AND cancelled_by IS NOT NULL`,
      values: [[...this.#owner.ids]],
    });
    return result.rows.map(rowToQueued);
  }

  async listQueued(state: QueueState, after: ClaimKey | undefined, limit: number): Promise<readonly QueuedRow[]> {
    this.#assertOpen();
    const result = await query<QueueRowData>(this.#pool, "list queued invocations", {
      text: `${SELECT} WHERE state = ANY($1::text[]) AND (scope, id) > ($2, $3) ORDER BY scope, id LIMIT $4`,
      values: [state === "queued" ? ["queued", "leased"] : [state], after?.scope ?? "", after?.id ?? "", limit],
    });
    return result.rows.map(rowToQueued);
  }

  async view(): Promise<QueueView> {
    this.#assertOpen();
    const principals = await query<{ principal: string; queued: number; running: number; oldest: number | null }>(this.#pool, "read the queue's counts", {
      text:
        "SELECT principal, (count(*) FILTER (WHERE state = 'queued'))::int AS queued, " +
        "(count(*) FILTER (WHERE state IN ('leased', 'started') AND ended_at IS NULL))::int AS running, " +
        "(min(enqueued_at) FILTER (WHERE state = 'queued'))::float8 AS oldest FROM warden_queue " +
        "WHERE state = 'queued' OR (state IN ('leased', 'started') AND ended_at IS NULL) GROUP BY principal ORDER BY principal",
    });
    const owners = await query<{ owner: string; running: number }>(this.#pool, "read the queue's counts", {
      text:
        "SELECT lease_owner AS owner, count(*)::int AS running FROM warden_queue WHERE state IN ('leased', 'started') AND ended_at IS NULL " +
        "GROUP BY lease_owner ORDER BY lease_owner",
    });
    return queueViewOf(principals.rows, owners.rows);
  }

  async prune(olderThan: number, now: number): Promise<QueuePruned> {
    this.#assertOpen();
    const result = await query<{ removed: number; emptied: number }>(this.#pool, "prune the queue", {
      name: "warden-queue-prune",
      text:
        "WITH d AS (DELETE FROM warden_queue WHERE state = 'started' AND ended_at < $1 RETURNING 1), " +
        "e AS (UPDATE warden_queue SET request = '', labels = '{}' WHERE state IN ('cancelled', 'expired', 'refused') AND ended_at < $1 AND request <> '' RETURNING 1) " +
        "SELECT (SELECT count(*) FROM d)::int AS removed, (SELECT count(*) FROM e)::int AS emptied",
      values: [pruneCutoff(olderThan, now)],
    });
    const row = result.rows[0]!;
    return { removed: row.removed, emptied: row.emptied };
  }
}

/** The limited keys a row's lease would count against (none without limits). */
function limitedKeysOf(row: QueuedRow, request: LeaseRequest): string[] {
  const keys: string[] = [];
  if (request.limits.workspace !== undefined) keys.push(`workspace:${row.workspace}`);
  if (request.limits.provider !== undefined || request.limits.rates?.[row.provider] !== undefined) keys.push(`provider:${row.provider}`);
  return keys;
}

/** Runs going and rows leased lately, read after the limited keys' locks were taken. */
async function countsOf(client: pg.PoolClient, candidates: readonly QueuedRow[], request: LeaseRequest): Promise<QueueCounts> {
  const rows = await client.query<{ kind: "going" | "recent" | "served"; principal: string | null; workspace: string | null; provider: string | null; n: number; at: number | null }>({
    name: "warden-queue-counts",
    text: COUNTS,
    values: [request.now - RATE_WINDOW_MS, [...new Set(candidates.map((c) => c.principal))], Object.keys(request.limits.rates ?? {}).length > 0],
  });
  const principal = new Map<string, number>();
  const workspace = new Map<string, number>();
  const provider = new Map<string, number>();
  const leasedLastMinute = new Map<string, number>();
  const lastServed = new Map<string, number>();
  const add = (map: Map<string, number>, key: string, n: number): void => {
    map.set(key, (map.get(key) ?? 0) + n);
  };
  for (const row of rows.rows) {
    if (row.kind === "going") {
      add(principal, row.principal!, row.n);
      add(workspace, row.workspace!, row.n);
      add(provider, row.provider!, row.n);
    } else if (row.kind === "recent") leasedLastMinute.set(row.provider!, row.n);
    else lastServed.set(row.principal!, row.at!);
  }
  return { principal, workspace, provider, leasedLastMinute, lastServed };
}
