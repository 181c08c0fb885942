/**
 * Commit records of the postgres backend. A commit is one transaction: the record, its blob
 * references and the removal of its stage's metadata (G7). The unique keys on the manifest
 * digest, the stage id and (bundle_id, revision) decide races between nodes committing at the
 * same moment: one record is written; the same manifest elsewhere answers the existing entry,
 * another manifest for the revision is a `revision-conflict`.
 */
import type { Digest } from "../../core/digest.js";
import { ConflictError } from "../../core/errors.js";
import type { CatalogEntry, CatalogStore } from "../../delivery/catalog.js";
import type { Manifest } from "../../delivery/manifest-types.js";
import { query, ROW_CHECKED_TYPES, transaction, type PgPool, type PgQueryable } from "./connection.js";
import { catalogEntryOf, manifestOf, ManifestCache, storedManifestText, type CommitRow } from "../../delivery/manifest-record.js";
import { signatureOf, signatureValues, type SignatureRow, type StoredSignature } from "../../delivery/signature-record.js";

const SELECT_SIGNATURES = "SELECT manifest_digest, fingerprint, key_type, principals, signature, signed_at, at_commit FROM warden_commit_signatures";
const INSERT_SIGNATURE =
  "INSERT INTO warden_commit_signatures (manifest_digest, fingerprint, key_type, principals, signature, signed_at, at_commit) " +
  "VALUES ($1, $2, $3, $4, $5, $6, $7 = 1) ON CONFLICT (manifest_digest, fingerprint) DO NOTHING";

/** Read with ROW_CHECKED_TYPES: a time out of range is refused by the row's check, naming the commit. */
const SELECT_COMMIT = "SELECT manifest_digest, stage_id, bundle_id, revision, manifest, committed_at, retired_at FROM warden_commits";

export class PostgresCatalogStore implements CatalogStore {
  readonly #pool: PgPool;
  readonly #manifests = new ManifestCache();

  constructor(pool: PgPool) {
    this.#pool = pool;
  }

  async findByManifest(manifestDigest: Digest): Promise<CatalogEntry | undefined> {
    return this.#one(this.#pool, "warden-commit-by-manifest", "manifest_digest = $1", [manifestDigest]);
  }

  async findByStage(stageId: string): Promise<CatalogEntry | undefined> {
    return this.#one(this.#pool, "warden-commit-by-stage", "stage_id = $1", [stageId]);
  }

  async get(bundleId: string, revision: string): Promise<CatalogEntry | undefined> {
    return this.#one(this.#pool, "warden-commit-by-revision", "bundle_id = $1 AND revision = $2", [bundleId, revision]);
  }

  async manifestOf(manifestDigest: Digest): Promise<Manifest | undefined> {
    const row = await this.#row(this.#pool, "warden-commit-by-manifest", "manifest_digest = $1", [manifestDigest]);
    return row === undefined ? undefined : manifestOf(row, this.#manifests);
  }

  async list(bundleId?: string): Promise<readonly CatalogEntry[]> {
    const result =
      bundleId === undefined
        ? await query<CommitRow>(this.#pool, "list bundles", { name: "warden-commit-all", text: `${SELECT_COMMIT} ORDER BY bundle_id, seq`, types: ROW_CHECKED_TYPES })
        : await query<CommitRow>(this.#pool, "list a bundle", {
            name: "warden-commit-of-bundle",
            text: `${SELECT_COMMIT} WHERE bundle_id = $1 ORDER BY seq`,
            values: [bundleId],
            types: ROW_CHECKED_TYPES,
          });
    const signatures = await this.#signaturesOf(this.#pool, result.rows.map((r) => r.manifest_digest));
    return result.rows.map((row) => this.#entry(row, signatures.get(row.manifest_digest) ?? []));
  }

  async changedSince(at: number): Promise<readonly CatalogEntry[]> {
    const result = await query<CommitRow>(this.#pool, "list recent commits", {
      name: "warden-commit-since",
      text: `${SELECT_COMMIT} WHERE committed_at >= $1 OR manifest_digest IN (SELECT manifest_digest FROM warden_commit_signatures WHERE signed_at >= $1) ORDER BY seq`,
      values: [at],
      types: ROW_CHECKED_TYPES,
    });
    const signatures = await this.#signaturesOf(this.#pool, result.rows.map((r) => r.manifest_digest));
    return result.rows.map((row) => this.#entry(row, signatures.get(row.manifest_digest) ?? []));
  }

  /** The stored signatures of these revisions, by manifest digest, each list in acceptance order. */
  async #signaturesOf(db: PgQueryable, digests: readonly string[]): Promise<Map<string, StoredSignature[]>> {
    const out = new Map<string, StoredSignature[]>();
    if (digests.length === 0) return out;
    const result = await query<SignatureRow & { manifest_digest: string }>(db, "read bundle signatures", {
      name: "warden-commit-signatures",
      text: `${SELECT_SIGNATURES} WHERE manifest_digest = ANY($1::text[]) ORDER BY seq`,
      values: [digests],
    });
    for (const row of result.rows) {
      const list = out.get(row.manifest_digest) ?? [];
      list.push(signatureOf(row, row.manifest_digest));
      out.set(row.manifest_digest, list);
    }
    return out;
  }

  async addSignature(bundleId: string, revision: string, signature: StoredSignature): Promise<boolean> {
    const row = await this.#row(this.#pool, "warden-commit-by-revision", "bundle_id = $1 AND revision = $2", [bundleId, revision]);
    if (row === undefined) return false;
    const inserted = await query(this.#pool, "add a bundle signature", {
      name: "warden-commit-signature-insert",
      text: INSERT_SIGNATURE,
      values: [row.manifest_digest, ...signatureValues(signature)],
    });
    return inserted.rowCount === 1;
  }

  async record(entry: CatalogEntry, manifest: Manifest): Promise<CatalogEntry> {
    return transaction(this.#pool, "record a commit", async (client) => {
      const inserted = await client.query({
        name: "warden-commit-insert",
        text:
          "INSERT INTO warden_commits (manifest_digest, stage_id, bundle_id, revision, manifest, committed_at) " +
          "VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT DO NOTHING",
        values: [entry.manifest_digest, entry.stage_id, entry.bundle_id, entry.revision, storedManifestText(manifest), entry.committed_at],
      });
      let recorded = entry;
      if (inserted.rowCount === 1) {
        await client.query({
          name: "warden-commit-blobs",
          text: "INSERT INTO warden_commit_blobs (manifest_digest, digest) SELECT $1, unnest($2::text[])",
          values: [entry.manifest_digest, entry.receipt.blobs.map((b) => b.digest)],
        });
        for (const signature of entry.signatures) {
          await client.query({ name: "warden-commit-signature-insert", text: INSERT_SIGNATURE, values: [entry.manifest_digest, ...signatureValues(signature)] });
        }
      } else {
        // A record exists for this manifest, this stage or this revision (another node, or an
        // earlier attempt whose answer was lost): the same manifest is the same commit.
        const same = await this.#one(client, "warden-commit-by-revision", "bundle_id = $1 AND revision = $2", [entry.bundle_id, entry.revision]);
        if (same === undefined || same.manifest_digest !== entry.manifest_digest) {
          throw new ConflictError(
            "revision-conflict",
            `revision ${JSON.stringify(entry.revision)} of ${JSON.stringify(entry.bundle_id)} is already committed with other content`,
            {
              details: {
                bundle_id: entry.bundle_id,
                revision: entry.revision,
                ...(same === undefined ? {} : { committed_manifest_digest: same.manifest_digest }),
              },
            },
          );
        }
        recorded = same;
      }
      await client.query({ name: "warden-commit-close-stage", text: "DELETE FROM warden_stages WHERE stage_id = $1", values: [entry.stage_id] });
      return recorded;
    });
  }

  async retire(bundleId: string, revision: string, now: number): Promise<boolean> {
    const result = await query(this.#pool, "retire a revision", {
      name: "warden-commit-retire",
      text: "UPDATE warden_commits SET retired_at = COALESCE(retired_at, $3) WHERE bundle_id = $1 AND revision = $2",
      values: [bundleId, revision, now],
    });
    return result.rowCount === 1;
  }

  async liveBlobDigests(): Promise<ReadonlySet<Digest>> {
    const result = await query<{ digest: Digest }>(this.#pool, "list live blobs", {
      name: "warden-commit-live-blobs",
      text:
        "SELECT DISTINCT b.digest FROM warden_commit_blobs b JOIN warden_commits c ON c.manifest_digest = b.manifest_digest " +
        "WHERE c.retired_at IS NULL",
    });
    return new Set(result.rows.map((r) => r.digest));
  }

  async #one(db: PgQueryable, name: string, where: string, values: readonly string[]): Promise<CatalogEntry | undefined> {
    const row = await this.#row(db, name, where, values);
    if (row === undefined) return undefined;
    const signatures = await this.#signaturesOf(db, [row.manifest_digest]);
    return this.#entry(row, signatures.get(row.manifest_digest) ?? []);
  }

  async #row(db: PgQueryable, name: string, where: string, values: readonly string[]): Promise<CommitRow | undefined> {
    const result = await query<CommitRow>(db, "read a commit", { name, text: `${SELECT_COMMIT} WHERE ${where}`, values: [...values], types: ROW_CHECKED_TYPES });
    return result.rows[0];
  }

  #entry(row: CommitRow, signatures: readonly StoredSignature[]): CatalogEntry {
    return catalogEntryOf(row, this.#manifests, signatures);
  }
}
