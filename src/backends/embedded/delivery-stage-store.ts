/**
 * Stages of the embedded backend: metadata in the delivery database, one append-only partial
 * file per blob being received under stages/<stage_id>/. A partial only ever grows by appends
 * (O_APPEND) and is cut back only to its recorded durable offset, i.e. only bytes that were never
 * acknowledged are dropped.
 */
import * as fs from "node:fs";
import { join } from "node:path";
import { canonicalJson } from "../../core/canonical.js";
import { digestEquals, type Digest } from "../../core/digest.js";
import { IntegrityError, NotFoundError, UnsafeStorageError, errnoCode } from "../../core/errors.js";
import { manifestDigestOf, type BlobRef, type Manifest } from "../../delivery/manifest-types.js";
import type { PartialAppender, StageBlob, StageRecord, StageStore } from "../../delivery/stage.js";
import { checkFileStats, createPrivateFileSync, ensurePrivateDirSync, openPrivateFileSync } from "../../storage/secure-fs.js";
import type { EmbeddedBlobStore } from "./delivery-blob-store.js";
import { datasync, lstatOrUndefined, readExactly, writeAll } from "./delivery-fd-io.js";
import type { DeliveryDatabase } from "./delivery-db.js";
import { fire, type DeliveryFaults } from "./delivery-faults.js";
import { PARTIAL_NAME_RE, type DeliveryLayout } from "./delivery-layout.js";

interface StageRow {
  stage_id: string;
  manifest_digest: string;
  manifest: string;
  created_at: number;
  last_active_at: number;
  reserved_bytes: number;
}

interface StageBlobRow {
  stage_id: string;
  digest: string;
  byte_len: number;
  received: number;
  complete: number;
}

export class EmbeddedStageStore implements StageStore {
  readonly #db: DeliveryDatabase;
  readonly #layout: DeliveryLayout;
  readonly #blobs: EmbeddedBlobStore;
  readonly #faults: DeliveryFaults | undefined;
  /**
   * Verified manifests by digest: a stage's manifest is parsed and checked against its digest
   * once, not on every chunk. Entries go with their stage.
   */
  readonly #manifests = new Map<string, Manifest>();
  readonly #insertStage;
  readonly #insertBlob;
  readonly #selectStage;
  readonly #selectStageByManifest;
  readonly #selectStages;
  readonly #selectBlobs;
  readonly #selectAllBlobs;
  readonly #touch;
  readonly #setReceived;
  readonly #setComplete;
  readonly #requireBlob;
  readonly #deleteStage;

  constructor(db: DeliveryDatabase, layout: DeliveryLayout, blobs: EmbeddedBlobStore, faults?: DeliveryFaults) {
    this.#db = db;
    this.#layout = layout;
    this.#blobs = blobs;
    this.#faults = faults;
    this.#insertStage = db.prepare<[string, string, string, number, number, number]>(
      "INSERT INTO stages (stage_id, manifest_digest, manifest, created_at, last_active_at, reserved_bytes) VALUES (?, ?, ?, ?, ?, ?)",
    );
    this.#insertBlob = db.prepare<[string, string, number, number, number]>(
      "INSERT INTO stage_blobs (stage_id, digest, byte_len, received, complete) VALUES (?, ?, ?, ?, ?)",
    );
    this.#selectStage = db.prepare<[string], StageRow>("SELECT * FROM stages WHERE stage_id = ?");
    this.#selectStageByManifest = db.prepare<[string], StageRow>("SELECT * FROM stages WHERE manifest_digest = ?");
    this.#selectStages = db.prepare<[], StageRow>("SELECT * FROM stages ORDER BY created_at, stage_id");
    this.#selectBlobs = db.prepare<[string], StageBlobRow>("SELECT * FROM stage_blobs WHERE stage_id = ? ORDER BY digest");
    this.#selectAllBlobs = db.prepare<[], StageBlobRow>("SELECT * FROM stage_blobs ORDER BY stage_id, digest");
    this.#touch = db.prepare<[number, string]>("UPDATE stages SET last_active_at = ? WHERE stage_id = ?");
    this.#setReceived = db.prepare<[number, string, string]>(
      "UPDATE stage_blobs SET received = ? WHERE stage_id = ? AND digest = ? AND complete = 0",
    );
    this.#setComplete = db.prepare<[string, string]>(
      "UPDATE stage_blobs SET received = byte_len, complete = 1 WHERE stage_id = ? AND digest = ?",
    );
    this.#requireBlob = db.prepare<[string, string, number]>(
      `INSERT INTO stage_blobs (stage_id, digest, byte_len, received, complete) VALUES (?, ?, ?, 0, 0)
       ON CONFLICT (stage_id, digest) DO UPDATE SET received = 0, complete = 0`,
    );
    this.#deleteStage = db.prepare<[string]>("DELETE FROM stages WHERE stage_id = ?");
  }

  async create(stage: StageRecord): Promise<void> {
    this.#db.transaction(() => {
      this.#insertStage.run(
        stage.stage_id,
        stage.manifest.manifest_digest,
        canonicalJson(stage.manifest),
        stage.created_at,
        stage.last_active_at,
        stage.reserved_bytes,
      );
      for (const b of stage.blobs) this.#insertBlob.run(stage.stage_id, b.digest, b.byte_len, b.received, b.complete ? 1 : 0);
    })();
  }

  async get(stageId: string): Promise<StageRecord | undefined> {
    const row = this.#selectStage.get(stageId);
    return row === undefined ? undefined : toRecord(row, this.#selectBlobs.all(stageId), this.#manifests);
  }

  async findByManifest(manifestDigest: Digest): Promise<StageRecord | undefined> {
    const row = this.#selectStageByManifest.get(manifestDigest);
    return row === undefined ? undefined : toRecord(row, this.#selectBlobs.all(row.stage_id), this.#manifests);
  }

  async list(): Promise<readonly StageRecord[]> {
    const blobsByStage = new Map<string, StageBlobRow[]>();
    for (const b of this.#selectAllBlobs.all()) {
      const list = blobsByStage.get(b.stage_id) ?? [];
      list.push(b);
      blobsByStage.set(b.stage_id, list);
    }
    return this.#selectStages.all().map((row) => toRecord(row, blobsByStage.get(row.stage_id) ?? [], this.#manifests));
  }

  async touch(stageId: string, now: number): Promise<void> {
    this.#touch.run(now, stageId);
  }

  async openPartial(stageId: string, digest: Digest, durableOffset: number): Promise<PartialAppender> {
    const path = this.#layout.partialPath(stageId, digest);
    ensurePrivateDirSync(this.#layout.stageDir(stageId), { create: true });
    const existing = lstatOrUndefined(path);
    if (existing === undefined) {
      if (durableOffset > 0) throw await this.#lost(stageId, digest, durableOffset, 0);
      const fd = createPrivateFileSync(path, "append");
      try {
        fire(this.#faults, "partial-created");
      } catch (error) {
        fs.closeSync(fd);
        fs.rmSync(path, { force: true });
        throw error;
      }
      return new FilePartial(fd, path, 0, this.#faults);
    }
    checkFileStats(path, existing);
    const fd = openPrivateFileSync(path, "append");
    try {
      const size = fs.fstatSync(fd).size;
      if (size < durableOffset) throw await this.#lost(stageId, digest, durableOffset, size);
      // Bytes past the durable offset were never acknowledged: a write or sync that failed.
      if (size > durableOffset) fs.ftruncateSync(fd, durableOffset);
      return new FilePartial(fd, path, durableOffset, this.#faults);
    } catch (error) {
      fs.closeSync(fd);
      throw error;
    }
  }

  /** A partial shorter than its durable offset lost acknowledged bytes: ask for the blob again. */
  async #lost(stageId: string, digest: Digest, durableOffset: number, size: number): Promise<IntegrityError> {
    const row = this.#selectBlobs.all(stageId).find((b) => b.digest === digest);
    if (row !== undefined) await this.requireBlob(stageId, { digest, byte_len: row.byte_len });
    return new IntegrityError("stage-partial-lost", `the partial of ${digest} has ${size} of ${durableOffset} acknowledged bytes; it restarts at 0`, {
      details: { stage_id: stageId, digest, expected_offset: 0 },
    });
  }

  async partialLength(stageId: string, digest: Digest): Promise<number | undefined> {
    const st = lstatOrUndefined(this.#layout.partialPath(stageId, digest));
    return st?.isFile() === true ? st.size : undefined;
  }

  async readPartial(stageId: string, digest: Digest, position: number, length: number): Promise<Uint8Array> {
    const fd = openPrivateFileSync(this.#layout.partialPath(stageId, digest), "read");
    try {
      const bytes = await readExactly(fd, position, length);
      if (bytes.byteLength !== length) {
        throw new IntegrityError("stage-partial-short", `the partial of ${digest} ends before ${position + length}`, {
          details: { stage_id: stageId, digest },
        });
      }
      return bytes;
    } finally {
      fs.closeSync(fd);
    }
  }

  async recordReceived(stageId: string, digest: Digest, received: number, now: number): Promise<void> {
    const changed = this.#db.transaction(() => {
      fire(this.#faults, "offset-record");
      this.#touch.run(now, stageId);
      return this.#setReceived.run(received, stageId, digest).changes;
    })();
    if (changed !== 1) {
      throw new NotFoundError("stage-not-found", `stage ${stageId} no longer receives ${digest}`, { details: { stage_id: stageId, digest } });
    }
  }

  async requireBlob(stageId: string, ref: BlobRef): Promise<void> {
    fs.rmSync(this.#layout.partialPath(stageId, ref.digest), { force: true });
    this.#requireBlob.run(stageId, ref.digest, ref.byte_len);
  }

  async promote(stageId: string, ref: BlobRef, now: number): Promise<boolean> {
    const path = this.#layout.partialPath(stageId, ref.digest);
    if (lstatOrUndefined(path) === undefined) {
      if (!(await this.#blobs.has(ref.digest))) {
        await this.requireBlob(stageId, ref);
        throw new IntegrityError("stage-partial-lost", `neither the partial nor the blob ${ref.digest} exists; it restarts at 0`, {
          details: { stage_id: stageId, digest: ref.digest, expected_offset: 0 },
        });
      }
      this.#complete(stageId, ref.digest, now);
      return false;
    }
    const linked = await this.#blobs.link(ref, path);
    try {
      fire(this.#faults, "blob-linked");
      this.#complete(stageId, ref.digest, now);
    } catch (error) {
      // Unrecorded, the link must go: the partial is again the blob's only name, and a retry
      // never truncates a file that is also a published blob.
      if (linked) await this.#blobs.delete(ref.digest);
      throw error;
    }
    // A crash before this unlink leaves the partial as a second link of its blob; recovery drops it.
    fs.unlinkSync(path);
    return linked;
  }

  #complete(stageId: string, digest: Digest, now: number): void {
    this.#db.transaction(() => {
      fire(this.#faults, "offset-record");
      this.#touch.run(now, stageId);
      this.#setComplete.run(stageId, digest);
    })();
  }

  async markStored(stageId: string, ref: BlobRef): Promise<void> {
    fs.rmSync(this.#layout.partialPath(stageId, ref.digest), { force: true });
    this.#setComplete.run(stageId, ref.digest);
  }

  async remove(stageId: string): Promise<void> {
    const row = this.#selectStage.get(stageId);
    if (row !== undefined) this.#manifests.delete(row.manifest_digest);
    this.#deleteStage.run(stageId);
    fire(this.#faults, "stage-remove");
    removeStageDirSync(this.#layout.stageDir(stageId));
  }
}

/**
 * Removes a stage directory that holds nothing but partials. Anything else in it is not ours to
 * delete: refuse, naming it, and leave everything in place.
 */
export function removeStageDirSync(dir: string): void {
  let names: string[];
  try {
    names = fs.readdirSync(dir);
  } catch (error) {
    if (errnoCode(error) === "ENOENT") return;
    throw error;
  }
  for (const name of names) {
    const path = join(dir, name);
    const st = fs.lstatSync(path);
    if (!PARTIAL_NAME_RE.test(name) || !st.isFile()) {
      throw new UnsafeStorageError("unsafe-storage-name", path, "is not a partial this store created");
    }
  }
  for (const name of names) fs.unlinkSync(join(dir, name));
  fs.rmdirSync(dir);
}

class FilePartial implements PartialAppender {
  readonly #fd: number;
  readonly #path: string;
  readonly #durableOffset: number;
  readonly #faults: DeliveryFaults | undefined;
  #closed = false;

  constructor(fd: number, path: string, durableOffset: number, faults: DeliveryFaults | undefined) {
    this.#fd = fd;
    this.#path = path;
    this.#durableOffset = durableOffset;
    this.#faults = faults;
  }

  async append(bytes: Uint8Array): Promise<void> {
    await writeAll(this.#fd, bytes);
    fire(this.#faults, "chunk-written");
  }

  async sync(): Promise<void> {
    fire(this.#faults, "partial-sync");
    await datasync(this.#fd);
  }

  async abandon(): Promise<void> {
    // Best effort: this runs on an error path, and the next open cuts the partial back anyway.
    try {
      if (this.#durableOffset === 0) fs.rmSync(this.#path, { force: true });
      else fs.ftruncateSync(this.#fd, this.#durableOffset);
    } catch {
      // the original error is the one worth reporting
    }
    this.#closeOnce();
  }

  async close(): Promise<void> {
    this.#closeOnce();
  }

  /** A descriptor number is reused once closed: closing it twice could close someone else's file. */
  #closeOnce(): void {
    if (this.#closed) return;
    this.#closed = true;
    fs.closeSync(this.#fd);
  }
}

function toRecord(row: StageRow, blobs: readonly StageBlobRow[], manifests: Map<string, Manifest>): StageRecord {
  let manifest = manifests.get(row.manifest_digest);
  if (manifest === undefined) {
    manifest = JSON.parse(row.manifest) as Manifest;
    if (!digestEquals(manifestDigestOf(manifest), row.manifest_digest) || manifest.manifest_digest !== row.manifest_digest) {
      throw new IntegrityError("delivery-record-corrupt", `the stored manifest of stage ${row.stage_id} does not match its digest`, {
        status: 500,
        details: { stage_id: row.stage_id },
      });
    }
    manifests.set(row.manifest_digest, manifest);
  }
  return {
    stage_id: row.stage_id,
    manifest,
    created_at: row.created_at,
    last_active_at: row.last_active_at,
    reserved_bytes: row.reserved_bytes,
    blobs: blobs.map(toBlob),
  };
}

function toBlob(row: StageBlobRow): StageBlob {
  return { digest: row.digest as Digest, byte_len: row.byte_len, received: row.received, complete: row.complete === 1 };
}
