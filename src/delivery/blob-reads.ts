/**
 * What a materialization reads of a committed revision: its manifest and signers (live, and
 * allowed by the trust policy now) and its blobs, verified before any byte is returned. One of
 * the three services `Delivery` is split into (service.ts: uploads; bundle-catalog.ts: the catalog).
 */
import type { BlobRef, Manifest } from "./manifest-types.js";
import { readVerifiedBlob, type BlobStore } from "./blob-store.js";
import type { CatalogEntry, CatalogStore } from "./catalog.js";
import { guard, guardStream, revisionNotFound, revisionRetired } from "./delivery-errors.js";
import type { Limits } from "../core/limits.js";
import { TrustPolicy, type SignerView } from "../signing/policy.js";

/** Without a configured policy, signatures are still verified; nothing is required. */
export const NO_RULES = new TrustPolicy({ rules: [] });

export class BlobReads {
  readonly #catalog: CatalogStore;
  readonly #blobs: BlobStore;
  readonly #limits: Limits;
  readonly #trust: TrustPolicy | undefined;

  constructor(parts: { catalog: CatalogStore; blobs: BlobStore; limits: Limits; trust: TrustPolicy | undefined }) {
    this.#catalog = parts.catalog;
    this.#blobs = parts.blobs;
    this.#limits = parts.limits;
    this.#trust = parts.trust;
  }

  /**
   * The signers of a committed, live revision as the trust policy sees them now; refuses one the
   * policy no longer allows to run (`bundle-signer-revoked`, `bundle-signature-required`).
   */
  async signersOf(bundleId: string, revision: string): Promise<readonly SignerView[]> {
    return guard(async () => {
      const entry = await this.#liveEntry(bundleId, revision);
      return (this.#trust ?? NO_RULES).checkAtUse(entry.receipt, entry.signatures);
    });
  }

  /**
   * The manifest of a committed, live revision that the trust policy allows to run now
   * (materialization refuses retired ones, and revoked signers').
   */
  async getManifest(bundleId: string, revision: string): Promise<Manifest> {
    return guard(async () => {
      const entry = await this.#liveEntry(bundleId, revision);
      this.#trust?.checkAtUse(entry.receipt, entry.signatures);
      const manifest = await this.#catalog.manifestOf(entry.manifest_digest);
      if (manifest === undefined) throw revisionNotFound(bundleId, revision);
      return manifest;
    });
  }

  async #liveEntry(bundleId: string, revision: string): Promise<CatalogEntry> {
    const entry = await this.#catalog.get(bundleId, revision);
    if (entry === undefined) throw revisionNotFound(bundleId, revision);
    if (entry.retired_at !== null) throw revisionRetired(bundleId, revision);
    return entry;
  }

  /** A blob's bytes, verified (digest and length) before any is returned (G8). */
  async openBlob(ref: BlobRef): Promise<Uint8Array> {
    return guard(async () => {
      return readVerifiedBlob(this.#blobs, ref, this.#limits.fileBytes);
    });
  }

  /** A blob as a stream that throws `blob-tampered` at its end if the bytes do not verify. */
  openBlobStream(ref: BlobRef): AsyncIterable<Uint8Array> {
    return guardStream(this.#blobs.stream(ref));
  }
}
