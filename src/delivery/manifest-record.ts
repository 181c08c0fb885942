/**
 * Manifests stored as canonical JSON text in stage and commit records, on every backend. A stored
 * manifest is trusted only after its digest is recomputed and matches the digest it is stored
 * under: text that was edited, cut short or replaced is a damaged record, never parsed into
 * something else. The check runs once per digest per process (a verified manifest is immutable),
 * not on every chunk.
 */
import { digestEquals, type Digest } from "../core/digest.js";
import { IntegrityError, type ErrorDetails } from "../core/errors.js";
import type { CatalogEntry } from "./catalog.js";
import { manifestDigestOf, receiptOf, type Manifest } from "./manifest-types.js";

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

/** Receipts are derived from the verified manifest, never stored separately, so they cannot drift. */
export function catalogEntryOf(row: CommitRow, manifests: ManifestCache): CatalogEntry {
  return {
    bundle_id: row.bundle_id,
    revision: row.revision,
    manifest_digest: row.manifest_digest as Digest,
    stage_id: row.stage_id,
    receipt: receiptOf(manifestOf(row, manifests)),
    committed_at: row.committed_at,
    retired_at: row.retired_at,
  };
}

/** The verified manifest of a commit record. */
export function manifestOf(row: CommitRow, manifests: ManifestCache): Manifest {
  return manifests.verified(row.manifest_digest, row.manifest, `${row.bundle_id}/${row.revision}`, { bundle_id: row.bundle_id, revision: row.revision });
}

function corrupt(where: string, details: ErrorDetails | undefined): IntegrityError {
  return new IntegrityError("delivery-record-corrupt", `the stored manifest of ${where} does not match its digest`, {
    status: 500,
    ...(details === undefined ? {} : { details }),
  });
}
