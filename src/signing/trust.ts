/**
 * Who signed, by an allowed_signers file: the principals a verified signature speaks for at a
 * given time, and whether a set of signatures meets a rule's requirement (any of, all of, k of
 * the named principals, each by a different key).
 */
import { matchPatternList, type AllowedSigners } from "./allowed-signers.js";
import { checkCertificate, SshKeyError, SshSignatureError, type SshPublicKey } from "./ssh-key.js";
import { SIGNATURE_NAMESPACE } from "./statement.js";

/** How one signature's key stands in the file at a time. */
export type SignerStanding =
  | { readonly status: "trusted"; readonly principals: readonly string[]; readonly patterns: readonly string[] }
  | { readonly status: "expired" | "not-yet-valid" | "untrusted"; readonly patterns: readonly string[] };

/**
 * The lines of `allowed` that vouch for `key` (a plain key listed as itself, or a certificate
 * whose CA is listed with cert-authority) in namespace warden-bundle at `atSeconds`.
 * `patterns` are the principals fields of the lines that vouch; `principals` what a receipt shows
 * (a certificate's own principals the line admits, or the line's field).
 */
export function standingOf(allowed: AllowedSigners, key: SshPublicKey, atSeconds: number): SignerStanding {
  const principals: string[] = [];
  const patterns: string[] = [];
  let timeFailure: "expired" | "not-yet-valid" | undefined;
  const candidates = [
    ...(key.cert === undefined ? (allowed.byFingerprint.get(key.key.fingerprint) ?? []).filter((l) => !l.certAuthority) : []),
    ...(key.cert !== undefined ? (allowed.byFingerprint.get(key.cert.signatureKey.fingerprint) ?? []).filter((l) => l.certAuthority) : []),
  ];
  for (const line of candidates) {
    if (line.namespaces !== undefined && !matchPatternList(SIGNATURE_NAMESPACE, line.namespaces)) continue;
    if (line.validAfter !== undefined && atSeconds < line.validAfter) {
      timeFailure ??= "not-yet-valid";
      continue;
    }
    if (line.validBefore !== undefined && atSeconds > line.validBefore) {
      timeFailure ??= "expired";
      continue;
    }
    if (key.cert === undefined) {
      principals.push(...line.principals.split(","));
      patterns.push(line.principals);
      continue;
    }
    let verdict: ReturnType<typeof checkCertificate>;
    try {
      verdict = checkCertificate(key, atSeconds);
    } catch (error) {
      if (error instanceof SshKeyError || error instanceof SshSignatureError) continue;
      throw error;
    }
    if (verdict === "expired" || verdict === "not-yet-valid") {
      timeFailure ??= verdict;
      continue;
    }
    if (verdict !== "ok") continue;
    const admitted = key.cert.principals.filter((p) => matchPatternList(p, line.principals));
    if (admitted.length === 0) continue;
    principals.push(...admitted);
    // A certificate speaks only for the principals it names.
    patterns.push(admitted.join(","));
  }
  if (patterns.length > 0) return { status: "trusted", principals: [...new Set(principals)], patterns };
  return { status: timeFailure ?? "untrusted", patterns };
}

/** What a rule requires: `count` of `principals` (undefined: any principal of the file), each by a different key. */
export interface Requirement {
  readonly principals?: readonly string[];
  readonly count: number;
}

/**
 * Whether the trusted signers (by key fingerprint, with the principals fields that vouch for
 * them) meet `req`: a matching of required principals to distinct keys of at least `count`.
 */
export function meets(req: Requirement, signers: ReadonlyMap<string, readonly string[]>): boolean {
  if (req.principals === undefined) return signers.size >= req.count;
  const keys = [...signers.entries()];
  const owner = new Map<number, number>(); // key index -> principal index
  const canSign = (p: number, k: number): boolean => keys[k]![1].some((field) => matchPatternList(req.principals![p]!, field));
  const augment = (p: number, seen: Set<number>): boolean => {
    for (let k = 0; k < keys.length; k++) {
      if (seen.has(k) || !canSign(p, k)) continue;
      seen.add(k);
      const other = owner.get(k);
      if (other === undefined || augment(other, seen)) {
        owner.set(k, p);
        return true;
      }
    }
    return false;
  };
  let matched = 0;
  for (let p = 0; p < req.principals.length && matched < req.count; p++) if (augment(p, new Set())) matched++;
  return matched >= req.count;
}
