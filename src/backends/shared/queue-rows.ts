/**
 * A queue row as both backends store it (DESIGN.md "Queued invocations"), the one mapping from a
 * row to a QueuedRow, and the rules both backends' dequeue transactions share. Below both
 * backends so that neither imports the other.
 */
import { ConflictError, IntegrityError } from "../../core/errors.js";
import type { ClaimKey } from "../../invocations/claim-store.js";
import type { Digest } from "../../core/digest.js";
import { RATE_WINDOW_MS } from "../../invocations/queue-order.js";
import { QUEUE_STATES, type Labels, type LeaseRequest, type QueuedRow, type QueueState, type QueueView } from "../../invocations/queue-store.js";

/** Columns in the order every SELECT of a whole queue row uses. */
export const QUEUE_COLUMNS =
  "scope, id, request, request_hash, principal, workspace, provider, priority, labels, enqueued_at, deadline, state, " +
  "lease_owner, leased_at, started_at, ended_at, cancelled_by, error";

export type QueueRowData = Record<string, unknown>;

/** Rows per principal a dequeue reads as candidates: enough to pass over rows that do not fit. */
export function candidatesPerPrincipal(max: number): number {
  return Math.min(4 * max + 16, 1000);
}

/**
 * Rows per principal a dequeue reads when it reads only rows of providers and labels the node
 * has (PostgreSQL's). Under a limit, rows that do not fit are still passed over, so it reads
 * more than it can take; without one, every row read fits, so it reads no more than it takes:
 * each row read is locked until the dequeue commits, and skipped by every other node's dequeue
 * meanwhile.
 */
export function eligibleCandidatesPerPrincipal(request: Pick<LeaseRequest, "max" | "limits">): number {
  const { workspace, provider, rates } = request.limits;
  const limited = workspace !== undefined || provider !== undefined || Object.keys(rates ?? {}).length > 0;
  return limited ? candidatesPerPrincipal(request.max) : Math.min(Math.max(request.max, 0), 1000);
}

function malformed(row: QueueRowData, column: string): IntegrityError {
  return new IntegrityError("queue-record-malformed", `queue row ${JSON.stringify([row.scope, row.id])} has an invalid ${column}`, {
    status: 500,
    details: { column },
  });
}

function text(row: QueueRowData, column: string): string {
  const value = row[column];
  if (typeof value !== "string") throw malformed(row, column);
  return value;
}

function optionalText(row: QueueRowData, column: string): string | undefined {
  const value = row[column];
  if (value === null || value === undefined) return undefined;
  if (typeof value !== "string") throw malformed(row, column);
  return value;
}

function integer(row: QueueRowData, column: string): number {
  const value = row[column];
  if (typeof value !== "number" || !Number.isSafeInteger(value)) throw malformed(row, column);
  return value;
}

function optionalInteger(row: QueueRowData, column: string): number | undefined {
  const value = row[column];
  if (value === null || value === undefined) return undefined;
  if (typeof value !== "number" || !Number.isSafeInteger(value)) throw malformed(row, column);
  return value;
}

function labelsOf(row: QueueRowData): Labels {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text(row, "labels"));
  } catch {
    throw malformed(row, "labels");
  }
  if (parsed === null || typeof parsed !== "object" || Array.isArray(parsed)) throw malformed(row, "labels");
  for (const value of Object.values(parsed)) if (typeof value !== "string") throw malformed(row, "labels");
  return parsed as Labels;
}

/** The row as stored, checked column by column. */
export function rowToQueued(row: QueueRowData): QueuedRow {
  const state = text(row, "state");
  if (!(QUEUE_STATES as readonly string[]).includes(state)) throw malformed(row, "state");
  const optional = {
    lease_owner: optionalText(row, "lease_owner"),
    leased_at: optionalInteger(row, "leased_at"),
    started_at: optionalInteger(row, "started_at"),
    ended_at: optionalInteger(row, "ended_at"),
    cancelled_by: optionalText(row, "cancelled_by"),
    error: optionalText(row, "error"),
  };
  return {
    scope: text(row, "scope"),
    id: text(row, "id"),
    request: text(row, "request"),
    request_hash: text(row, "request_hash") as Digest,
    principal: text(row, "principal"),
    workspace: text(row, "workspace"),
    provider: text(row, "provider"),
    priority: integer(row, "priority"),
    labels: labelsOf(row),
    enqueued_at: integer(row, "enqueued_at"),
    deadline: integer(row, "deadline"),
    state: state as QueueState,
    ...(Object.fromEntries(Object.entries(optional).filter(([, v]) => v !== undefined)) as Partial<QueuedRow>),
  };
}

/** The canonical text of a row's labels (keys sorted), as stored. */
export function labelsText(labels: Labels): string {
  return JSON.stringify(Object.fromEntries(Object.entries(labels).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))));
}

/** The operators' view from three grouped counts. */
export function queueViewOf(
  principals: readonly { principal: string; queued: number; running: number; oldest: number | null }[],
  owners: readonly { owner: string; running: number }[],
): QueueView {
  let depth = 0;
  let running = 0;
  let oldest: number | undefined;
  for (const p of principals) {
    depth += p.queued;
    running += p.running;
    if (p.oldest !== null && (oldest === undefined || p.oldest < oldest)) oldest = p.oldest;
  }
  return {
    depth,
    running,
    ...(oldest === undefined ? {} : { oldest_enqueued_at: oldest }),
    principals: principals.map((p) => ({
      principal: p.principal,
      queued: p.queued,
      running: p.running,
      ...(p.oldest === null ? {} : { oldest_enqueued_at: p.oldest }),
    })),
    owners: owners.map((o) => ({ owner: o.owner, running: o.running })),
  };
}

/**
 * The cutoff a queue prune applies: never inside the rate window, whose count reads the rows
 * leased in the last minute (a rate would reopen if they went).
 */
export function pruneCutoff(olderThan: number, now: number): number {
  return Math.min(olderThan, now - RATE_WINDOW_MS);
}

/** The refusal of a queued run's claim whose lease no longer holds (both backends' code). */
export function leaseLost(key: ClaimKey): ConflictError {
  return new ConflictError("queue-lease-lost", `the queued invocation ${key.scope}/${key.id} is no longer leased to this node (cancelled, or its lease went back to the queue); it was not started`, {
    details: { scope: key.scope, id: key.id },
  });
}
