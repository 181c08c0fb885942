/**
 * What `open`, `lookup`, `run`, `inspect` and `reconcile` answer (DESIGN.md "Invocation identity
 * and outcomes"). `conflict` is not an outcome: it is a ConflictError (`idempotency-conflict`).
 */
import type { JsonValue } from "../core/canonical.js";
import type { Digest } from "../core/digest.js";
import type { EffectKind, RunChangesEvent, RunParkedEvent, TerminationReason } from "../journal/types.js";
import type { AgentProcess, MemoryBound, ReconciliationFinding } from "../journal/inspect.js";
import type { VerifyError } from "../journal/verify.js";
import type { JournalSeal } from "./claim-store.js";

/** Why a claim reads `unresolved`. Journal findings come from the inspector (journal/inspect.ts). */
export type UnresolvedReason =
  /** the process that held the run died (its owner lock is free) */
  | "owner-gone"
  /** the owner gave the run up without a result (release, dispose, a finish that was not clean) */
  | "released"
  /** a recorded run's journal no longer matches the seal stored with its result */
  | "journal-changed"
  /** finish found the journal not clean; `findings` says why */
  | "journal-not-clean"
  /** writing the journal failed, so what the run did is not fully known */
  | "journal-write-failed";

/**
 * The audit reference of a claim: which run (and journal) it belongs to. `journal` is the seal
 * stored with a recorded result; `reasons`/`findings` explain an `unresolved` claim.
 */
export interface Audit {
  readonly run_id: string;
  readonly agent: string;
  readonly journal?: JournalSeal;
  readonly reasons?: readonly UnresolvedReason[];
  readonly findings?: readonly ReconciliationFinding[];
}

export interface InProgressOutcome {
  readonly status: "in_progress";
}
export interface UnresolvedOutcome {
  readonly status: "unresolved";
  readonly audit: Audit;
}
export interface RecordedOutcome {
  readonly status: "recorded";
  readonly audit: Audit;
  /** absent when retention pruned the payload (`expired: true`) */
  readonly result?: JsonValue;
  readonly result_hash: Digest;
  readonly expired: boolean;
  /** true when this answer is a stored result, false for the run that just recorded it */
  readonly replayed: boolean;
}
/**
 * The run waits for an operator's approval of a call its policy decided `ask` (DESIGN.md "Governed
 * tool calls"): no agent process, nothing in flight; the journal's last entry is `parked`.
 */
export interface AwaitingApprovalOutcome {
  readonly status: "awaiting_approval";
  readonly audit: Audit;
  readonly parked: RunParkedEvent;
}
export interface ReconciledOutcome {
  readonly status: "reconciled";
  readonly audit: Audit;
  readonly receipt: ReconciliationReceipt;
}

export type ExistingOutcome = InProgressOutcome | AwaitingApprovalOutcome | UnresolvedOutcome | RecordedOutcome | ReconciledOutcome;
export type ExistingStatus = ExistingOutcome["status"];
/** What a handle's `finish` ends in. */
export type FinishOutcome = RecordedOutcome | UnresolvedOutcome;

export interface OpenOptions {
  /** journaled in run.started */
  readonly provider?: string;
  /** journaled in run.started */
  readonly bundle?: JsonValue;
  /** journaled in run.started: `{profile, digest}` of the run's confinement (DESIGN.md "Confinement") */
  readonly isolation?: JsonValue;
  /** journaled in run.started: `{schema, digest}` of the tool policy governing the run (DESIGN.md "Governed tool calls") */
  readonly policy?: JsonValue;
  /** journaled in run.started: the commit a git workspace's run starts from (DESIGN.md "Change sets") */
  readonly base?: string;
  /**
   * The caller read `(scope, id)` as absent just before (the facade's replay check): the claim's
   * insert is then the first statement. Otherwise `open` reads the id first, so that a replay
   * writes nothing.
   */
  readonly lookedUp?: boolean;
  /**
   * The run starts a queued invocation this node leased (ClaimOptions.dequeued): the claim is
   * written only while the lease holds, and always attempted (an existing claim is answered by it).
   */
  readonly dequeued?: boolean;
}

export interface EffectSpec {
  readonly kind: EffectKind;
  readonly name: string;
  /** what identifies this effect's input (e.g. a digest of the command and arguments) */
  readonly fingerprint: string;
  /** defaults to a fresh UUID */
  readonly effect_id?: string;
}

export interface FinishOptions {
  /** journal the run as terminated `failed` (a clean, recordable failure) instead of `completed` */
  readonly failed?: boolean;
  /**
   * journal the run as terminated `stopped`: the node ended it between tool calls (its budget was
   * spent), a known outcome recorded like a failure. Over `failed`.
   */
  readonly stopped?: boolean;
}

export interface ReleaseOptions {
  /** journal run.terminated with this reason before giving the claim up */
  readonly reason?: Exclude<TerminationReason, "completed">;
}

/** Where the journal of a claim stands, as an operator reviews it. Deterministic. */
export interface SnapshotAudit {
  readonly run_id: string;
  /** verified entries (0 when the journal is missing) */
  readonly entries: number;
  readonly tail_hash: string;
  /** byte length of the journal file (0 when missing) */
  readonly bytes: number;
}

export interface ClaimSnapshot {
  readonly scope: string;
  readonly id: string;
  readonly request_hash: Digest;
  readonly agent: string;
  readonly claim_hash: Digest;
  /** sha256 of the whole journal file; null when there is none */
  readonly journal_hash: Digest | null;
  readonly audit: SnapshotAudit;
}

export type ReviewOutcome = "completed" | "failed" | "no_effects";

export interface Evidence {
  readonly reference: string;
  readonly sha256: Digest;
}

/** An operator's review of an unresolved claim. */
export interface Review {
  readonly snapshot_hash: Digest;
  readonly outcome: ReviewOutcome;
  readonly rationale: string;
  readonly evidence: readonly Evidence[];
  readonly effects_stopped: true;
}

/** The signed part of a receipt. */
export interface ReceiptBody {
  readonly v: 1;
  readonly snapshot: ClaimSnapshot;
  readonly review: Review;
  readonly operator: string;
  /** RFC 3339 UTC */
  readonly recorded_at: string;
}

/** A node-signed reconciliation receipt: the body plus the key and Ed25519 signature over it. */
export interface ReconciliationReceipt extends ReceiptBody {
  readonly key_id: string;
  /** standard base64 of the signature over "warden-reconciliation-v1\n" + canonical JSON of the body */
  readonly sig: string;
}

export interface JournalReport {
  /** the journal file exists */
  readonly present: boolean;
  readonly ok: boolean;
  readonly entries: number;
  readonly first_error?: VerifyError;
  readonly incomplete_tail: boolean;
  readonly requires_reconciliation: boolean;
  readonly findings: readonly ReconciliationFinding[];
  readonly termination?: TerminationReason;
  readonly result_hash?: Digest;
  readonly open_effects: readonly string[];
  readonly effects: number;
  /** the agent's pid and host, as noted once it started */
  readonly agent_process?: AgentProcess;
  /** the kernel killed processes of the run at its memory bound */
  readonly memory_bound?: MemoryBound;
}

export interface InspectionReport {
  readonly status: ExistingStatus;
  readonly journal: JournalReport;
  /** the run's agent processes a node killed because the node that started them had died (node-local records) */
  readonly agent_stopped?: readonly AgentStop[];
  /** an unresolved run's worktree as it stands, stored as a change set (DESIGN.md "Change sets") */
  readonly changes?: RunChangesEvent;
}

/**
 * A run's agent processes a node killed: at its start, because the node that started them was
 * gone; or (`reason: "shutdown"`) at its own shutdown, because they outlived the grace period.
 */
export interface AgentStop {
  /** RFC 3339 UTC, when they were killed */
  readonly at: string;
  /** the pids sent SIGKILL */
  readonly killed: readonly number[];
  /** the node that killed them (it opened on the home after the other died) */
  readonly by: { readonly pid: number; readonly host: string };
  /** the pid of the node that had started them (the dead one, when their tag said; the killer itself at shutdown) */
  readonly node_pid?: number;
  /** absent: the node that started them had died; "shutdown": that node killed them as it shut down */
  readonly reason?: "shutdown";
}

export interface Inspection {
  readonly snapshot: ClaimSnapshot;
  readonly snapshot_hash: Digest;
  readonly report: InspectionReport;
}

export interface ReconcileResult {
  readonly receipt: ReconciliationReceipt;
  /** true when this exact review had been recorded before and its receipt is returned again */
  readonly replayed: boolean;
}

export interface ClaimSummary {
  readonly scope: string;
  readonly id: string;
  readonly status: ExistingStatus;
  /** run_id, agent and created_at are absent only for a row too damaged to read (see `problem`) */
  readonly run_id?: string;
  readonly agent?: string;
  /** RFC 3339 UTC */
  readonly created_at?: string;
  readonly expired?: boolean;
  /** the error code, when the row fails its integrity check: it is never replayed or re-run */
  readonly problem?: string;
}

export interface ListQuery {
  readonly status?: ExistingStatus;
  /** 1–1000, default 100 */
  readonly limit?: number;
  /** the `cursor` of the previous page */
  readonly cursor?: string;
}

export interface ListPage {
  readonly items: readonly ClaimSummary[];
  /** present when more rows may follow */
  readonly cursor?: string;
}

export interface PruneOptions {
  /** drop payloads of results recorded before this instant (default: now − resultRetentionMs) */
  readonly olderThan?: Date;
}
