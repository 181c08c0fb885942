/**
 * The start-up audit of the embedded delivery store (G10). It reads the whole tree and changes
 * nothing: a malformed name, symlink, hard link, loose mode, foreign owner or foreign file
 * anywhere refuses start-up with an UnsafeStorageError naming it. Only when the whole tree passes
 * does recovery act on what the audit found (temp files, interrupted publications).
 *
 * Two hard links are ours and legitimate, both left by a crash between link(2) and unlink(2)
 * while publishing: a temp file and a partial may each share their inode with the blob they
 * became. Any other second link is refused.
 */
import * as fs from "node:fs";
import { join } from "node:path";
import { UnsafeStorageError } from "../../../core/errors.js";
import type { Limits } from "../../../core/limits.js";
import { isStageId } from "../../../delivery/stage.js";
import { checkDirStats, checkFileStats, checkPrivateDirSync } from "../../../storage/secure-fs.js";
import {
  BLOB_NAME_RE,
  BLOB_TEMP_NAME_RE,
  BLOBS_DIR,
  DB_FILE,
  DB_SIDE_FILES,
  LOCK_FILE,
  PARTIAL_NAME_RE,
  SHARD_NAME_RE,
  STAGES_DIR,
  type DeliveryLayout,
} from "./delivery-layout.js";

export interface DeliveryAudit {
  /** Our temp files in blob shards: never acknowledged, removed by recovery. */
  readonly blobTemps: readonly string[];
  /** Partials that share their inode with their own published blob: the partial name is dropped. */
  readonly twinPartials: readonly string[];
  /** Names of the stage directories present. */
  readonly stageDirs: readonly string[];
}

/** The store never needs more entries than this; a bigger tree is refused before it is walked further. */
const MAX_STORE_ENTRIES = 4_000_000;
const ROOT_FILES = new Set([LOCK_FILE, DB_FILE, ...DB_SIDE_FILES]);

export function auditDeliveryTree(layout: DeliveryLayout, limits: Limits): DeliveryAudit {
  const audit = new TreeAudit(layout, limits);
  audit.run();
  return { blobTemps: audit.blobTemps, twinPartials: audit.twinPartials, stageDirs: audit.stageDirs };
}

class TreeAudit {
  readonly blobTemps: string[] = [];
  readonly twinPartials: string[] = [];
  readonly stageDirs: string[] = [];
  readonly #layout: DeliveryLayout;
  readonly #limits: Limits;
  /** Inodes of blobs with two links, and of blobs whose second link was found to be a twin. */
  readonly #linkedBlobs = new Map<string, string>();
  readonly #twinned = new Set<string>();
  #entries = 0;

  constructor(layout: DeliveryLayout, limits: Limits) {
    this.#layout = layout;
    this.#limits = limits;
  }

  run(): void {
    const root = this.#layout.root;
    if (!fs.existsSync(root)) return;
    checkPrivateDirSync(root);
    for (const name of this.#readDir(root, ROOT_FILES.size + 2, "delivery-store-oversized")) {
      const path = join(root, name);
      const st = fs.lstatSync(path);
      if (name === BLOBS_DIR || name === STAGES_DIR) checkDirStats(path, st);
      else if (ROOT_FILES.has(name)) checkFileStats(path, st);
      else refuse(path, "is not a file of the delivery store");
    }
    if (fs.existsSync(this.#layout.blobsDir)) this.#auditBlobs();
    if (fs.existsSync(this.#layout.stagesDir)) this.#auditStages();
    for (const [inode, path] of this.#linkedBlobs) {
      if (!this.#twinned.has(inode)) {
        throw new UnsafeStorageError("unsafe-storage-hard-link", path, "has a second hard link outside the store's own publication");
      }
    }
  }

  #auditBlobs(): void {
    const blobs = this.#layout.blobsDir;
    for (const shard of this.#readDir(blobs, 256, "delivery-store-oversized")) {
      const shardPath = join(blobs, shard);
      if (!SHARD_NAME_RE.test(shard)) refuse(shardPath, "is not a blob shard (two hex digits)");
      checkDirStats(shardPath, fs.lstatSync(shardPath));
      for (const name of this.#readDir(shardPath, MAX_STORE_ENTRIES, "delivery-store-oversized")) {
        const path = join(shardPath, name);
        const st = fs.lstatSync(path);
        if (BLOB_NAME_RE.test(name) && name.startsWith(shard)) {
          if (checkStoreFile(path, st)) this.#linkedBlobs.set(inodeKey(st), path);
          continue;
        }
        const temp = BLOB_TEMP_NAME_RE.exec(name);
        if (temp !== null && temp[1]!.startsWith(shard)) {
          if (checkStoreFile(path, st)) this.#requireTwin(path, st, join(shardPath, temp[1]!));
          this.blobTemps.push(path);
          continue;
        }
        refuse(path, "is not a blob or a blob temp file of this store");
      }
    }
  }

  #auditStages(): void {
    const stages = this.#layout.stagesDir;
    // Bounded before any stage is read: a flood of directories must not be walked.
    const bound = 2 * this.#limits.activeStages;
    for (const stageId of this.#readDir(stages, bound, "delivery-stage-dir-oversized")) {
      const dir = join(stages, stageId);
      if (!isStageId(stageId)) refuse(dir, "is not a stage directory (32 hex digits)");
      checkDirStats(dir, fs.lstatSync(dir));
      for (const name of this.#readDir(dir, this.#limits.bundleComponents, "delivery-stage-dir-oversized")) {
        const path = join(dir, name);
        const st = fs.lstatSync(path);
        const partial = PARTIAL_NAME_RE.exec(name);
        if (partial === null) refuse(path, "is not a partial of this store");
        const hex = partial[1]!;
        if (checkStoreFile(path, st)) {
          this.#requireTwin(path, st, join(this.#layout.blobsDir, hex.slice(0, 2), hex));
          this.twinPartials.push(path);
        }
      }
      this.stageDirs.push(stageId);
    }
  }

  /** A second link is accepted only when it is the blob this file was being published as. */
  #requireTwin(path: string, st: fs.Stats, blobPath: string): void {
    let blob: fs.Stats | undefined;
    try {
      blob = fs.lstatSync(blobPath);
    } catch {
      blob = undefined;
    }
    if (blob === undefined || !blob.isFile() || inodeKey(blob) !== inodeKey(st)) {
      throw new UnsafeStorageError("unsafe-storage-hard-link", path, "has a second hard link that is not its own published blob");
    }
    this.#twinned.add(inodeKey(st));
  }

  /** Entry names of `dir`, refusing (before reading further) a directory with more than `max`. */
  #readDir(dir: string, max: number, code: string): string[] {
    const names: string[] = [];
    const handle = fs.opendirSync(dir);
    try {
      for (let entry = handle.readSync(); entry !== null; entry = handle.readSync()) {
        if (names.length >= max) throw new UnsafeStorageError(code, dir, `holds more than ${max} entries`);
        if (++this.#entries > MAX_STORE_ENTRIES) {
          throw new UnsafeStorageError("delivery-store-oversized", dir, `the store holds more than ${MAX_STORE_ENTRIES} entries`);
        }
        names.push(entry.name);
      }
    } finally {
      handle.closeSync();
    }
    return names.sort();
  }
}

/**
 * Checks a file against the private-file rules. Returns true when its only fault is a second
 * hard link, which the caller may accept as a publication twin. checkFileStats tests the link
 * count after type, owner and mode, so that error means every other rule passed.
 */
function checkStoreFile(path: string, st: fs.Stats): boolean {
  try {
    checkFileStats(path, st);
    return false;
  } catch (error) {
    if (error instanceof UnsafeStorageError && error.code === "unsafe-storage-hard-link" && st.nlink === 2) return true;
    throw error;
  }
}

function inodeKey(st: fs.Stats): string {
  return `${st.dev}:${st.ino}`;
}

function refuse(path: string, rule: string): never {
  throw new UnsafeStorageError("unsafe-storage-name", path, rule);
}
