/**
 * What the providers module needs from the outside world, and what it hands back. The delivery
 * service satisfies BundleSource; the runner consumes Materialization.
 */
import type { Digest } from "../core/digest.js";
import type { BlobRef, Manifest } from "../delivery/manifest-types.js";

export const PROVIDER_NAMES = ["claude", "codex", "kimi"] as const;
export type ProviderName = (typeof PROVIDER_NAMES)[number];

export function isProviderName(value: unknown): value is ProviderName {
  return typeof value === "string" && (PROVIDER_NAMES as readonly string[]).includes(value);
}

/** Committed bundles, read-only. Implemented by the delivery service. */
export interface BundleSource {
  /** The committed manifest of (bundle_id, revision); NotFoundError when there is none. */
  getManifest(bundleId: string, revision: string): Promise<Manifest>;
  /**
   * The bytes of a stored blob, already verified against its digest by the source. The
   * materializer verifies them again as it copies: it trusts no layer below it with G8.
   */
  openBlob(blob: BlobRef): Promise<Uint8Array>;
  /**
   * Who signed the revision, as the node's trust policy sees it now; refuses a revision the
   * policy no longer lets run. A source without signatures leaves it out.
   */
  signersOf?(bundleId: string, revision: string): Promise<readonly BundleSigner[]>;
}

/** A bundle's signer as the journal's run.started records it. */
export interface BundleSigner {
  readonly principals: readonly string[];
  readonly fingerprint: string;
  readonly key_type: string;
  readonly signed_at: string;
}

/** A bundle revision to materialize. */
export interface BundleRef {
  readonly bundle_id: string;
  readonly revision: string;
}

/** What a provider process is launched with, for one materialized session. */
export interface Launch {
  /** `<materializations>/<session>` */
  readonly root: string;
  /** arguments that point the provider at the tree (placed after the prompt arguments) */
  readonly args: readonly string[];
  /** environment variables to add for the provider process */
  readonly env: Readonly<Record<string, string>>;
}

export interface Materialization extends Launch {
  readonly session: string;
  readonly provider: ProviderName;
  /** none for a tree warden generated for a run without a bundle (a codex home) */
  readonly bundle?: BundleRef & { readonly manifest_digest: Digest };
  /** number of files in the tree */
  readonly files: number;
}

/** One file the tree must hold, by its path relative to the session directory. */
export interface ExpectedFile {
  readonly digest: Digest;
  readonly byte_len: number;
}

/** The exact contents of a materialized session directory: every directory and file in it. */
export interface ExpectedTree {
  /** relative directory paths (parents before children), excluding the session directory itself */
  readonly dirs: readonly string[];
  readonly files: ReadonlyMap<string, ExpectedFile>;
}
