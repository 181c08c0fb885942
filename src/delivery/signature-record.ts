/**
 * Bundle signatures as both backends store them: one row per (revision, signing key), written
 * with the commit or added later, never changed. A row is checked as it is read back (a damaged
 * one is `delivery-record-corrupt`, never a signer the node did not accept); the signature itself
 * is re-verified against its revision by the trust policy each time the revision is used.
 */
import { IntegrityError } from "../core/errors.js";
import { isTime } from "../core/limits.js";
import type { BundleSignature } from "../signing/policy.js";

export interface StoredSignature extends BundleSignature {
  /** accepted with the commit (the receipt names it), not added later */
  readonly at_commit: boolean;
}

export interface SignatureRow {
  fingerprint: string;
  key_type: string;
  principals: string;
  signature: string;
  signed_at: number | string;
  at_commit: number | boolean;
}

export function signatureOf(row: SignatureRow, where: string): StoredSignature {
  const signedAt = Number(row.signed_at);
  let principals: unknown;
  try {
    principals = JSON.parse(row.principals);
  } catch {
    principals = undefined;
  }
  if (!Array.isArray(principals) || !principals.every((p) => typeof p === "string") || !isTime(signedAt) || !/^SHA256:[A-Za-z0-9+/]{43}$/.test(row.fingerprint)) {
    throw new IntegrityError("delivery-record-corrupt", `a stored signature of ${where} is damaged`, { status: 500, details: { where } });
  }
  return {
    fingerprint: row.fingerprint,
    key_type: row.key_type,
    principals: principals as string[],
    signature: row.signature,
    signed_at: signedAt,
    at_commit: row.at_commit === true || row.at_commit === 1,
  };
}

/** The row values of a signature, in the column order both stores insert them. */
export function signatureValues(s: StoredSignature): [string, string, string, string, number, number] {
  return [s.fingerprint, s.key_type, JSON.stringify(s.principals), s.signature, s.signed_at, s.at_commit ? 1 : 0];
}
