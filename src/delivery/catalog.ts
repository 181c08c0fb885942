/**
 * The catalog of committed bundles: one entry per (bundle_id, revision), written once, with the
 * commit receipt. A retired revision stays listed (with its receipt) but is refused to new
 * sessions, and its blobs become collectable once no live revision or active stage needs them.
 */
import type { Digest } from "../core/digest.js";
import { signerView, type SignerView } from "../signing/policy.js";
import type { CommitReceipt, Manifest } from "./manifest-types.js";
import type { StoredSignature } from "./signature-record.js";

export interface CatalogEntry {
  readonly bundle_id: string;
  readonly revision: string;
  readonly manifest_digest: Digest;
  /** The stage that committed it: a commit replayed on this id answers the same receipt. */
  readonly stage_id: string;
  readonly receipt: CommitReceipt;
  readonly committed_at: number;
  readonly retired_at: number | null;
  /** the signatures it carries, in the order the node accepted them */
  readonly signatures: readonly StoredSignature[];
}

/** What `list` and `show` answer: ISO timestamps, revisions in commit order. */
export interface RevisionView {
  readonly revision: string;
  readonly manifest_digest: Digest;
  readonly committed_at: string;
  readonly retired: boolean;
  readonly retired_at?: string;
  readonly receipt: CommitReceipt;
  /** every signature, those added after the commit too */
  readonly signatures: readonly SignerView[];
}

export interface BundleView {
  readonly bundle_id: string;
  readonly revisions: readonly RevisionView[];
}

export interface CatalogStore {
  findByManifest(manifestDigest: Digest): Promise<CatalogEntry | undefined>;
  findByStage(stageId: string): Promise<CatalogEntry | undefined>;
  get(bundleId: string, revision: string): Promise<CatalogEntry | undefined>;
  manifestOf(manifestDigest: Digest): Promise<Manifest | undefined>;
  /** Every entry, by bundle id (UTF-8 byte order) then commit order. */
  list(bundleId?: string): Promise<readonly CatalogEntry[]>;
  /**
   * Durably writes the commit record and, in the same transaction, removes the stage's metadata:
   * a bundle is either committed with its stage closed, or not committed at all (G7). The same
   * (bundle_id, revision) with another manifest throws ConflictError `revision-conflict`; the same
   * manifest already committed returns the existing entry. The entry's signatures are written in
   * the same transaction.
   */
  record(entry: CatalogEntry, manifest: Manifest): Promise<CatalogEntry>;
  /**
   * Durably adds a signature to a committed revision; false when that key already signed it (the
   * stored one stays) or there is no such revision.
   */
  addSignature(bundleId: string, revision: string, signature: StoredSignature): Promise<boolean>;
  /**
   * Entries committed at or after `at` (ms), or carrying a signature accepted at or after it, in
   * commit order: what the transparency log's catch-up re-checks (by index, not a scan of all).
   */
  changedSince(at: number): Promise<readonly CatalogEntry[]>;
  /** Marks a revision retired; false when there is no such revision. Retiring twice is a no-op. */
  retire(bundleId: string, revision: string, now: number): Promise<boolean>;
  /** Digests referenced by revisions that are not retired. */
  liveBlobDigests(): Promise<ReadonlySet<Digest>>;
}

export function revisionView(entry: CatalogEntry): RevisionView {
  return {
    revision: entry.revision,
    manifest_digest: entry.manifest_digest,
    committed_at: new Date(entry.committed_at).toISOString(),
    retired: entry.retired_at !== null,
    ...(entry.retired_at !== null ? { retired_at: new Date(entry.retired_at).toISOString() } : {}),
    receipt: entry.receipt,
    signatures: entry.signatures.map((s) => signerView(s, true)),
  };
}

/** Groups entries (already ordered by bundle id, then commit order) into bundle views. */
export function bundleViews(entries: readonly CatalogEntry[]): BundleView[] {
  const views: { bundle_id: string; revisions: RevisionView[] }[] = [];
  for (const entry of entries) {
    const last = views[views.length - 1];
    if (last !== undefined && last.bundle_id === entry.bundle_id) last.revisions.push(revisionView(entry));
    else views.push({ bundle_id: entry.bundle_id, revisions: [revisionView(entry)] });
  }
  return views;
}
