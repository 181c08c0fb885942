/**
 * Which queued rows a node takes, and in which order (DESIGN.md "Queued invocations"): the same
 * rule on every backend, applied inside the backend's dequeue transaction to the candidates it
 * read there and the counts it took there.
 *
 * Eligible: not past its deadline, its provider run by the node, its required labels all present
 * on the node with the same value. Order: priority (higher first); then fairness across
 * principals — the principal with the fewest runs going, then the one served least recently —
 * then enqueued_at. Each pick counts at once, so one call interleaves principals as they go.
 * Limits: a row whose workspace or provider has its limit of runs going, or whose provider has
 * started its rate of runs in the last minute, is passed over (the principal's next row may fit).
 */
import type { Labels, LeaseRequest, QueuedRow } from "./queue-store.js";

/** What the backend counted inside its transaction. */
export interface QueueCounts {
  /** runs going (leased or started, not ended) per principal, workspace and provider */
  readonly principal: ReadonlyMap<string, number>;
  readonly workspace: ReadonlyMap<string, number>;
  readonly provider: ReadonlyMap<string, number>;
  /** rows leased in the last minute per provider */
  readonly leasedLastMinute: ReadonlyMap<string, number>;
  /** when each principal was last served (a row of theirs leased), ms */
  readonly lastServed: ReadonlyMap<string, number>;
}

export const RATE_WINDOW_MS = 60_000;

/** True when the node's labels cover every label the row requires. */
export function labelsCover(node: Labels, required: Labels): boolean {
  for (const [name, value] of Object.entries(required)) {
    if (!Object.hasOwn(node, name) || node[name] !== value) return false;
  }
  return true;
}

/** The rows past their deadline among `candidates` (to be expired, never run). */
export function pastDeadline(candidates: readonly QueuedRow[], now: number): QueuedRow[] {
  return candidates.filter((row) => row.deadline < now);
}

/** Up to `request.max` rows to lease, best first. `candidates` are `queued` rows in any order. */
export function pickRows(candidates: readonly QueuedRow[], request: LeaseRequest, counts: QueueCounts): QueuedRow[] {
  const providers = new Set(request.providers);
  const byPrincipal = new Map<string, QueuedRow[]>();
  for (const row of candidates) {
    if (row.state !== "queued" || row.deadline < request.now) continue;
    if (!providers.has(row.provider) || !labelsCover(request.labels, row.labels)) continue;
    let rows = byPrincipal.get(row.principal);
    if (rows === undefined) byPrincipal.set(row.principal, (rows = []));
    rows.push(row);
  }
  for (const rows of byPrincipal.values()) rows.sort(rowOrder);
  const principal = new Map(counts.principal);
  const workspace = new Map(counts.workspace);
  const provider = new Map(counts.provider);
  const rate = new Map(counts.leasedLastMinute);
  const served = new Map(counts.lastServed);
  const limits = request.limits;
  const fits = (row: QueuedRow): boolean =>
    (limits.workspace === undefined || (workspace.get(row.workspace) ?? 0) < limits.workspace) &&
    (limits.provider === undefined || (provider.get(row.provider) ?? 0) < limits.provider) &&
    (limits.rates?.[row.provider] === undefined || (rate.get(row.provider) ?? 0) < limits.rates[row.provider]!);
  const picked: QueuedRow[] = [];
  // Picks made in this call are served later than anything before it, in the order made.
  let servedAt = Math.max(request.now, ...served.values());
  while (picked.length < request.max) {
    let best: QueuedRow | undefined;
    for (const rows of byPrincipal.values()) {
      while (rows.length > 0 && !fits(rows[0]!)) rows.shift();
      const head = rows[0];
      if (head === undefined) continue;
      if (best === undefined || fairOrder(head, best, principal, served) < 0) best = head;
    }
    if (best === undefined) break;
    byPrincipal.get(best.principal)!.shift();
    picked.push(best);
    principal.set(best.principal, (principal.get(best.principal) ?? 0) + 1);
    workspace.set(best.workspace, (workspace.get(best.workspace) ?? 0) + 1);
    provider.set(best.provider, (provider.get(best.provider) ?? 0) + 1);
    rate.set(best.provider, (rate.get(best.provider) ?? 0) + 1);
    served.set(best.principal, ++servedAt);
  }
  return picked;
}

/** One principal's own rows: priority, then enqueued_at, then key. */
function rowOrder(a: QueuedRow, b: QueuedRow): number {
  return b.priority - a.priority || a.enqueued_at - b.enqueued_at || compare(a.scope, b.scope) || compare(a.id, b.id);
}

function fairOrder(a: QueuedRow, b: QueuedRow, running: ReadonlyMap<string, number>, served: ReadonlyMap<string, number>): number {
  if (a.priority !== b.priority) return b.priority - a.priority;
  const ra = running.get(a.principal) ?? 0;
  const rb = running.get(b.principal) ?? 0;
  if (ra !== rb) return ra - rb;
  const sa = served.get(a.principal) ?? -Infinity;
  const sb = served.get(b.principal) ?? -Infinity;
  if (sa !== sb) return sa < sb ? -1 : 1;
  return rowOrder(a, b);
}

function compare(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
