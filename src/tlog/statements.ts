/**
 * The statements a node logs (DESIGN.md "Transparency"): each leaf is the RFC 8785 canonical
 * JSON of one of these objects. `key` says what a leaf is about, so each fact is logged once and
 * a verifier can ask for a run's leaf by its run id.
 */
import { canonicalJson } from "../core/canonical.js";
import type { Digest } from "../core/digest.js";
import type { LeafInput } from "./store.js";

/** A run's final seal, logged when its result is recorded. */
export interface RunSealStatement {
  readonly v: 1;
  readonly type: "run.sealed";
  readonly run_id: string;
  readonly scope: string;
  readonly id: string;
  readonly outcome: "recorded";
  readonly result_hash: Digest;
  readonly entries: number;
  readonly tail_hash: string;
  readonly bytes: number;
  readonly sha256: Digest;
}

/** An operator's reconciliation receipt for an unresolved run. */
export interface ReconciliationStatement {
  readonly v: 1;
  readonly type: "run.reconciled";
  readonly run_id: string;
  readonly scope: string;
  readonly id: string;
  readonly operator: string;
  /** sha256 of the receipt's canonical JSON, as stored with the claim */
  readonly receipt_sha256: Digest;
}

/**
 * A bundle's commit. An object, not the bare receipt, so that a later version can carry the
 * bundle's `signatures` beside the receipt without changing what the receipt fields mean.
 */
export interface BundleCommitStatement {
  readonly v: 1;
  readonly type: "bundle.committed";
  readonly bundle_id: string;
  readonly revision: string;
  readonly bundle_digest: Digest;
  readonly manifest_digest: Digest;
  /** the signers that came with the commit, as its receipt names them (absent: an unsigned commit) */
  readonly signers?: readonly { readonly principals: readonly string[]; readonly fingerprint: string; readonly key_type: string; readonly signed_at: string }[];
}

/**
 * A signature added to a committed revision after its commit (`POST …/signatures`, `warden
 * bundles sign`): the commit's leaf, logged once, cannot carry it.
 */
export interface BundleSignedStatement {
  readonly v: 1;
  readonly type: "bundle.signed";
  readonly bundle_id: string;
  readonly revision: string;
  readonly manifest_digest: Digest;
  /** `SHA256:…` of the signing key, as the catalog stores it */
  readonly fingerprint: string;
  readonly key_type: string;
  /** the principals the trust policy vouched for when the node accepted it (empty under no rule) */
  readonly principals: readonly string[];
  /** when the node accepted it (RFC 3339, ms, UTC) */
  readonly signed_at: string;
  /** `sha256:` of the armored signature's UTF-8 bytes, as stored */
  readonly signature_sha256: Digest;
}

/** A node key published (the first one at the node's first start, then each rotation). */
export interface KeyStatement {
  readonly v: 1;
  readonly type: "key.published";
  readonly key_id: string;
  readonly public_key: string;
}

export type Statement = RunSealStatement | ReconciliationStatement | BundleCommitStatement | BundleSignedStatement | KeyStatement;

/**
 * Logs a statement; resolves once it is durable in the log. `at` is when the fact it states
 * became durable where it is kept (a result's recorded_at, a commit's committed_at, a
 * signature's signed_at, ms): the log's catch-up watermark never passes a statement it could
 * not store (log.ts).
 */
export type Attest = (statement: Statement, at?: number) => Promise<unknown>;

export function statementKey(statement: Statement): string {
  switch (statement.type) {
    case "run.sealed":
      return `run:${statement.run_id}`;
    case "run.reconciled":
      return `reconciled:${statement.run_id}`;
    case "bundle.committed":
      return `bundle:${statement.bundle_id}@${statement.revision}`;
    case "bundle.signed":
      return `signed:${statement.bundle_id}@${statement.revision}/${statement.fingerprint}`;
    case "key.published":
      return `key:${statement.key_id}`;
  }
}

export function leafOf(statement: Statement): LeafInput {
  return { key: statementKey(statement), body: Buffer.from(canonicalJson(statement), "utf8") };
}
