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

/** POST /v1/stages: 201 a stage to upload into, or 200 the manifest already committed. */
export type BeginStageReply = StageBegun | StageCommitted;

export function isCommitted(reply: BeginStageReply): reply is StageCommitted {
  return "committed" in reply && reply.committed === true;
}

/** The request of an invocation (`provider` typed from the providers module's own list). */
export type InvokeBody = Omit<InvokeBodySchema, "provider"> & { readonly provider: ProviderName };
