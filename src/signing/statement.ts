/**
 * The statement a publisher signs for a bundle revision (DESIGN.md "Bundle signatures"): the
 * RFC 8785 JSON of {v, bundle_id, revision, bundle_digest, manifest_digest}, as UTF-8 bytes, signed
 * as an SSHSIG message in namespace `warden-bundle`. It binds the name, the revision and the
 * content: a signature cannot be moved to another bundle, revision or content.
 */
import { canonicalJson } from "../core/canonical.js";

export const SIGNATURE_NAMESPACE = "warden-bundle";
export const STATEMENT_VERSION = 1;

export interface StatementSubject {
  readonly bundle_id: string;
  readonly revision: string;
  readonly bundle_digest: string;
  readonly manifest_digest: string;
}

export function bundleStatement(subject: StatementSubject): string {
  return canonicalJson({
    v: STATEMENT_VERSION,
    bundle_id: subject.bundle_id,
    revision: subject.revision,
    bundle_digest: subject.bundle_digest,
    manifest_digest: subject.manifest_digest,
  });
}
