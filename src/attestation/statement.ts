/**
 * The in-toto Statement v1 a node signs about a run (DESIGN.md "Attestations"): its subject is the
 * run's change set, its predicate (`RUN_PREDICATE_TYPE`) what the change set came from — the base
 * commit, the bundle, the provider, the confinement and policy, the journal and its log leaf.
 * Pure: the facade gathers the facts, this builds the bytes.
 */
import { canonicalJson, type JsonValue } from "../core/canonical.js";
import { digestHex, type Digest } from "../core/digest.js";

export const STATEMENT_TYPE = "https://in-toto.io/Statement/v1";
export const RUN_PREDICATE_TYPE = "https://warden.dev/attestation/run/v1";

export interface AttestedBundle {
  readonly bundle_id: string;
  readonly revision: string;
  readonly bundle_digest: string;
  readonly manifest_digest: string;
  /** `run.started.bundle.signers` as journaled (principals as the trust policy saw them at start) */
  readonly signers?: JsonValue;
}

/** Everything the predicate names; members the run lacks are absent, never null. */
export interface RunPredicate {
  readonly run_id: string;
  readonly invocation: { readonly scope: string; readonly id: string; readonly request_hash: string };
  /** `run.terminated.reason`; absent for a run that never terminated (unresolved) */
  readonly termination?: string;
  readonly changes: {
    readonly digest: Digest;
    /** the commit the run's worktree was made at; absent for a plain-directory workspace */
    readonly base_commit?: string;
    readonly files: number;
  };
  readonly bundle?: AttestedBundle;
  readonly provider?: { readonly name: string; readonly cli_version?: string };
  readonly isolation?: { readonly kind?: string; readonly digest: string };
  readonly policy?: { readonly digest: string };
  readonly journal: {
    readonly key_id: string;
    readonly entries: number;
    /** lowercase hex sha256 of the journal's last line, newline included (the head of its hash chain) */
    readonly head: string;
  };
  readonly log?: {
    readonly origin: string;
    readonly index: number;
    /** RFC 6962 leaf hash `SHA-256(0x00 ‖ leaf)`, lowercase hex */
    readonly leaf_hash: string;
    /** the leaf's statement type: `run.sealed` (a recorded run) or `run.reconciled` */
    readonly statement: string;
  };
}

export interface RunStatement {
  readonly _type: typeof STATEMENT_TYPE;
  readonly subject: readonly [{ readonly name: string; readonly digest: { readonly sha256: string } }];
  readonly predicateType: typeof RUN_PREDICATE_TYPE;
  readonly predicate: RunPredicate;
}

/** The subject's name: the change set, by the run that produced it. */
export function changeSetSubjectName(runId: string): string {
  return `warden:run/${runId}/changes`;
}

export function runStatement(predicate: RunPredicate): RunStatement {
  return {
    _type: STATEMENT_TYPE,
    subject: [{ name: changeSetSubjectName(predicate.run_id), digest: { sha256: digestHex(predicate.changes.digest) } }],
    predicateType: RUN_PREDICATE_TYPE,
    predicate,
  };
}

/** The DSSE payload: the UTF-8 bytes of the statement's RFC 8785 serialization, no trailing newline. */
export function statementPayload(statement: RunStatement): Buffer {
  return Buffer.from(canonicalJson(statement), "utf8");
}
