/**
 * Change sets in the node's home (DESIGN.md "Change sets"): `<home>/changes/sets/<hex>.json` and
 * `<home>/changes/blobs/<hex>`, private, each published whole (temp file, fsync, link) and never
 * rewritten: a name is its content's digest, so a file already there is the same bytes.
 */
import { join } from "node:path";
import { digestHex, sha256Digest, type Digest } from "../core/digest.js";
import { errnoCode } from "../core/errors.js";
import { ensurePrivateDirSync, publishNewFile, readPrivateFile } from "../storage/secure-fs.js";
import { blobMissing, checkBlob, parseManifest, serializeManifest, MAX_MANIFEST_BYTES, type ChangeSetManifest } from "./format.js";

/** A blob read whole: change sets hold what agents wrote, so the bound is the sandbox's file size. */
const MAX_BLOB_BYTES = 8 * 1024 * 1024 * 1024;

export class ChangeStore {
  readonly root: string;
  readonly #sets: string;
  readonly #blobs: string;

  constructor(root: string) {
    this.root = root;
    this.#sets = join(root, "sets");
    this.#blobs = join(root, "blobs");
    ensurePrivateDirSync(root, { create: true, recursive: true });
    ensurePrivateDirSync(this.#sets, { create: true });
    ensurePrivateDirSync(this.#blobs, { create: true });
  }

  /** Stores bytes under their digest (kept as they are when already stored). */
  async putBlob(bytes: Uint8Array): Promise<Digest> {
    const digest = sha256Digest(bytes);
    await publishNewFile(join(this.#blobs, digestHex(digest)), bytes);
    return digest;
  }

  /** Stores a manifest (its blobs first: a stored manifest never names a blob that is not there). */
  async putManifest(manifest: ChangeSetManifest): Promise<{ digest: Digest; bytes: Buffer }> {
    const { bytes, digest } = serializeManifest(manifest);
    await publishNewFile(join(this.#sets, `${digestHex(digest)}.json`), bytes);
    return { digest, bytes };
  }

  /** The manifest `digest` names, checked whole (format.ts parseManifest). */
  async manifest(digest: Digest): Promise<ChangeSetManifest> {
    const bytes = await this.manifestBytes(digest);
    return parseManifest(bytes, digest);
  }

  /** The manifest's stored bytes, unchecked (parseManifest checks them). */
  async manifestBytes(digest: Digest): Promise<Buffer> {
    return this.#read(join(this.#sets, `${digestHex(digest)}.json`), digest, MAX_MANIFEST_BYTES);
  }

  /** A blob's bytes, checked against its digest (and size when given). */
  async blob(digest: Digest, size?: number): Promise<Buffer> {
    const bytes = await this.#read(join(this.#blobs, digestHex(digest)), digest, MAX_BLOB_BYTES);
    checkBlob(bytes, digest, size);
    return bytes;
  }

  async #read(path: string, digest: Digest, max: number): Promise<Buffer> {
    try {
      return await readPrivateFile(path, max);
    } catch (error) {
      if (errnoCode(error) === "ENOENT" || errnoCode((error as { cause?: unknown }).cause) === "ENOENT") throw blobMissing(digest, { cause: error });
      throw error;
    }
  }
}
