/**
 * The node's trust policy for bundle signatures (DESIGN.md "Bundle signatures"): rules by bundle
 * id pattern, each naming an allowed_signers file and the principals required. Checked when a
 * revision is committed or a signature added (a refusal stores nothing), and again each time a
 * revision is used (materialization, run start): a key removed from the file stops its bundles
 * from running (`bundle-signer-revoked`), without deleting anything.
 *
 * allowed_signers files are parsed once and kept while their stat identity (device, inode, size,
 * modification and change times in nanoseconds) is unchanged: any write to the file, or a new file
 * renamed over it, is seen by the next check.
 */
import { statSync, readFileSync } from "node:fs";
import { errnoCode } from "../core/errors.js";
import { matchPattern, parseAllowedSigners, type AllowedSigners } from "./allowed-signers.js";
import { allowedSignersInvalid, ALLOWED_SIGNERS_MAX_BYTES, policyRefusal, signatureInvalid, SIGNATURES_MAX, tooManySignatures } from "./signing-errors.js";
import { parseSshsig, verifySshsig, type Sshsig } from "./sshsig.js";
import { bundleStatement, SIGNATURE_NAMESPACE, type StatementSubject } from "./statement.js";
import { meets, standingOf, type Requirement, type SignerStanding } from "./trust.js";

/** One rule of `signing.rules` in warden.json. */
export interface TrustRuleConfig {
  /** bundle id pattern (`*`, `?`) */
  readonly bundles: string;
  /** path of an OpenSSH allowed_signers file */
  readonly allowed_signers: string;
  readonly any_of?: readonly string[];
  readonly all_of?: readonly string[];
  readonly k_of?: { readonly k: number; readonly principals: readonly string[] };
}

export interface SigningConfig {
  readonly rules: readonly TrustRuleConfig[];
}

/** A signature a revision carries, as stored. */
export interface BundleSignature {
  /** the armored SSHSIG */
  readonly signature: string;
  /** `SHA256:…` of the signing key (a certificate's subject key) */
  readonly fingerprint: string;
  /** the key type on the wire (a certificate type for a certificate) */
  readonly key_type: string;
  /** the principals the policy vouched for when the node accepted it; empty under no rule */
  readonly principals: readonly string[];
  /** when the node accepted it, ms since the epoch (the time allowed_signers windows are judged at) */
  readonly signed_at: number;
}

/** A signer as receipts, the catalog, the API and the journal show it. */
export interface SignerView {
  readonly principals: readonly string[];
  readonly fingerprint: string;
  readonly key_type: string;
  readonly signed_at: string;
  /** the armored SSHSIG, so anyone can check it with `ssh-keygen -Y verify` (catalog views only) */
  readonly signature?: string;
}

export function signerView(s: BundleSignature, withSignature = false): SignerView {
  return {
    principals: s.principals,
    fingerprint: s.fingerprint,
    key_type: s.key_type,
    signed_at: new Date(s.signed_at).toISOString(),
    ...(withSignature ? { signature: s.signature } : {}),
  };
}

interface Rule {
  readonly config: TrustRuleConfig;
  readonly requirement: Requirement;
}

const VERIFIED_CACHE = 4096;

export class TrustPolicy {
  readonly #rules: readonly Rule[];
  readonly #files = new Map<string, { identity: string; signers: AllowedSigners }>();
  /** Signatures verified over a statement (an immutable fact), by signature and statement. */
  readonly #verified = new Map<string, Sshsig>();

  constructor(config: SigningConfig) {
    this.#rules = config.rules.map((rule) => ({ config: rule, requirement: requirementOf(rule) }));
  }

  /** Reads every rule's allowed_signers file now, so a bad one stops the node at start. */
  preload(): void {
    for (const rule of this.#rules) this.#allowed(rule.config.allowed_signers);
  }

  #ruleFor(bundleId: string): Rule | undefined {
    return this.#rules.find((r) => matchPattern(bundleId, r.config.bundles));
  }

  /**
   * The signatures a commit carries, verified and judged by the policy at `now`: the records to
   * store with the revision. Throws the refusal otherwise.
   */
  accept(subject: StatementSubject, armored: readonly string[], now: number): BundleSignature[] {
    if (armored.length > SIGNATURES_MAX) throw tooManySignatures(armored.length);
    const statement = bundleStatement(subject);
    // One signature per key: a key that signed twice (ECDSA signatures differ each time) counts once.
    const byKey = new Map<string, { sig: Sshsig; text: string }>();
    for (const text of armored) {
      const sig = this.#verify(text, statement);
      if (!byKey.has(sig.publicKey.key.fingerprint)) byKey.set(sig.publicKey.key.fingerprint, { sig, text });
    }
    const rule = this.#ruleFor(subject.bundle_id);
    const seconds = Math.floor(now / 1000);
    const standings = new Map<string, SignerStanding>();
    if (rule !== undefined) {
      const allowed = this.#allowed(rule.config.allowed_signers);
      for (const [fp, { sig }] of byKey) standings.set(fp, standingOf(allowed, sig.publicKey, seconds));
      this.#require(rule, subject, standings, "commit");
    }
    return [...byKey].map(([fp, { sig, text }]) => {
      const standing = standings.get(fp);
      return {
        signature: normalizeArmor(text),
        fingerprint: fp,
        key_type: sig.publicKey.type,
        principals: standing?.status === "trusted" ? standing.principals : [],
        signed_at: now,
      };
    });
  }

  /**
   * A signature added to a committed revision: verified, and under a rule it must come from a
   * signer the policy trusts now. Undefined when that key already signed (nothing to add).
   */
  acceptAdditional(subject: StatementSubject, existing: readonly BundleSignature[], armored: string, now: number): BundleSignature | undefined {
    const statement = bundleStatement(subject);
    const sig = this.#verify(armored, statement);
    const fp = sig.publicKey.key.fingerprint;
    if (existing.some((s) => s.fingerprint === fp)) return undefined;
    if (existing.length >= SIGNATURES_MAX) throw tooManySignatures(existing.length + 1);
    const rule = this.#ruleFor(subject.bundle_id);
    let principals: readonly string[] = [];
    if (rule !== undefined) {
      const standing = standingOf(this.#allowed(rule.config.allowed_signers), sig.publicKey, Math.floor(now / 1000));
      if (standing.status !== "trusted") {
        throw refusalOfStanding(standing.status, subject, rule, `key ${fp}`);
      }
      principals = standing.principals;
    }
    return { signature: normalizeArmor(armored), fingerprint: fp, key_type: sig.publicKey.type, principals, signed_at: now };
  }

  /**
   * Checks a committed revision before it is used: under a rule, its stored signatures must still
   * meet the requirement by the allowed_signers file as it is now (each judged at the time it was
   * accepted). Answers the signers as the policy sees them now.
   */
  checkAtUse(subject: StatementSubject, stored: readonly BundleSignature[]): SignerView[] {
    const rule = this.#ruleFor(subject.bundle_id);
    if (rule === undefined) return stored.map((s) => signerView(s));
    const statement = bundleStatement(subject);
    const allowed = this.#allowed(rule.config.allowed_signers);
    const standings = new Map<string, SignerStanding>();
    const views: SignerView[] = [];
    for (const record of stored) {
      const sig = this.#verify(record.signature, statement);
      if (sig.publicKey.key.fingerprint !== record.fingerprint) {
        throw signatureInvalid("a stored signature does not match its record", { bundle_id: subject.bundle_id, revision: subject.revision });
      }
      const standing = standingOf(allowed, sig.publicKey, Math.floor(record.signed_at / 1000));
      standings.set(record.fingerprint, standing);
      views.push(signerView({ ...record, principals: standing.status === "trusted" ? standing.principals : [] }));
    }
    this.#require(rule, subject, standings, "use");
    return views;
  }

  #require(rule: Rule, subject: StatementSubject, standings: ReadonlyMap<string, SignerStanding>, when: "commit" | "use"): void {
    const where = `${subject.bundle_id}@${subject.revision}`;
    const details = { bundle_id: subject.bundle_id, revision: subject.revision, rule: rule.config.bundles, required: describe(rule.requirement) };
    if (standings.size === 0) {
      throw policyRefusal(
        "bundle-signature-required",
        `${where} is unsigned; the trust policy (rule ${JSON.stringify(rule.config.bundles)}) requires ${describe(rule.requirement)}`,
        details,
      );
    }
    const trusted = new Map<string, readonly string[]>();
    for (const [fp, s] of standings) if (s.status === "trusted") trusted.set(fp, s.patterns);
    if (meets(rule.requirement, trusted)) return;
    const statuses = new Set([...standings.values()].map((s) => s.status));
    if (when === "use") {
      throw policyRefusal(
        "bundle-signer-revoked",
        `${where} is no longer signed as the trust policy requires (${describe(rule.requirement)}): a signer was removed from or no longer valid in ${rule.config.allowed_signers}`,
        { ...details, fingerprints: [...standings.keys()] },
      );
    }
    const status = statuses.has("expired") ? "expired" : statuses.has("not-yet-valid") ? "not-yet-valid" : "untrusted";
    throw refusalOfStanding(status, subject, rule, `its signers (${[...standings.keys()].join(", ")})`);
  }

  #verify(armored: string, statement: string): Sshsig {
    const key = `${statement}\n${armored}`;
    const cached = this.#verified.get(key);
    if (cached !== undefined) return cached;
    const sig = parseSshsig(armored);
    verifySshsig(sig, Buffer.from(statement, "utf8"), SIGNATURE_NAMESPACE);
    if (this.#verified.size >= VERIFIED_CACHE) this.#verified.delete(this.#verified.keys().next().value!);
    this.#verified.set(key, sig);
    return sig;
  }

  #allowed(path: string): AllowedSigners {
    let identity: string;
    try {
      const st = statSync(path, { bigint: true });
      if (!st.isFile()) throw allowedSignersInvalid(path, 0, "not a regular file");
      if ((st.mode & 0o022n) !== 0n) throw allowedSignersInvalid(path, 0, "writable by group or others; chmod go-w it");
      if (st.size > BigInt(ALLOWED_SIGNERS_MAX_BYTES)) throw allowedSignersInvalid(path, 0, `larger than ${ALLOWED_SIGNERS_MAX_BYTES} bytes`);
      identity = `${st.dev}:${st.ino}:${st.size}:${st.mtimeNs}:${st.ctimeNs}`;
    } catch (error) {
      if (errnoCode(error) !== undefined) throw allowedSignersInvalid(path, 0, `cannot be read (${errnoCode(error)})`);
      throw error;
    }
    const cached = this.#files.get(path);
    if (cached !== undefined && cached.identity === identity) return cached.signers;
    let text: string;
    try {
      text = readFileSync(path, "utf8");
    } catch (error) {
      throw allowedSignersInvalid(path, 0, `cannot be read (${errnoCode(error) ?? String(error)})`);
    }
    const signers = parseAllowedSigners(text, path);
    this.#files.set(path, { identity, signers });
    return signers;
  }
}

function requirementOf(rule: TrustRuleConfig): Requirement {
  if (rule.all_of !== undefined) return { principals: rule.all_of, count: rule.all_of.length };
  if (rule.k_of !== undefined) return { principals: rule.k_of.principals, count: rule.k_of.k };
  if (rule.any_of !== undefined) return { principals: rule.any_of, count: 1 };
  return { count: 1 };
}

function describe(req: Requirement): string {
  if (req.principals === undefined) return "a signature by a key in its allowed_signers";
  if (req.count === 1) return `a signature by any of ${req.principals.join(", ")}`;
  if (req.count === req.principals.length) return `signatures by all of ${req.principals.join(", ")}`;
  return `signatures by ${req.count} of ${req.principals.join(", ")}`;
}

function refusalOfStanding(status: "expired" | "not-yet-valid" | "untrusted", subject: StatementSubject, rule: Rule, who: string): Error {
  const where = `${subject.bundle_id}@${subject.revision}`;
  const details = { bundle_id: subject.bundle_id, revision: subject.revision, rule: rule.config.bundles, required: describe(rule.requirement) };
  const file = rule.config.allowed_signers;
  if (status === "expired") return policyRefusal("bundle-signer-expired", `${where}: ${who}: past valid-before in ${file}`, details);
  if (status === "not-yet-valid") return policyRefusal("bundle-signer-not-yet-valid", `${where}: ${who}: before valid-after in ${file}`, details);
  return policyRefusal("bundle-signer-untrusted", `${where}: ${who}: not trusted as the policy requires: ${describe(rule.requirement)} in ${file}`, details);
}

/** Stores armor the way ssh-keygen writes it (one form for one signature). */
function normalizeArmor(text: string): string {
  return text.trim() + "\n";
}
