/**
 * Reconciliation receipts (DESIGN.md "Invocation identity and outcomes"): strict validation of an
 * operator's review, the node's Ed25519 signature over the canonical receipt body, and
 * verification of a receipt against the claim's CURRENT snapshot — so any change to the claim or
 * its journal after the review makes the receipt fail.
 */
import { canonicalDigest, canonicalJson } from "../core/canonical.js";
import { isDigest, type Digest } from "../core/digest.js";
import { IntegrityError, ValidationError } from "../core/errors.js";
import { decodeBase64Strict, ED25519_SIGNATURE_BYTES, isKeyId, verifyEd25519 } from "../journal/keys.js";
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

function fieldsOf(value: unknown, code: string, what: string, required: readonly string[]): Fields {
  const proto: unknown = typeof value === "object" && value !== null ? Object.getPrototypeOf(value) : undefined;
  if (Array.isArray(value) || (proto !== Object.prototype && proto !== null)) {
    throw new ValidationError(code, `${what} must be a JSON object`);
  }
  const fields = value as Fields;
  for (const name of Object.keys(fields)) {
    if (!required.includes(name)) throw new ValidationError("review-unknown-field", `${what}: unknown field ${JSON.stringify(name)}`);
  }
  for (const name of required) {
    if (!Object.hasOwn(fields, name)) throw new ValidationError(code, `${what}: missing field ${name}`);
  }
  return fields;
}

function textWithin(value: unknown, max: number, code: string, what: string): string {
  if (typeof value !== "string" || value.length === 0 || Buffer.byteLength(value, "utf8") > max) {
    throw new ValidationError(code, `${what} must be 1–${max} bytes of text`);
  }
  return value;
}

/**
 * The rationale `warden inspect --review-template` prints: a review still carrying it was not
 * written by anyone, and is refused like the template's outcome and effects_stopped are.
 */
export const TEMPLATE_RATIONALE = "what was checked, and why this outcome is right";

/** Validates a review exactly; unknown fields anywhere are refused. Returns a clean copy. */
export function parseReview(value: unknown): Review {
  const review = fieldsOf(value, "review-invalid", "review", ["snapshot_hash", "outcome", "rationale", "evidence", "effects_stopped"]);
  if (!isDigest(review.snapshot_hash)) {
    throw new ValidationError("review-invalid-snapshot-hash", "review.snapshot_hash must be the sha256: digest inspect returned");
  }
  if (typeof review.outcome !== "string" || !REVIEW_OUTCOMES.includes(review.outcome as ReviewOutcome)) {
    throw new ValidationError("review-invalid-outcome", `review.outcome must be one of ${REVIEW_OUTCOMES.join(", ")}`);
  }
  const rationale = textWithin(review.rationale, RATIONALE_MAX_BYTES, "review-invalid-rationale", "review.rationale");
  if (rationale.trim() === TEMPLATE_RATIONALE) {
    throw new ValidationError("review-invalid-rationale", "review.rationale is still the template's: say what was checked, and why this outcome is right");
  }
  if (!Array.isArray(review.evidence) || review.evidence.length < 1 || review.evidence.length > EVIDENCE_MAX_ITEMS) {
    throw new ValidationError("review-invalid-evidence", `review.evidence must list 1–${EVIDENCE_MAX_ITEMS} items`);
  }
  const evidence: Evidence[] = review.evidence.map((item: unknown, i: number) => {
    const e = fieldsOf(item, "review-invalid-evidence", `review.evidence[${i}]`, ["reference", "sha256"]);
    const reference = textWithin(e.reference, EVIDENCE_REFERENCE_MAX_BYTES, "review-invalid-evidence", `review.evidence[${i}].reference`);
    if (!isDigest(e.sha256)) throw new ValidationError("review-invalid-evidence", `review.evidence[${i}].sha256 must be a sha256: digest`);
    return { reference, sha256: e.sha256 };
  });
  if (review.effects_stopped !== true) {
    throw new ValidationError("review-effects-not-stopped", "review.effects_stopped must be true: reconcile only once the run's effects have stopped");
  }
  return {
    snapshot_hash: review.snapshot_hash,
    outcome: review.outcome as ReviewOutcome,
    rationale,
    evidence,
    effects_stopped: true,
  };
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
  const review = parseReview(r.review);
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
