/**
 * The operator console's routes (DESIGN.md "Operator console"): the node summary its overview
 * shows, one-time login links, and the browser session they are exchanged for.
 */
import { Type, type Static } from "typebox";
import { Count, List, Timestamp, Uuid } from "./common.js";
import { UploadProgress } from "./delivery.js";
import { PublicKey } from "./runs.js";

export const InvocationCounts = Type.Object({
  total: Count,
  in_progress: Count,
  /** parked runs waiting for an operator's approval (open claims, but neither running nor unresolved) */
  awaiting_approval: Count,
  unresolved: Count,
  recorded: Count,
  reconciled: Count,
});
export type InvocationCounts = Static<typeof InvocationCounts>;

/** A run that ended without a recorded result, as this node saw it end (newest first, kept in memory). */
export const RunFailure = Type.Object({
  scope: Type.String(),
  id: Type.String(),
  run_id: Uuid,
  /** what the run reads now: unresolved, or an error code when it could not end at all */
  status: Type.String(),
  at: Timestamp,
});
export type RunFailure = Static<typeof RunFailure>;

/** A node sharing this node's state (`fleet` of GET /v1/node). */
export const FleetNode = Type.Object({
  /** its owner id (on PostgreSQL: the id its claims carry, new after a lost database connection) */
  node_id: Type.String(),
  host: Type.String(),
  pid: Count,
  version: Type.Optional(Type.String()),
  /** where it listens, once it does */
  url: Type.Optional(Type.String()),
  /** when this incarnation started (on PostgreSQL: took its owner lock) */
  started_at: Timestamp,
  /** the node that answered */
  self: Type.Boolean(),
});
export type FleetNode = Static<typeof FleetNode>;

/** On PostgreSQL the fleet's live nodes (owner lock held now); on the embedded backend this node alone. */
export const Fleet = Type.Object({
  shared: Type.Boolean(),
  nodes: List(FleetNode),
});
export type Fleet = Static<typeof Fleet>;

/** What one workspace or principal spent today (DESIGN.md "Spend"). */
export const SpendToday = Type.Object({
  /** the UTC day, YYYY-MM-DD */
  day: Type.String(),
  counters: List(
    Type.Object({
      kind: Type.Union([Type.Literal("workspace"), Type.Literal("principal")]),
      subject: Type.String(),
      input_tokens: Count,
      output_tokens: Count,
      cost_usd_micros: Count,
      turns: Count,
      wall_ms: Count,
    }),
  ),
});
export type SpendToday = Static<typeof SpendToday>;

/** One principal's part of the queue (DESIGN.md "Queued invocations"). */
export const QueuePrincipal = Type.Object({
  principal: Type.String(),
  /** waiting */
  queued: Count,
  /** leased or running */
  running: Count,
  /** when its oldest waiting invocation was submitted */
  oldest_queued_at: Type.Optional(Timestamp),
});
export type QueuePrincipal = Static<typeof QueuePrincipal>;

/** The queue of submitted invocations: the fleet's on PostgreSQL, with this node's slots and waits. */
export const QueueSummary = Type.Object({
  /** runs this node starts from the queue at once (`queue.slots`) */
  slots: Count,
  /** invocations waiting */
  depth: Count,
  /** queued invocations leased or running, on every node */
  running: Count,
  oldest_queued_at: Type.Optional(Timestamp),
  principals: List(QueuePrincipal),
  /** queued invocations leased or running per node (its owner id, as `fleet.nodes[].node_id`) */
  nodes: List(Type.Object({ node_id: Type.String(), running: Count })),
  /** how long the queued invocations this node process started had waited (submitted to leased) */
  waits: Type.Object({ count: Count, sum_s: Type.Number({ minimum: 0 }), max_s: Type.Number({ minimum: 0 }) }),
});
export type QueueSummary = Static<typeof QueueSummary>;

export const NodeSummary = Type.Object({
  version: Type.String(),
  backend: Type.Union([Type.Literal("embedded"), Type.Literal("postgres")]),
  ready: Type.Boolean(),
  fleet: Fleet,
  keys: List(PublicKey),
  counts: InvocationCounts,
  /** runs this node's process is running now */
  active_runs: Count,
  /** stages being uploaded now (through any node sharing the stores), with their progress */
  uploads: List(UploadProgress),
  recent_failures: List(RunFailure),
  /** today's spend per workspace and principal, the fleet's on PostgreSQL */
  spend_today: SpendToday,
  queue: QueueSummary,
});
export type NodeSummary = Static<typeof NodeSummary>;

export const LoginLink = Type.Object({
  /** the console path to open; the secret is in the fragment, which browsers never send to a server */
  path: Type.String(),
  expires_at: Timestamp,
});
export type LoginLink = Static<typeof LoginLink>;

/** `POST /ui/session`: a one-time login secret from `warden console`, or a pasted bearer token. */
export const SessionBody = Type.Union([
  Type.Object({ login: Type.String({ minLength: 1, maxLength: 256 }) }, { additionalProperties: false }),
  Type.Object({ token: Type.String({ minLength: 1, maxLength: 4096 }) }, { additionalProperties: false }),
]);
export type SessionBody = Static<typeof SessionBody>;

export const SessionView = Type.Object({
  name: Type.String(),
  role: Type.Union([Type.Literal("operator"), Type.Literal("observer")]),
  /** send as the `X-Warden-CSRF` header with every request that changes something */
  csrf: Type.String(),
  expires_at: Timestamp,
});
export type SessionView = Static<typeof SessionView>;

export const CSRF_HEADER = "x-warden-csrf";
export const SESSION_COOKIE = "warden_session";
