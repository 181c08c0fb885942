/** Invocation routes: idempotent runs, lookup, listing, inspection and reconciliation. */
import { Type, type Static } from "typebox";
import { Count, Digest, Hex64, Json, List, Timestamp, Uuid } from "./common.js";
import { ProviderName } from "./delivery.js";

export const IDEMPOTENCY_KEY_HEADER = "idempotency-key";
export const IDEMPOTENCY_REPLAYED_HEADER = "idempotency-replayed";
/** A UUID, bare or as an RFC 8941 sf-string (the IETF draft's form). */
export const IDEMPOTENCY_KEY_PATTERN =
  '^(?:[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}|"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")$';

export const BundleRef = Type.Object(
  { bundle_id: Type.String({ minLength: 1 }), revision: Type.String({ minLength: 1 }) },
  { additionalProperties: false },
);
export type BundleRef = Static<typeof BundleRef>;

/** What a submission (`respond-async`) carries beside the request (DESIGN.md "Queued invocations"); not its identity. */
export const QueueFields = {
  priority: Type.Optional(Type.Integer({ minimum: -1000, maximum: 1000, description: "higher runs first (default 0); with Prefer: respond-async" })),
  deadline_s: Type.Optional(Type.Integer({ minimum: 1, maximum: 2592000, description: "how long it may wait queued (default: the node's queue.deadlineS); with Prefer: respond-async" })),
  labels: Type.Optional(Type.Record(Type.String({ minLength: 1, maxLength: 128 }), Type.String({ maxLength: 128 }), { description: "labels the node that runs it must have; with Prefer: respond-async" })),
};

/** The request of an invocation. Its canonical JSON is the request identity. */
export const InvokeBody = Type.Object(
  {
    provider: ProviderName,
    prompt: Type.String({ minLength: 1 }),
    bundle: Type.Optional(BundleRef),
    workspace: Type.Optional(Type.String({ minLength: 1 })),
    base: Type.Optional(Type.String({ minLength: 1, maxLength: 256, description: "a git workspace's ref or commit the run starts from (default: its HEAD at claim)" })),
    timeout_s: Type.Optional(Type.Integer({ minimum: 1 })),
    /** lowers the node's per-run budget (DESIGN.md "Spend"); more than it allows is refused */
    budget: Type.Optional(
      Type.Object(
        {
          input_tokens: Type.Optional(Type.Integer({ minimum: 1 })),
          output_tokens: Type.Optional(Type.Integer({ minimum: 1 })),
          cost_usd: Type.Optional(Type.Number({ exclusiveMinimum: 0 })),
          wall_s: Type.Optional(Type.Integer({ minimum: 1 })),
          turns: Type.Optional(Type.Integer({ minimum: 1 })),
        },
        { additionalProperties: false },
      ),
    ),
    ...QueueFields,
  },
  { additionalProperties: false },
);
export type InvokeBody = Static<typeof InvokeBody>;

export const InvokeHeaders = Type.Object({
  "idempotency-key": Type.String({ pattern: IDEMPOTENCY_KEY_PATTERN, description: "UUID naming this invocation within the caller's scope" }),
  prefer: Type.Optional(Type.String({ description: "`wait=<seconds>`: answer with the result if the run ends within that time; `respond-async`: submit to the queue and answer 202 queued at once" })),
  traceparent: Type.Optional(Type.String({ description: "W3C Trace Context: the run's `invoke_agent` span becomes this span's child (an invalid one is ignored); not part of the request's identity" })),
  tracestate: Type.Optional(Type.String({ description: "W3C Trace Context vendor state, carried with `traceparent`" })),
});
export type InvokeHeaders = Static<typeof InvokeHeaders>;

export const JournalSeal = Type.Object({ entries: Count, tail_hash: Hex64, bytes: Count, sha256: Digest });
export const Finding = Type.Object({
  reason: Type.String(),
  effect_id: Type.Optional(Type.String()),
  seq: Type.Optional(Count),
});

export const SnapshotAudit = Type.Object({ run_id: Uuid, entries: Count, tail_hash: Hex64, bytes: Count });
export const ClaimSnapshot = Type.Object({
  scope: Type.String(),
  id: Type.String(),
  request_hash: Digest,
  agent: Type.String(),
  claim_hash: Digest,
  journal_hash: Type.Union([Digest, Type.Null()]),
  audit: SnapshotAudit,
});
export type ClaimSnapshot = Static<typeof ClaimSnapshot>;

export const Evidence = Type.Object({ reference: Type.String({ minLength: 1 }), sha256: Digest }, { additionalProperties: false });

/** An operator's review of an unresolved invocation. */
export const Review = Type.Object(
  {
    snapshot_hash: Digest,
    outcome: Type.Union([Type.Literal("completed"), Type.Literal("failed"), Type.Literal("no_effects")]),
    rationale: Type.String({ minLength: 1 }),
    evidence: List(Evidence, { minItems: 1, maxItems: 32 }),
    effects_stopped: Type.Literal(true),
  },
  { additionalProperties: false },
);
export type Review = Static<typeof Review>;

export const ReconciliationReceipt = Type.Object({
  v: Type.Literal(1),
  snapshot: ClaimSnapshot,
  review: Review,
  operator: Type.String(),
  recorded_at: Timestamp,
  key_id: Type.String(),
  sig: Type.String(),
});
export type ReconciliationReceipt = Static<typeof ReconciliationReceipt>;

/** The statuses a list of invocations can ask for. */
export const ListStatus = Type.Union([
  Type.Literal("in_progress"),
  Type.Literal("awaiting_approval"),
  Type.Literal("unresolved"),
  Type.Literal("recorded"),
  Type.Literal("reconciled"),
  Type.Literal("queued"),
  Type.Literal("cancelled"),
  Type.Literal("expired"),
  Type.Literal("refused"),
]);

/** `running` is only ever an answer (see InvocationView), never a status listed. */
export const InvocationStatus = Type.Union([Type.Literal("running"), ...ListStatus.anyOf]);
export type InvocationStatus = Static<typeof InvocationStatus>;

/** The fields of a submitted invocation not started (queued, cancelled, expired, refused). */
const QueuedFields = {
  queued_at: Type.Optional(Timestamp),
  priority: Type.Optional(Type.Integer()),
  deadline_at: Type.Optional(Timestamp),
  principal: Type.Optional(Type.String()),
  workspace: Type.Optional(Type.String()),
  provider: Type.Optional(Type.String()),
  cancelled_by: Type.Optional(Type.String()),
  error: Type.Optional(Type.String()),
};

/**
 * An invocation as the API shows it. `running` is the answer to the caller that just started
 * the run (202); everyone else sees `in_progress` until it ends.
 */
export const InvocationView = Type.Object({
  scope: Type.String(),
  id: Type.String(),
  status: InvocationStatus,
  run_id: Type.Optional(Uuid),
  agent: Type.Optional(Type.String()),
  /** the recorded result (absent when retention pruned it: `expired: true`) */
  result: Type.Optional(Json),
  result_hash: Type.Optional(Digest),
  expired: Type.Optional(Type.Boolean()),
  journal: Type.Optional(JournalSeal),
  reasons: Type.Optional(List(Type.String())),
  findings: Type.Optional(List(Finding)),
  receipt: Type.Optional(ReconciliationReceipt),
  ...QueuedFields,
  /** a run awaiting approval: the call it waits on (DESIGN.md "Governed tool calls") */
  parked: Type.Optional(
    Type.Object({ call_id: Type.String(), tool: Type.String(), policies: List(Type.String()), deadline: Timestamp }),
  ),
});
export type InvocationView = Static<typeof InvocationView>;

/** An operator's answer to a run awaiting approval. */
export const ApprovalBody = Type.Object(
  {
    decision: Type.Union([Type.Literal("allow"), Type.Literal("deny")]),
    reason: Type.Optional(Type.String({ minLength: 1, maxLength: 4096 })),
  },
  { additionalProperties: false },
);
export type ApprovalBody = Static<typeof ApprovalBody>;

export const InvocationParams = Type.Object(
  { scope: Type.String({ minLength: 1, maxLength: 256 }), id: Uuid },
  { additionalProperties: false },
);
export type InvocationParams = Static<typeof InvocationParams>;

/** The statuses listed from the queue rather than the claims. */
export const QUEUE_LIST_STATUSES = ["queued", "cancelled", "expired", "refused"] as const;

export const InvocationListQuery = Type.Object(
  {
    status: Type.Optional(ListStatus),
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 1000 })),
    cursor: Type.Optional(Type.String({ minLength: 1, maxLength: 2048 })),
  },
  { additionalProperties: false },
);
export type InvocationListQuery = Static<typeof InvocationListQuery>;

export const InvocationSummary = Type.Object({
  scope: Type.String(),
  id: Type.String(),
  status: ListStatus,
  /** run_id, agent and created_at are absent only for a row too damaged to read (see problem) */
  run_id: Type.Optional(Uuid),
  agent: Type.Optional(Type.String()),
  created_at: Type.Optional(Timestamp),
  expired: Type.Optional(Type.Boolean()),
  /** the error code of a row that fails its integrity check: it is never replayed or re-run */
  problem: Type.Optional(Type.String()),
  ...QueuedFields,
});
export type InvocationSummary = Static<typeof InvocationSummary>;

export const InvocationList = Type.Object({
  items: List(InvocationSummary),
  /** pass as `cursor` to get the next page; absent on the last one */
  cursor: Type.Optional(Type.String()),
});
export type InvocationList = Static<typeof InvocationList>;

export const VerifyErrorView = Type.Object({
  seq: Type.Union([Count, Type.Null()]),
  line: Type.Integer({ minimum: 1 }),
  code: Type.String(),
  reason: Type.String(),
});

export const JournalReport = Type.Object({
  present: Type.Boolean(),
  ok: Type.Boolean(),
  entries: Count,
  first_error: Type.Optional(VerifyErrorView),
  incomplete_tail: Type.Boolean(),
  requires_reconciliation: Type.Boolean(),
  findings: List(Finding),
  termination: Type.Optional(Type.String()),
  result_hash: Type.Optional(Digest),
  open_effects: List(Type.String()),
  effects: Count,
  /** the agent's pid and host, as the node noted them once it started */
  agent_process: Type.Optional(Type.Object({ pid: Count, host: Type.String() })),
  /** the kernel killed processes of the run at its memory bound (its control group's) */
  memory_bound: Type.Optional(Type.Object({ bytes: Type.Union([Count, Type.Null()]), processes_killed: Count })),
});

/**
 * A run's agent processes a node killed: at its start, because the node that had started them was
 * gone; or, with `reason: "shutdown"`, at its own shutdown, because they outlived the grace period.
 */
export const AgentStop = Type.Object({
  at: Timestamp,
  killed: List(Type.Integer({ minimum: 1 })),
  by: Type.Object({ pid: Type.Integer({ minimum: 1 }), host: Type.String() }),
  node_pid: Type.Optional(Type.Integer({ minimum: 1 })),
  reason: Type.Optional(Type.Literal("shutdown")),
});

export const Inspection = Type.Object({
  snapshot: ClaimSnapshot,
  snapshot_hash: Digest,
  report: Type.Object({
    status: ListStatus,
    journal: JournalReport,
    /** recorded on the home of the node that killed them (the one that restarted after the run's node died, or the run's own node at shutdown) */
    agent_stopped: Type.Optional(List(AgentStop)),
    /** an unresolved run's worktree as it stands, stored as a change set (shaped as a run.changes event) */
    changes: Type.Optional(Json),
  }),
});
export type Inspection = Static<typeof Inspection>;

export const ReconcileReply = Type.Object({ receipt: ReconciliationReceipt });
export type ReconcileReply = Static<typeof ReconcileReply>;
