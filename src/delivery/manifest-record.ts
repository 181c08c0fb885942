/**
 * Manifests stored as canonical JSON text in stage and commit records, on every backend. A stored
 * manifest is trusted only after its digest is recomputed and matches the digest it is stored
 * under: text that was edited, cut short or replaced is a damaged record, never parsed into
 * something else. The check runs once per digest per process (a verified manifest is immutable),
 * not on every chunk.
 */
import { canonicalJson } from "../core/canonical.js";
import { digestEquals, type Digest } from "../core/digest.js";
import { IntegrityError, isWardenError, type ErrorDetails } from "../core/errors.js";
import { isCount, isTime } from "../core/limits.js";
import type { CatalogEntry } from "./catalog.js";
import { manifestDigestOf, receiptOf, type CommitReceipt, type Manifest } from "./manifest-types.js";
import type { StageRecord } from "./stage.js";
import { signerView } from "../signing/policy.js";
import type { StoredSignature } from "./signature-record.js";

const CACHE_LIMIT = 1024;

export class ManifestCache {
  readonly #verified = new Map<string, Manifest>();

  /**
   * The manifest stored as `text` under `digest`, or IntegrityError `delivery-record-corrupt`
   * naming `where` (a stage, a bundle revision) and carrying `details`. `text` may be a function,
   * called only when the digest is not verified yet (a store that reads the text on its own).
   */
  verified(digest: string, text: string | (() => string), where: string, details?: ErrorDetails): Manifest {
    const cached = this.#verified.get(digest);
    if (cached !== undefined) return cached;
    let manifest: Manifest;
    try {
      manifest = JSON.parse(typeof text === "string" ? text : text()) as Manifest;
    } catch {
      throw corrupt(where, details);
    }
    if (typeof manifest !== "object" || manifest === null || manifest.manifest_digest !== digest || !digestEquals(manifestDigestOf(manifest), digest)) {
      throw corrupt(where, details);
    }
    this.remember(manifest);
    return manifest;
  }

  /** True when the manifest stored under `digest` was verified already (its text need not be read). */
  has(digest: string): boolean {
    return this.#verified.has(digest);
  }

  /** Forgets a manifest no record here holds any more (a closed stage's). */
  forget(digest: string): void {
    this.#verified.delete(digest);
  }

  /** Remembers a manifest this process validated itself (one it is about to store). */
  remember(manifest: Manifest): void {
    if (this.#verified.has(manifest.manifest_digest)) return;
    if (this.#verified.size >= CACHE_LIMIT) this.#verified.delete(this.#verified.keys().next().value!);
    this.#verified.set(manifest.manifest_digest, manifest);
  }
}

const storedTexts = new WeakMap<Manifest, string>();

/**
 * The text a stage or commit record stores for `manifest` (its canonical JSON), serialized once per
 * manifest object: a stage's record and its commit record store the same text, and the commit gets
 * the very object its begin stored (the stage store's ManifestCache hands it back). Manifests are
 * never changed once parsed.
 */
export function storedManifestText(manifest: Manifest): string {
  let text = storedTexts.get(manifest);
  if (text === undefined) {
    text = canonicalJson(manifest);
    storedTexts.set(manifest, text);
  }
  return text;
}

/** A commit record as both backends store it. */
export interface CommitRow {
  manifest_digest: string;
  stage_id: string;
  bundle_id: string;
  revision: string;
  manifest: string;
  committed_at: number;
  retired_at: number | null;
}

/**
 * Receipts are derived from the verified manifest (and the signatures stored with the commit),
 * never stored separately, so they cannot drift.
 */
export function catalogEntryOf(row: CommitRow, manifests: ManifestCache, signatures: readonly StoredSignature[]): CatalogEntry {
  if (!isTime(row.committed_at) || (row.retired_at !== null && !isTime(row.retired_at))) {
    const where = `${row.bundle_id}/${row.revision}`;
    throw corrupt(where, { bundle_id: row.bundle_id, revision: row.revision }, `the commit record of ${where} holds a time out of range`);
  }
  return {
    bundle_id: row.bundle_id,
    revision: row.revision,
    manifest_digest: row.manifest_digest as Digest,
    stage_id: row.stage_id,
    receipt: withSigners(receiptOf(manifestOf(row, manifests)), signatures),
    committed_at: row.committed_at,
    retired_at: row.retired_at,
    signatures,
  };
}

/** A receipt naming the signers that came with the commit (none: the receipt as before signatures existed). */
export function withSigners(receipt: CommitReceipt, signatures: readonly StoredSignature[]): CommitReceipt {
  const atCommit = signatures.filter((s) => s.at_commit);
  return atCommit.length === 0 ? receipt : { ...receipt, signers: atCommit.map((s) => signerView(s)) };
}

/**
 * The verified manifest of a commit record. The row's own bundle id and revision must be the
 * manifest's: a row edited to another revision would otherwise answer for it with this manifest.
 */
export function manifestOf(row: CommitRow, manifests: ManifestCache): Manifest {
  const where = `${row.bundle_id}/${row.revision}`;
  const details = { bundle_id: row.bundle_id, revision: row.revision };
  const manifest = manifests.verified(row.manifest_digest, row.manifest, where, details);
  if (manifest.bundle_id !== row.bundle_id || manifest.revision !== row.revision) {
    throw corrupt(where, details, `the commit record of ${where} names another revision than its manifest`);
  }
  return manifest;
}

/**
 * Refuses a stage record whose blob rows do not fit its (verified) manifest: each blob one of the
 * manifest's, with its length; capacity and times in range. Such rows would otherwise drive the
 * upload (offsets, lengths, partial paths) with values no client sent. What was received is not
 * judged here: received bytes that do not fit are found by the commit's checks and asked again.
 */
export function checkStageRecord(stage: StageRecord): void {
  const where = `stage ${stage.stage_id}`;
  const fail = (rule: string): never => {
    throw corrupt(where, { stage_id: stage.stage_id }, `the stored record of ${where} is damaged: ${rule}`);
  };
  const lengths = blobLengthsOf(stage.manifest);
  for (const b of stage.blobs) {
    if (lengths.get(b.digest) !== b.byte_len) fail(`blob ${JSON.stringify(b.digest)} of ${String(b.byte_len)} bytes is not in its manifest`);
    if (typeof b.complete !== "boolean") fail(`blob ${b.digest} has an invalid completion flag`);
  }
  let total = 0;
  for (const length of lengths.values()) total += length;
  if (!isCount(stage.reserved_bytes) || stage.reserved_bytes > total) fail("reserved_bytes is out of range");
  if (!isTime(stage.created_at) || !isTime(stage.last_active_at)) fail("a timestamp is out of range");
}

const blobLengths = new WeakMap<Manifest, ReadonlyMap<string, number>>();

/** Each distinct blob's length by digest (kept per manifest object: the cache hands out the same one). */
function blobLengthsOf(manifest: Manifest): ReadonlyMap<string, number> {
  let lengths = blobLengths.get(manifest);
  if (lengths === undefined) {
    lengths = new Map(manifest.components.map((c) => [c.blob.digest, c.blob.byte_len]));
    blobLengths.set(manifest, lengths);
  }
  return lengths;
}

/** The error every damaged delivery record is reported with. */
export function isDamagedRecord(error: unknown): boolean {
  return isWardenError(error) && error.code === "delivery-record-corrupt";
}

function corrupt(where: string, details: ErrorDetails | undefined, message = `the stored manifest of ${where} does not match its digest`): IntegrityError {
  return new IntegrityError("delivery-record-corrupt", message, {
    status: 500,
    ...(details === undefined ? {} : { details }),
  });
}
