/**
 * Reconciliation receipts (DESIGN.md "Invocation identity and outcomes"): strict validation of an
 * operator's review, the node's Ed25519 signature over the canonical receipt body, and
 * verification of a receipt against the claim's CURRENT snapshot — so any change to the claim or
 * its journal after the review makes the receipt fail.
 */
import { canonicalDigest, canonicalJson } from "../core/canonical.js";
import { isDigest, type Digest } from "../core/digest.js";
import { IntegrityError, ValidationError } from "../core/errors.js";
import { decodeBase64Strict } from "../core/base64.js";
import { ED25519_SIGNATURE_BYTES, isKeyId, verifyEd25519 } from "../core/ed25519.js";
import { isJournalTimestamp } from "../journal/schema.js";
import type { PublicKeyRecord, SigningKey } from "../journal/types.js";
import { checkName } from "./identity.js";
import type { ClaimSnapshot, Evidence, ReceiptBody, ReconciliationReceipt, Review, ReviewOutcome } from "./types.js";

/** Domain separation: a receipt signature can never pass as a journal signature or vice versa. */
export const RECONCILIATION_SIGNING_PREFIX = "warden-reconciliation-v1\n";
export const RATIONALE_MAX_BYTES = 8192;
export const EVIDENCE_MAX_ITEMS = 32;
export const EVIDENCE_REFERENCE_MAX_BYTES = 1024;
const REVIEW_OUTCOMES: readonly ReviewOutcome[] = ["completed", "failed", "no_effects"];

type Fields = Record<string, unknown>;

function isPlainObject(value: unknown): value is Fields {
  const proto: unknown = typeof value === "object" && value !== null ? Object.getPrototypeOf(value) : undefined;
  return !Array.isArray(value) && (proto === Object.prototype || proto === null);
}

function fieldsOf(value: unknown, code: string, what: string, required: readonly string[]): Fields {
  if (!isPlainObject(value)) throw new ValidationError(code, `${what} must be a JSON object`);
  for (const name of Object.keys(value)) {
    if (!required.includes(name)) throw new ValidationError("review-unknown-field", `${what}: unknown field ${JSON.stringify(name)}`);
  }
  for (const name of required) {
    if (!Object.hasOwn(value, name)) throw new ValidationError(code, `${what}: missing field ${name}`);
  }
  return value;
}

/**
 * The rationale `warden inspect --review-template` prints: a review still carrying it was not
 * written by anyone, and is refused like the template's outcome and effects_stopped are.
 */
export const TEMPLATE_RATIONALE = "what was checked, and why this outcome is right";

/** sha256 of zero bytes: the digest of an empty file, which is no evidence of anything. */
const EMPTY_INPUT_SHA256 = "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

/**
 * The node never sees the evidence, so it cannot check that a digest is the digest of what was
 * checked. What it can refuse is a digest that is plainly not one of evidence: a placeholder
 * (64 of one hex digit, e.g. all zeros) or the digest of an empty file.
 */
export function isPlaceholderEvidenceDigest(digest: Digest): boolean {
  const hex = digest.slice("sha256:".length);
  return digest === EMPTY_INPUT_SHA256 || hex.split("").every((c) => c === hex[0]);
}

/** Every code a review's problem can carry (docs/errors.md lists each). */
export type ReviewProblemCode =
  | "review-invalid"
  | "review-unknown-field"
  | "review-invalid-snapshot-hash"
  | "review-invalid-outcome"
  | "review-invalid-rationale"
  | "review-invalid-evidence"
  | "review-evidence-placeholder"
  | "review-effects-not-stopped";

/** One broken rule of a review: its own stable code, the field, and what to do. */
export interface ReviewProblem {
  readonly code: ReviewProblemCode;
  readonly field: string;
  readonly detail: string;
}

/**
 * A review with broken rules, all of them at once (an operator fixes the file once, not once per
 * rule): the code is the problem's own when there is one, `review-invalid` when there are several;
 * `problems` lists each, which the problem document carries over HTTP.
 */
export function reviewRefused(problems: readonly ReviewProblem[]): ValidationError {
  const only = problems.length === 1 ? problems[0] : undefined;
  const message = only?.detail ?? `the review has ${problems.length} problems: ${problems.map((p) => p.field).join(", ")}`;
  return new ValidationError(only?.code ?? "review-invalid", message, { details: { problems: problems.map((p) => ({ ...p })) } });
}

/**
 * Validates a review exactly; unknown fields anywhere are refused. Returns a clean copy.
 * `stored`: a review inside a receipt already signed, which is held to the rules it was signed
 * under: placeholder evidence digests were accepted before they were refused, and such a receipt
 * must keep verifying.
 */
export function parseReview(value: unknown, options: { readonly stored?: boolean } = {}): Review {
  if (!isPlainObject(value)) throw new ValidationError("review-invalid", "review must be a JSON object");
  const review = value;
  const problems: ReviewProblem[] = [];
  const refuse = (code: ReviewProblemCode, field: string, detail: string): void => void problems.push({ code, field, detail });
  const expected = ["snapshot_hash", "outcome", "rationale", "evidence", "effects_stopped"];
  for (const name of Object.keys(review)) {
    if (!expected.includes(name)) refuse("review-unknown-field", name, `review: unknown field ${JSON.stringify(name)}`);
  }
  for (const name of expected) {
    if (!Object.hasOwn(review, name)) refuse("review-invalid", name, `review: missing field ${name}`);
  }
  const present = (name: string): boolean => Object.hasOwn(review, name);
  if (present("snapshot_hash") && !isDigest(review.snapshot_hash)) {
    refuse("review-invalid-snapshot-hash", "snapshot_hash", "review.snapshot_hash must be the sha256: digest inspect returned");
  }
  if (present("outcome") && (typeof review.outcome !== "string" || !REVIEW_OUTCOMES.includes(review.outcome as ReviewOutcome))) {
    refuse("review-invalid-outcome", "outcome", `review.outcome must be one of ${REVIEW_OUTCOMES.join(", ")}`);
  }
  if (present("rationale")) {
    const rationale = review.rationale;
    if (typeof rationale !== "string" || rationale.length === 0 || Buffer.byteLength(rationale, "utf8") > RATIONALE_MAX_BYTES) {
      refuse("review-invalid-rationale", "rationale", `review.rationale must be 1–${RATIONALE_MAX_BYTES} bytes of text`);
    } else if (rationale.trim() === TEMPLATE_RATIONALE) {
      refuse("review-invalid-rationale", "rationale", "review.rationale is still the template's: say what was checked, and why this outcome is right");
    }
  }
  const evidence: Evidence[] = [];
  if (present("evidence")) {
    if (!Array.isArray(review.evidence) || review.evidence.length < 1 || review.evidence.length > EVIDENCE_MAX_ITEMS) {
      refuse("review-invalid-evidence", "evidence", `review.evidence must list 1–${EVIDENCE_MAX_ITEMS} items`);
    } else {
      review.evidence.forEach((item: unknown, i: number) => {
        const found = evidenceProblems(item, i, options.stored === true);
        if (found.length === 0) evidence.push({ reference: (item as Evidence).reference, sha256: (item as Evidence).sha256 });
        problems.push(...found);
      });
    }
  }
  if (present("effects_stopped") && review.effects_stopped !== true) {
    refuse("review-effects-not-stopped", "effects_stopped", "review.effects_stopped must be true: reconcile only once the run's effects have stopped");
  }
  if (problems.length > 0) throw reviewRefused(problems);
  return {
    snapshot_hash: review.snapshot_hash as Digest,
    outcome: review.outcome as ReviewOutcome,
    rationale: review.rationale as string,
    evidence,
    effects_stopped: true,
  };
}

/** The broken rules of one evidence item (none when it is valid). */
function evidenceProblems(item: unknown, i: number, stored: boolean): ReviewProblem[] {
  const field = `evidence[${i}]`;
  if (!isPlainObject(item)) {
    return [{ code: "review-invalid-evidence", field, detail: `review.${field} must be a JSON object {reference, sha256}` }];
  }
  const e = item;
  const problems: ReviewProblem[] = [];
  for (const name of Object.keys(e)) {
    if (name !== "reference" && name !== "sha256") problems.push({ code: "review-unknown-field", field: `${field}.${name}`, detail: `review.${field}: unknown field ${JSON.stringify(name)}` });
  }
  const reference = e.reference;
  if (typeof reference !== "string" || reference.length === 0 || Buffer.byteLength(reference, "utf8") > EVIDENCE_REFERENCE_MAX_BYTES) {
    problems.push({ code: "review-invalid-evidence", field: `${field}.reference`, detail: `review.${field}.reference must be 1–${EVIDENCE_REFERENCE_MAX_BYTES} bytes of text` });
  }
  if (!isDigest(e.sha256)) {
    problems.push({
      code: "review-invalid-evidence",
      field: `${field}.sha256`,
      detail: `review.${field}.sha256 must be "sha256:" and the 64 lowercase hex digits of the evidence file's sha256 (\`warden inspect --review-template --evidence FILE\` computes it)`,
    });
  } else if (!stored && isPlaceholderEvidenceDigest(e.sha256)) {
    problems.push({
      code: "review-evidence-placeholder",
      field: `${field}.sha256`,
      detail:
        `review.${field}.sha256 is a placeholder (one digit repeated, or the digest of an empty file), not the digest of evidence: ` +
        "the node cannot read the evidence, so it records the digest you give for anyone holding the file to check",
    });
  }
  return problems;
}

export function snapshotHashOf(snapshot: ClaimSnapshot): Digest {
  return canonicalDigest(snapshot);
}

function signingMessage(body: ReceiptBody): Buffer {
  return Buffer.from(RECONCILIATION_SIGNING_PREFIX + canonicalJson(body), "utf8");
}

function bodyOf(receipt: ReconciliationReceipt): ReceiptBody {
  return {
    v: receipt.v,
    snapshot: receipt.snapshot,
    review: receipt.review,
    operator: receipt.operator,
    recorded_at: receipt.recorded_at,
  };
}

export function signReceipt(body: ReceiptBody, key: SigningKey): ReconciliationReceipt {
  const sig = Buffer.from(key.sign(signingMessage(body))).toString("base64");
  return { ...body, key_id: key.key_id, sig };
}

/** True when a stored receipt records exactly this submission (the same review by the same operator). */
export function sameSubmission(receipt: ReconciliationReceipt, review: Review, operator: string): boolean {
  return canonicalJson(receipt.review) === canonicalJson(review) && receipt.operator === operator;
}

export type ReceiptVerification =
  | { readonly ok: true }
  | { readonly ok: false; readonly code: string; readonly reason: string };

/**
 * Verifies a receipt: its shape, a signature by one of `publicKeys`, that the review was made
 * against the snapshot the receipt carries, and that this snapshot is still the claim's current
 * one (`currentSnapshot`, e.g. from `inspect`). Any later change to the claim row or the journal
 * changes the current snapshot and fails here.
 */
export function verifyReceipt(
  receipt: unknown,
  publicKeys: readonly PublicKeyRecord[],
  currentSnapshot: ClaimSnapshot,
): ReceiptVerification {
  let parsed: ReconciliationReceipt;
  try {
    parsed = parseReceipt(receipt);
  } catch (error) {
    return { ok: false, code: "receipt-malformed", reason: error instanceof Error ? error.message : String(error) };
  }
  const key = publicKeys.find((k) => k.key_id === parsed.key_id);
  if (key === undefined) return { ok: false, code: "receipt-unknown-key", reason: `receipt signed by unknown key ${parsed.key_id}` };
  const signature = decodeBase64Strict(parsed.sig, ED25519_SIGNATURE_BYTES);
  if (signature === undefined || !verifyEd25519(key.public_key, signingMessage(bodyOf(parsed)), signature)) {
    return { ok: false, code: "receipt-bad-signature", reason: "the receipt's signature does not verify" };
  }
  if (snapshotHashOf(parsed.snapshot) !== parsed.review.snapshot_hash) {
    return { ok: false, code: "receipt-snapshot-mismatch", reason: "the review was not made against the receipt's snapshot" };
  }
  if (canonicalJson(parsed.snapshot) !== canonicalJson(currentSnapshot)) {
    return { ok: false, code: "receipt-claim-changed", reason: "the claim or its journal changed after the receipt was signed" };
  }
  return { ok: true };
}

/** Parses a receipt (stored or received) strictly; refuses unknown fields and malformed values. */
export function parseReceipt(value: unknown): ReconciliationReceipt {
  const malformed = (reason: string): IntegrityError => new IntegrityError("receipt-malformed", `reconciliation receipt: ${reason}`);
  const r = fieldsOf(value, "receipt-malformed", "receipt", ["v", "snapshot", "review", "operator", "recorded_at", "key_id", "sig"]);
  if (r.v !== 1) throw malformed("v must be 1");
  if (!isJournalTimestamp(r.recorded_at)) throw malformed("recorded_at must be an RFC 3339 UTC timestamp");
  if (!isKeyId(r.key_id) || typeof r.sig !== "string") throw malformed("key_id and sig are required");
  const snapshot = parseSnapshot(r.snapshot);
  const review = parseReview(r.review, { stored: true });
  return {
    v: 1,
    snapshot,
    review,
    operator: checkName(r.operator, "operator"),
    recorded_at: r.recorded_at,
    key_id: r.key_id,
    sig: r.sig,
  };
}

function parseSnapshot(value: unknown): ClaimSnapshot {
  const s = fieldsOf(value, "receipt-malformed", "snapshot", ["scope", "id", "request_hash", "agent", "claim_hash", "journal_hash", "audit"]);
  const a = fieldsOf(s.audit, "receipt-malformed", "snapshot.audit", ["run_id", "entries", "tail_hash", "bytes"]);
  const strings = [s.scope, s.id, s.agent, a.run_id, a.tail_hash];
  const counts = [a.entries, a.bytes];
  if (
    !strings.every((x) => typeof x === "string") ||
    !counts.every((x) => typeof x === "number" && Number.isSafeInteger(x) && x >= 0) ||
    !isDigest(s.request_hash) ||
    !isDigest(s.claim_hash) ||
    !(s.journal_hash === null || isDigest(s.journal_hash))
  ) {
    throw new IntegrityError("receipt-malformed", "reconciliation receipt: snapshot has invalid fields");
  }
  return {
    scope: s.scope as string,
    id: s.id as string,
    request_hash: s.request_hash,
    agent: s.agent as string,
    claim_hash: s.claim_hash,
    journal_hash: s.journal_hash,
    audit: { run_id: a.run_id as string, entries: a.entries as number, tail_hash: a.tail_hash as string, bytes: a.bytes as number },
  };
}
