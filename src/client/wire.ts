/**
 * The client's view of the wire: the Static types of the route schemas in src/api (the same
 * schemas the server validates with and /openapi.json is generated from), plus the unions the
 * client hands back.
 */
import type { InvokeBody as InvokeBodySchema, StageBegun, StageCommitted } from "../api/index.js";
import type { ProviderName } from "../providers/types.js";

export type { ProviderName } from "../providers/types.js";

export type {
  AttestationEnvelope,
  BundleList,
  BundleView,
  ApprovalBody,
  ClaimSnapshot,
  CommitReceipt,
  CommitReply,
  Inspection,
  InvocationList,
  InvocationListQuery,
  InvocationStatus,
  InvocationSummary,
  InvocationView,
  KeyList,
  LogStatusBody,
  RunProofBody,
  LoginLink,
  Manifest,
  NodeSummary,
  SpendToday,
  QueueSummary,
  QueuePrincipal,
  Fleet,
  FleetNode,
  OutputTail,
  RunChangeSet,
  ChangeStat,
  InvocationCounts,
  RunFailure,
  SessionView,
  MaterializationReply,
  ProviderPlans,
  RetirementReply,
  MissingBlob,
  ReconcileReply,
  ReconciliationReceipt,
  Review,
  RevisionView,
  SignerView,
  StageBegun,
  StageCommitted,
  StageStatus,
  UploadList,
  UploadProgress,
  Verification,
} from "../api/index.js";

/**
 * A begin answer as it may arrive: a node that predates `chunk_bytes` leaves it out, and what a
 * node sends there is not trusted to be the integer the schema names (see `announcedChunkBytes`).
 */
type Announced<T> = Omit<T, "chunk_bytes"> & { readonly chunk_bytes?: unknown };

/** POST /v1/stages: 201 a stage to upload into, or 200 the manifest already committed. */
export type BeginStageReply = Announced<StageBegun> | Announced<StageCommitted>;

export function isCommitted(reply: BeginStageReply): reply is Announced<StageCommitted> {
  return "committed" in reply && reply.committed === true;
}

/**
 * The node's request limit from its begin answer (the most bytes one chunk or blob pack body may
 * hold), or undefined when it names none usable: absent (an older node), or not a positive safe
 * integer. An unusable value is ignored rather than refused: the node enforces its limit either
 * way, and a request over it is answered `413 chunk-too-large` with the limit, which push already
 * adapts to; refusing would fail a push that can succeed.
 */
export function announcedChunkBytes(reply: BeginStageReply): number | undefined {
  return positiveSafeInteger(reply.chunk_bytes);
}

/** A count a node sent (a limit, a size), or undefined when it is not a positive safe integer. */
export function positiveSafeInteger(value: unknown): number | undefined {
  return typeof value === "number" && Number.isSafeInteger(value) && value > 0 ? value : undefined;
}

/** The request of an invocation (`provider` typed from the providers module's own list). */
export type InvokeBody = Omit<InvokeBodySchema, "provider"> & { readonly provider: ProviderName };
