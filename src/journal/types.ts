/**
 * The journal's data model (DESIGN.md "Journal") and the store interface a backend implements.
 * The domain code (writer, verifier, inspector) depends only on these types.
 */
import type { Digest } from "../core/digest.js";
import type { JsonValue } from "../core/canonical.js";

export const JOURNAL_VERSION = 1 as const;
/** Domain separation prefix of every journal signature. */
export const JOURNAL_SIGNING_PREFIX = "warden-journal-v1\n";
export const ZERO_HASH = "0".repeat(64);

export type EffectKind = "process" | "tool" | "file" | "network" | "delegation" | "inference" | "delivery";
export const EFFECT_KINDS: readonly EffectKind[] = ["process", "tool", "file", "network", "delegation", "inference", "delivery"];
export type EffectOutcome = "succeeded" | "failed" | "unknown";
export const EFFECT_OUTCOMES: readonly EffectOutcome[] = ["succeeded", "failed", "unknown"];
export type TerminationReason = "completed" | "failed" | "stopped" | "cancelled" | "timeout" | "crashed";
export const TERMINATION_REASONS: readonly TerminationReason[] = ["completed", "failed", "stopped", "cancelled", "timeout", "crashed"];

export interface InvocationRef {
  readonly scope: string;
  readonly id: string;
  readonly request_hash: Digest;
}

export interface RunStartedEvent {
  readonly type: "run.started";
  readonly invocation: InvocationRef;
  readonly agent: string;
  readonly provider?: string;
  readonly bundle?: JsonValue;
  /** `{profile, digest}`: how the run was confined (DESIGN.md "Confinement") */
  readonly isolation?: JsonValue;
  /** `{schema, digest}`: the tool policy the run's calls were decided by (DESIGN.md "Governed tool calls") */
  readonly policy?: JsonValue;
  /** the commit id a git workspace's run started from (DESIGN.md "Change sets") */
  readonly base?: string;
}
export interface EffectStartedEvent {
  readonly type: "effect.started";
  readonly effect_id: string;
  readonly kind: EffectKind;
  readonly name: string;
  readonly fingerprint: string;
}
export interface EffectFinishedEvent {
  readonly type: "effect.finished";
  readonly effect_id: string;
  readonly outcome: EffectOutcome;
  readonly detail?: JsonValue;
}
export const POLICY_DECISIONS = ["allow", "deny", "ask"] as const;
/** A tool call's decision by the run's policy, journaled (durable) before the CLI is answered. */
export interface PolicyDecisionEvent {
  readonly type: "policy.decision";
  /** the effect id the call's effect.started carries */
  readonly call_id: string;
  readonly tool: string;
  readonly action: string;
  readonly decision: (typeof POLICY_DECISIONS)[number];
  /** the ids of the policies that decided it */
  readonly policies: readonly string[];
  /** the digest of the call as the CLI's hook described it: `{name, input}` */
  readonly fingerprint: string;
  readonly reason?: string;
}
/**
 * The run waits for an operator's answer to a call its policy decided `ask` (DESIGN.md "Governed
 * tool calls"): the agent's process is gone (every effect finished), and what a node needs to go on
 * with the same CLI session is here.
 */
export interface RunParkedEvent {
  readonly type: "run.parked";
  /** the call decided `ask` (its policy.decision's call_id) */
  readonly call_id: string;
  readonly tool: string;
  /** the policies that asked */
  readonly policies: readonly string[];
  /** RFC 3339 UTC: past it, no answer is a denial */
  readonly deadline: string;
  /** the CLI's session id, resumed on approval */
  readonly session: string;
  /** the workspace id the run ran in */
  readonly workspace: string;
}
export const APPROVAL_DECISIONS = ["allow", "deny"] as const;
/** An operator's answer (or the deadline's) to a parked call. */
export interface PolicyApprovalEvent {
  readonly type: "policy.approval";
  readonly call_id: string;
  readonly decision: (typeof APPROVAL_DECISIONS)[number];
  /** who decided: a token's name and role, or the node (`{name: "deadline", role: "node"}`) */
  readonly by: { readonly name: string; readonly role: string };
  readonly reason?: string;
}
/** An observation with no effect; any JSON fields beside `type`, at most 64 KiB canonical. */
export interface NoteEvent {
  readonly type: "note";
  readonly [field: string]: JsonValue;
}
export interface RunTerminatedEvent {
  readonly type: "run.terminated";
  readonly reason: TerminationReason;
  readonly result_hash?: Digest;
}
/**
 * What the run spent, as the node metered it from the usage its CLI reported (DESIGN.md "Journal"):
 * at most once, before run.terminated.
 */
export interface RunSpendEvent {
  readonly type: "run.spend";
  readonly tokens: { readonly input: number; readonly output: number };
  /** estimated cost in millionths of a US dollar, from the price table named by `prices` */
  readonly cost_usd_micros: number;
  readonly turns: number;
  readonly wall_ms: number;
  /** sha256 of the canonical JSON of the price table the cost was estimated with */
  readonly prices: Digest;
  /** the limit the run crossed, when the node stopped it for it */
  readonly breached?: string;
}
/** A file as `run.changes` lists it (DESIGN.md "Change sets"). */
export interface RunChangesFileEntry {
  readonly path: string;
  readonly old_path: string | null;
  readonly status: "added" | "modified" | "deleted" | "renamed";
  readonly old_sha256: Digest | null;
  readonly new_sha256: Digest | null;
  readonly lines_added: number | null;
  readonly lines_deleted: number | null;
}
/**
 * What a run changed in its git worktree: the stored change set's digest and its files (cut to fit
 * when there are many; `files_total` counts them all), or why no change set could be made.
 */
export type RunChangesEvent =
  | {
      readonly type: "run.changes";
      readonly base: string;
      readonly change_set: Digest;
      readonly no_changes: boolean;
      readonly files_total: number;
      readonly files: readonly RunChangesFileEntry[];
    }
  | { readonly type: "run.changes"; readonly base: string; readonly error: { readonly code: string; readonly detail: string } };
export type JournalEvent = RunStartedEvent | EffectStartedEvent | EffectFinishedEvent | PolicyDecisionEvent | RunParkedEvent | PolicyApprovalEvent | NoteEvent | RunSpendEvent | RunChangesEvent | RunTerminatedEvent;

export interface JournalEntry {
  readonly v: typeof JOURNAL_VERSION;
  readonly run_id: string;
  readonly seq: number;
  /** lowercase hex sha256 of the previous line's bytes including its newline; 64 zeros at seq 0 */
  readonly prev: string;
  /** RFC 3339 UTC with milliseconds */
  readonly ts: string;
  readonly key_id: string;
  readonly event: JournalEvent;
}

/** A public key the verifier trusts. */
export interface PublicKeyRecord {
  readonly key_id: string;
  /** standard base64 of the raw 32-byte Ed25519 public key */
  readonly public_key: string;
}

/**
 * How durable an append must be before it resolves. `sync: false` lets the store resolve once the
 * line is written in order, leaving it durable with the next synced append of the run or with
 * `close`; a store may ignore the hint and make every line durable before resolving.
 */
export interface AppendOptions {
  readonly sync?: boolean;
}

/**
 * Where one run's journal lines are kept. `append` resolves only once the line is durable (unless
 * `sync: false`, see AppendOptions); a synced append also makes every earlier line of the run
 * durable, and `close` makes every line written durable. Implementations may share flushes between
 * concurrent appends (group commit) but never resolve a synced append before the bytes are on disk.
 */
export interface JournalAppender {
  append(line: Uint8Array, options?: AppendOptions): Promise<void>;
  /** bytes durably appended so far */
  readonly size: number;
  /**
   * Optional, before close: exactly what the store's `read(runId, maxBytes)` would answer now,
   * answered more cheaply through the appender's own handle on the journal.
   */
  read?(maxBytes: number): Promise<Uint8Array | undefined>;
  close(): Promise<void>;
  /**
   * Optional: closes and removes a journal nothing was ever appended to (a run that turned out not
   * to be this caller's). Without it, the empty journal is only closed: no claim names its run id.
   */
  discard?(): Promise<void>;
}

/**
 * A stored journal as a replay compares it with its seal, computed where the bytes are kept: its
 * length, its sha256 and its last line. A journal over the bound answers either a length past it
 * (the bound plus one line at most) or journal-too-large, as `read` would.
 */
export interface JournalDigest {
  readonly bytes: number;
  readonly sha256: Digest;
  /** the end of the journal holding at least its last line, newline included (empty when none) */
  readonly tail: Uint8Array;
}

export interface JournalStore {
  /** Creates the journal of a new run; fails if one exists for run_id. */
  create(runId: string): Promise<JournalAppender>;
  /**
   * Optional: appends to an existing journal again, after its last byte (a parked run going on,
   * DESIGN.md "Governed tool calls"). A store without it cannot park runs: `ask` is then a denial.
   */
  reopen?(runId: string): Promise<JournalAppender>;
  /** The raw bytes of a run's journal, refusing more than maxBytes; undefined when none exists. */
  read(runId: string, maxBytes: number): Promise<Uint8Array | undefined>;
  /**
   * The bytes of a run's journal from byte `offset` on (none when it is not longer than that),
   * refusing a journal of more than maxBytes as `read` does; undefined when none exists. A reader
   * that follows a growing journal (the live event stream) reads each byte once instead of the
   * whole journal on every append.
   */
  readFrom(runId: string, offset: number, maxBytes: number): Promise<Uint8Array | undefined>;
  /**
   * Optional: the digest of a run's journal (lines starting within maxBytes), undefined when none
   * exists. A store whose bytes are remote offers it so a replay need not move the whole journal
   * to hash it; without it, replays `read` the bytes.
   */
  digest?(runId: string, maxBytes: number): Promise<JournalDigest | undefined>;
  exists(runId: string): Promise<boolean>;
}

/** Where the node's signing keys are kept. */
export interface KeyStore {
  /** The active signing key, created on first use (concurrent first uses end with one key). */
  active(): Promise<SigningKey>;
  /** Adds a new key and makes it active; old public keys stay for verification. */
  rotate(): Promise<SigningKey>;
  /** Every public key ever used by this node, oldest first. */
  publicKeys(): Promise<readonly PublicKeyRecord[]>;
}

export interface SigningKey {
  readonly key_id: string;
  readonly public_key: string;
  sign(message: Uint8Array): Uint8Array;
  /** The same signature, possibly made off the event loop; writers use it when present. */
  signAsync?(message: Uint8Array): Promise<Uint8Array>;
}
