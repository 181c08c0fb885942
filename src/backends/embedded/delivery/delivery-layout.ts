/**
 * Where the embedded delivery backend keeps its state, and the only names allowed there. Start-up
 * recovery refuses any other name (G10), so every file this backend creates must match one of
 * these patterns.
 *
 *   <home>/delivery/
 *     lock                      flock held by the process that has the store open
 *     catalog.sqlite(-wal,-shm) stage and commit metadata
 *     blobs/<ab>/<abcd…64 hex>  published blobs, sharded by the first two hex digits
 *     blobs/<ab>/.tmp-<64 hex>.<16 hex>   a blob being published
 *     stages/<32 hex>/<64 hex>.partial    a blob being received
 */
import { join, sep } from "node:path";
import { digestHex, type Digest } from "../../../core/digest.js";
import { TEMP_PREFIX } from "../../../storage/secure-fs.js";

export const DELIVERY_DIR = "delivery";
export const LOCK_FILE = "lock";
export const DB_FILE = "catalog.sqlite";
/** SQLite's companions of the database file (WAL mode; -journal only while switching modes). */
export const DB_SIDE_FILES: readonly string[] = ["-wal", "-shm", "-journal"].map((suffix) => DB_FILE + suffix);
export const BLOBS_DIR = "blobs";
export const STAGES_DIR = "stages";
const PARTIAL_SUFFIX = ".partial";

export const SHARD_NAME_RE = /^[0-9a-f]{2}$/;
export const BLOB_NAME_RE = /^[0-9a-f]{64}$/;
export const PARTIAL_NAME_RE = /^([0-9a-f]{64})\.partial$/;
/** `tempPathFor(blobPath)` names: the target blob's name and 16 random hex digits. */
export const BLOB_TEMP_NAME_RE = new RegExp(`^${TEMP_PREFIX.replace(".", "\\.")}([0-9a-f]{64})\\.[0-9a-f]{16}$`);

export class DeliveryLayout {
  readonly root: string;
  readonly lockPath: string;
  readonly dbPath: string;
  readonly blobsDir: string;
  readonly stagesDir: string;

  constructor(home: string) {
    this.root = join(home, DELIVERY_DIR);
    this.lockPath = join(this.root, LOCK_FILE);
    this.dbPath = join(this.root, DB_FILE);
    this.blobsDir = join(this.root, BLOBS_DIR);
    this.stagesDir = join(this.root, STAGES_DIR);
  }

  // The names below are appended, not join()ed: a begin and a commit compute them for every blob,
  // and a blob path's two joins cost about 2 us, a good part of the lstat the path is for. Every
  // part is already clean: the directories were joined once, a digest's hex and a stage id are
  // checked before they name anything.

  shardDir(digest: Digest): string {
    return this.blobsDir + sep + digestHex(digest).slice(0, 2);
  }

  blobPath(digest: Digest): string {
    const hex = digestHex(digest);
    return this.blobsDir + sep + hex.slice(0, 2) + sep + hex;
  }

  stageDir(stageId: string): string {
    return this.stagesDir + sep + stageId;
  }

  partialPath(stageId: string, digest: Digest): string {
    return this.stagesDir + sep + stageId + sep + digestHex(digest) + PARTIAL_SUFFIX;
  }
}
