/**
 * The committed bundles as publishers and operators see them: listing, a bundle's revisions, a
 * revision's manifest, signatures added after the commit, retirement, and what changed since a
 * time (the transparency log's catch-up). One of the three services `Delivery` is split into
 * (service.ts: uploads; blob-reads.ts: what materialization reads).
 */
import { bundleViews, revisionView, type BundleView, type CatalogEntry, type CatalogStore, type RevisionView } from "./catalog.js";
import { bundleNotFound, guard, revisionNotFound } from "./delivery-errors.js";
import type { Manifest } from "./manifest-types.js";
import type { TrustPolicy } from "../signing/policy.js";
import type { StoredSignature } from "./signature-record.js";
import { NO_RULES } from "./blob-reads.js";

/** Who hears of durable commits and later signatures (the transparency log); resolves once told. */
export interface DeliveryAttest {
  commit(entry: CatalogEntry): Promise<unknown>;
  signed(entry: CatalogEntry, signature: StoredSignature): Promise<unknown>;
}

export class BundleCatalog {
  readonly #catalog: CatalogStore;
  readonly #clock: () => number;
  readonly #trust: TrustPolicy | undefined;
  readonly #attest: DeliveryAttest | undefined;

  constructor(parts: { catalog: CatalogStore; clock: () => number; trust: TrustPolicy | undefined; attest: DeliveryAttest | undefined }) {
    this.#catalog = parts.catalog;
    this.#clock = parts.clock;
    this.#trust = parts.trust;
    this.#attest = parts.attest;
  }

  async list(): Promise<BundleView[]> {
    return guard(async () => {
      return bundleViews(await this.#catalog.list());
    });
  }

  async show(bundleId: string): Promise<BundleView> {
    return guard(async () => {
      const [view] = bundleViews(await this.#catalog.list(bundleId));
      if (view === undefined) throw bundleNotFound(bundleId);
      return view;
    });
  }

  /** The manifest a committed revision was delivered with (retired ones too: they stay listed). */
  async manifest(bundleId: string, revision: string): Promise<Manifest> {
    return guard(async () => {
      const entry = await this.#catalog.get(bundleId, revision);
      if (entry === undefined) throw revisionNotFound(bundleId, revision);
      const manifest = await this.#catalog.manifestOf(entry.manifest_digest);
      if (manifest === undefined) throw revisionNotFound(bundleId, revision);
      return manifest;
    });
  }

  /** Hides a revision from new sessions; its blobs become collectable by `gc`. */
  async retire(bundleId: string, revision: string): Promise<void> {
    return guard(async () => {
      if (!(await this.#catalog.retire(bundleId, revision, this.#clock()))) throw revisionNotFound(bundleId, revision);
    });
  }

  /**
   * Adds a signature to a committed revision (a second signer, a release manager): verified over
   * the revision's statement and, under a rule, by a signer the policy trusts. The same key again
   * keeps the stored signature. Answers the revision as `show` lists it.
   */
  async addSignature(bundleId: string, revision: string, signature: string): Promise<RevisionView> {
    return guard(async () => {
      const catalog = this.#catalog;
      const entry = await catalog.get(bundleId, revision);
      if (entry === undefined) throw revisionNotFound(bundleId, revision);
      const added = (this.#trust ?? NO_RULES).acceptAdditional(entry.receipt, entry.signatures, signature, this.#clock());
      if (added !== undefined) await catalog.addSignature(bundleId, revision, { ...added, at_commit: false });
      const now = await catalog.get(bundleId, revision);
      if (now === undefined) throw revisionNotFound(bundleId, revision);
      // The stored signature of that key (this one, or the one it signed with before).
      const stored = added === undefined ? undefined : now.signatures.find((s) => s.fingerprint === added.fingerprint);
      if (stored !== undefined && !stored.at_commit) await this.#attest?.signed(now, stored);
      return revisionView(now);
    });
  }

  /** Revisions committed, or signed later, at or after `at` (ms): the transparency log's catch-up. */
  async changedSince(at: number): Promise<readonly CatalogEntry[]> {
    return guard(() => this.#catalog.changedSince(at));
  }
}
