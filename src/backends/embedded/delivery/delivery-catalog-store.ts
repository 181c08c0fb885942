/**
 * Commit records of the embedded backend, in the delivery database. The record and the removal
 * of its stage's metadata are one transaction (synchronous=FULL): after a crash the bundle is
 * either committed with its stage closed, or still staging.
 */
import type { Digest } from "../../../core/digest.js";
import type { CatalogEntry, CatalogStore } from "../../../delivery/catalog.js";
import { revisionConflict } from "../../../delivery/delivery-errors.js";
import { catalogEntryOf, manifestOf, ManifestCache, storedManifestText, type CommitRow } from "../../../delivery/manifest-record.js";
import type { Manifest } from "../../../delivery/manifest-types.js";
import { signatureOf, signatureValues, type SignatureRow, type StoredSignature } from "../../../delivery/signature-record.js";
import type { DeliveryDatabase } from "./delivery-db.js";
import { fire, type DeliveryFaults } from "./delivery-faults.js";

const COLUMNS = "manifest_digest, stage_id, bundle_id, revision, manifest, committed_at, retired_at";

export class EmbeddedCatalogStore implements CatalogStore {
  readonly #db: DeliveryDatabase;
  readonly #faults: DeliveryFaults | undefined;
  readonly #byManifest;
  readonly #byStage;
  readonly #byRevision;
  readonly #all;
  readonly #allOfBundle;
  readonly #since;
  readonly #insert;
  readonly #insertBlob;
  readonly #closeStage;
  readonly #retire;
  readonly #liveDigests;
  readonly #signaturesOf;
  readonly #insertSignature;
  readonly #manifests = new ManifestCache();
  readonly #stageClosed: ((stageId: string) => void) | undefined;

  /** `stageClosed` hears of every stage a commit record closed, once that record is durable. */
  constructor(db: DeliveryDatabase, faults?: DeliveryFaults, stageClosed?: (stageId: string) => void) {
    this.#db = db;
    this.#faults = faults;
    this.#stageClosed = stageClosed;
    this.#byManifest = db.prepare<[string], CommitRow>(`SELECT ${COLUMNS} FROM commits WHERE manifest_digest = ?`);
    this.#byStage = db.prepare<[string], CommitRow>(`SELECT ${COLUMNS} FROM commits WHERE stage_id = ?`);
    this.#byRevision = db.prepare<[string, string], CommitRow>(`SELECT ${COLUMNS} FROM commits WHERE bundle_id = ? AND revision = ?`);
    this.#all = db.prepare<[], CommitRow>(`SELECT ${COLUMNS} FROM commits ORDER BY bundle_id, seq`);
    this.#allOfBundle = db.prepare<[string], CommitRow>(`SELECT ${COLUMNS} FROM commits WHERE bundle_id = ? ORDER BY seq`);
    this.#since = db.prepare<[number, number], CommitRow>(
      `SELECT ${COLUMNS} FROM commits WHERE committed_at >= ? OR manifest_digest IN (SELECT manifest_digest FROM commit_signatures WHERE signed_at >= ?) ORDER BY seq`,
    );
    this.#insert = db.prepare<[string, string, string, string, string, number]>(
      "INSERT INTO commits (manifest_digest, stage_id, bundle_id, revision, manifest, committed_at) VALUES (?, ?, ?, ?, ?, ?)",
    );
    this.#insertBlob = db.prepare<[string, string]>("INSERT INTO commit_blobs (manifest_digest, digest) VALUES (?, ?)");
    this.#closeStage = db.prepare<[string]>("DELETE FROM stages WHERE stage_id = ?");
    this.#retire = db.prepare<[number, string, string]>(
      "UPDATE commits SET retired_at = ? WHERE bundle_id = ? AND revision = ? AND retired_at IS NULL",
    );
    this.#signaturesOf = db.prepare<[string], SignatureRow>(
      "SELECT fingerprint, key_type, principals, signature, signed_at, at_commit FROM commit_signatures WHERE manifest_digest = ? ORDER BY rowid",
    );
    this.#insertSignature = db.prepare<[string, string, string, string, string, number, number]>(
      "INSERT OR IGNORE INTO commit_signatures (manifest_digest, fingerprint, key_type, principals, signature, signed_at, at_commit) VALUES (?, ?, ?, ?, ?, ?, ?)",
    );
    this.#liveDigests = db
      .prepare<[], { digest: string }>(
        "SELECT DISTINCT b.digest FROM commit_blobs b JOIN commits c ON c.manifest_digest = b.manifest_digest WHERE c.retired_at IS NULL",
      )
      .pluck();
  }

  async findByManifest(manifestDigest: Digest): Promise<CatalogEntry | undefined> {
    return this.#entry(this.#byManifest.get(manifestDigest));
  }

  async findByStage(stageId: string): Promise<CatalogEntry | undefined> {
    return this.#entry(this.#byStage.get(stageId));
  }

  async get(bundleId: string, revision: string): Promise<CatalogEntry | undefined> {
    return this.#entry(this.#byRevision.get(bundleId, revision));
  }

  async manifestOf(manifestDigest: Digest): Promise<Manifest | undefined> {
    const row = this.#byManifest.get(manifestDigest);
    return row === undefined ? undefined : manifestOf(row, this.#manifests);
  }

  async list(bundleId?: string): Promise<readonly CatalogEntry[]> {
    const rows = bundleId === undefined ? this.#all.all() : this.#allOfBundle.all(bundleId);
    return rows.map((row) => this.#entry(row)!);
  }

  async changedSince(at: number): Promise<readonly CatalogEntry[]> {
    return this.#since.all(at, at).map((row) => this.#entry(row)!);
  }

  async record(entry: CatalogEntry, manifest: Manifest): Promise<CatalogEntry> {
    const recorded = this.#db.transaction((): CatalogEntry => {
      const sameRevision = this.#entry(this.#byRevision.get(entry.bundle_id, entry.revision));
      if (sameRevision !== undefined) {
        if (sameRevision.manifest_digest === entry.manifest_digest) {
          this.#closeStage.run(entry.stage_id);
          return sameRevision;
        }
        throw revisionConflict(entry.bundle_id, entry.revision, sameRevision.manifest_digest);
      }
      fire(this.#faults, "commit-record");
      this.#insert.run(entry.manifest_digest, entry.stage_id, entry.bundle_id, entry.revision, storedManifestText(manifest), entry.committed_at);
      for (const blob of entry.receipt.blobs) this.#insertBlob.run(entry.manifest_digest, blob.digest);
      for (const signature of entry.signatures) this.#insertSignature.run(entry.manifest_digest, ...signatureValues(signature));
      this.#closeStage.run(entry.stage_id);
      return entry;
    })();
    this.#stageClosed?.(entry.stage_id);
    fire(this.#faults, "commit-recorded");
    return recorded;
  }

  async addSignature(bundleId: string, revision: string, signature: StoredSignature): Promise<boolean> {
    const row = this.#byRevision.get(bundleId, revision);
    if (row === undefined) return false;
    return this.#insertSignature.run(row.manifest_digest, ...signatureValues(signature)).changes === 1;
  }

  async retire(bundleId: string, revision: string, now: number): Promise<boolean> {
    if (this.#retire.run(now, bundleId, revision).changes === 1) return true;
    return this.#byRevision.get(bundleId, revision) !== undefined;
  }

  async liveBlobDigests(): Promise<ReadonlySet<Digest>> {
    return new Set(this.#liveDigests.all() as unknown as Digest[]);
  }

  #entry(row: CommitRow | undefined): CatalogEntry | undefined {
    if (row === undefined) return undefined;
    const where = `${row.bundle_id}/${row.revision}`;
    return catalogEntryOf(row, this.#manifests, this.#signaturesOf.all(row.manifest_digest).map((s) => signatureOf(s, where)));
  }
}
