/**
 * Stages of the embedded backend: stage records in the delivery database, one append-only partial
 * file per blob being received under stages/<stage_id>/. The partial is the record of what was
 * received. This process (the only one with the store open: it holds the store's lock) keeps each
 * blob's received offset in memory, and a restarted one reads it back from the partial's length,
 * which start-up repair makes durable. So a chunk costs its write and neither a database commit
 * nor an fsync; a partial's bytes are made durable once, at commit (`syncReceived`, `promote`),
 * before it is published. A partial only ever grows by appends (O_APPEND) and is cut back only to
 * bytes that were never acknowledged.
 *
 * The rows' `received` column is no longer maintained (older versions recorded every chunk
 * there); `complete` records blobs found already stored.
 */
import * as fs from "node:fs";
import * as os from "node:os";
import { join } from "node:path";
import type { Digest } from "../../../core/digest.js";
import { IntegrityError, NotFoundError, UnsafeStorageError, errnoCode, isStorageFull } from "../../../core/errors.js";
import { partialLost } from "../../../delivery/delivery-errors.js";
import { checkStageRecord, ManifestCache, storedManifestText } from "../../../delivery/manifest-record.js";
import type { BlobRef, Manifest } from "../../../delivery/manifest-types.js";
import { missingOf, type ChunkTarget, type PartialAppender, type StageActivity, type StageBlob, type StageRecord, type StageStore } from "../../../delivery/stage.js";
import { checkFileStats, createPrivateFd, createPrivateFileSync, ensurePrivateDirSync, openPrivateFileSync } from "../../../storage/secure-fs.js";
import type { EmbeddedBlobStore } from "./delivery-blob-store.js";
import { BoundedRunner, createAppendFile, datasync, lstatOrUndefined, readExactly, writeAllSync, writevAll } from "./delivery-fd-io.js";
import type { DeliveryDatabase } from "./delivery-db.js";
import { fire, type DeliveryFaults } from "./delivery-faults.js";
import { PARTIAL_NAME_RE, type DeliveryLayout } from "./delivery-layout.js";

/**
 * A piece up to this size, with no write before it in flight, is appended on this thread: copying
 * it costs less than handing it to an I/O thread and back (a small file's whole chunk). Anything
 * else is written there (see FilePartial).
 */
const SYNC_WRITE_BYTES = 16 * 1024;

/** fdatasyncs of complete partials in flight at once while stages upload (see BoundedRunner). */
const SYNCS_IN_FLIGHT = 4;
/** ... and once a commit waits for them (nothing more is written for its stage). */
const SYNCS_IN_FLIGHT_AT_COMMIT = 8;

/**
 * Empty partials created ahead of the chunks that fill them, and created at once (see
 * `#createAhead`). Bounded so that a begin alone creates a few files, not one per blob of a large
 * bundle.
 */
const CREATE_AHEAD = 16;
const CREATES_IN_FLIGHT = 4;

/**
 * Descriptors of complete partials kept open for their fdatasync (see FilePartial's `close`), at
 * most this many at once in the process; past it a partial is closed and its sync opens it again.
 */
const SYNC_FDS_HELD = 64;

/**
 * Activity is written to the stage's row at most this often: a crash can make a stage look up to
 * this much older (against an inactivity expiry of minutes), and a chunk stream costs no commit.
 */
const ACTIVITY_PERSIST_MS = 1000;

interface StageRow {
  stage_id: string;
  manifest_digest: string;
  created_at: number;
  last_active_at: number;
  reserved_bytes: number;
}

interface StageBlobRow {
  digest: string;
  byte_len: number;
  complete: number;
}

interface BlobProgress {
  readonly byte_len: number;
  received: number;
  complete: boolean;
  /**
   * The fdatasync of its complete partial (at commit); resolves to the error when it failed (the
   * partial's bytes are then not known to be on disk).
   */
  sync: Promise<unknown> | undefined;
  /** This process created or opened its partial (and checked the path) already. */
  opened: boolean;
  /**
   * Its empty partial being created ahead of its first chunk (settles either way), and the
   * descriptor that creation opened, until a chunk takes it (or the blob or stage goes).
   */
  creating?: Promise<void>;
  aheadFd?: number;
  /**
   * The descriptor its complete partial was written through, kept for the fdatasync: the sync
   * takes it (and closes it), or the blob or stage going closes it.
   */
  syncFd?: number;
  /** A chunk has its partial open now (its descriptor is offered for the sync when it closes). */
  appending?: boolean;
}

/** What this process knows of a stage: its row, and more. */
interface LiveStage {
  readonly row: StageRow;
  /** Each blob's progress, by digest, in digest order. */
  blobs: Map<string, BlobProgress>;
  /** Latest activity seen, and the latest written to the row. */
  lastActive: number;
  persistedActive: number;
  /** Blobs received in full whose fdatasync has not started yet. */
  unsynced: Set<Digest>;
  /** This process checked (or created) the stage's directory: `remove` is the only way it goes. */
  dirChecked: boolean;
  /** Blobs whose partial is to be created ahead, in the order the client is told to send them, and the next one to create. */
  readonly ahead: readonly Digest[];
  nextAhead: number;
}

const STAGE_COLUMNS = "stage_id, manifest_digest, created_at, last_active_at, reserved_bytes";

export class EmbeddedStageStore implements StageStore {
  readonly #db: DeliveryDatabase;
  readonly #layout: DeliveryLayout;
  readonly #blobs: EmbeddedBlobStore;
  readonly #faults: DeliveryFaults | undefined;
  /**
   * Verified manifests by digest: a stage's manifest is parsed and checked against its digest
   * once, not on every chunk. Entries go with their stage.
   */
  readonly #manifests = new ManifestCache();
  /**
   * Stages this process has seen, read back from their rows once. Rows are deleted by `remove` and
   * by a commit record (the catalog calls `closed`): both drop the entry here too.
   */
  readonly #live = new Map<string, LiveStage>();
  readonly #syncs = new BoundedRunner(SYNCS_IN_FLIGHT);
  readonly #creates = new BoundedRunner(CREATES_IN_FLIGHT);
  /** Each stage's partials being created ahead: `remove` waits for them before it lists the directory. */
  readonly #creatingAhead = new Map<string, Set<Promise<void>>>();
  /** Descriptors kept for syncs (BlobProgress.syncFd), bounded by SYNC_FDS_HELD. */
  #syncFdsHeld = 0;
  readonly #insertStage;
  readonly #insertBlob;
  readonly #selectStage;
  readonly #selectStageByManifest;
  readonly #selectStages;
  readonly #selectActivity;
  readonly #selectManifest;
  readonly #selectBlobs;
  readonly #touch;
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
    this.#selectStage = db.prepare<[string], StageRow>(`SELECT ${STAGE_COLUMNS} FROM stages WHERE stage_id = ?`);
    this.#selectStageByManifest = db.prepare<[string], StageRow>(`SELECT ${STAGE_COLUMNS} FROM stages WHERE manifest_digest = ?`);
    this.#selectStages = db.prepare<[], StageRow>(`SELECT ${STAGE_COLUMNS} FROM stages ORDER BY created_at, stage_id`);
    this.#selectActivity = db.prepare<[], StageActivity>("SELECT stage_id, last_active_at, reserved_bytes FROM stages");
    this.#selectManifest = db.prepare<[string], { manifest: string }>("SELECT manifest FROM stages WHERE stage_id = ?");
    this.#selectBlobs = db.prepare<[string], StageBlobRow>("SELECT digest, byte_len, complete FROM stage_blobs WHERE stage_id = ? ORDER BY digest");
    this.#touch = db.prepare<[number, string]>("UPDATE stages SET last_active_at = max(last_active_at, ?) WHERE stage_id = ?");
    this.#setComplete = db.prepare<[string, string]>(
      "UPDATE stage_blobs SET received = byte_len, complete = 1 WHERE stage_id = ? AND digest = ?",
    );
    this.#requireBlob = db.prepare<[string, string, number]>(
      `INSERT INTO stage_blobs (stage_id, digest, byte_len, received, complete) VALUES (?, ?, ?, 0, 0)
       ON CONFLICT (stage_id, digest) DO UPDATE SET received = 0, complete = 0`,
    );
    this.#deleteStage = db.prepare<[string]>("DELETE FROM stages WHERE stage_id = ?");
    if (writesAlwaysMoveCtime(layout.stagesDir)) this.partialIdentity = (stageId, digest) => this.#identity(stageId, digest);
  }

  async create(stage: StageRecord): Promise<void> {
    this.#db.transaction(() => {
      this.#insertStage.run(
        stage.stage_id,
        stage.manifest.manifest_digest,
        storedManifestText(stage.manifest),
        stage.created_at,
        stage.last_active_at,
        stage.reserved_bytes,
      );
      for (const b of stage.blobs) this.#insertBlob.run(stage.stage_id, b.digest, b.byte_len, b.received, b.complete ? 1 : 0);
    })();
    this.#manifests.remember(stage.manifest);
    this.#live.set(stage.stage_id, {
      row: {
        stage_id: stage.stage_id,
        manifest_digest: stage.manifest.manifest_digest,
        created_at: stage.created_at,
        last_active_at: stage.last_active_at,
        reserved_bytes: stage.reserved_bytes,
      },
      blobs: new Map(stage.blobs.map((b) => [b.digest, { byte_len: b.byte_len, received: b.received, complete: b.complete, sync: undefined, opened: false }])),
      lastActive: stage.last_active_at,
      persistedActive: stage.last_active_at,
      unsynced: new Set(),
      dirChecked: false,
      ahead: missingOf(stage).map((m) => m.digest),
      nextAhead: 0,
    });
    this.#createAhead(stage.stage_id, this.#live.get(stage.stage_id)!, 0);
  }

  /**
   * Creates the empty partials of the next CREATE_AHEAD blobs the client will send (from `from`,
   * their position in the order begin gave it), in the background. Creating a file waits on the
   * file system's journal, which the fdatasyncs of blobs received before keep busy: a few
   * milliseconds each on a busy disk, that a chunk would otherwise wait for before it can be
   * written. A chunk then opens its blob's empty partial (as after a restart) without waiting.
   * Durability is unchanged: an empty partial records nothing (received 0), as a missing one does.
   */
  #createAhead(stageId: string, live: LiveStage, from: number): void {
    const until = Math.min(live.ahead.length, from + CREATE_AHEAD);
    if (live.nextAhead >= until) return;
    if (!live.dirChecked) this.#ensureStageDir(stageId, live);
    let pending = this.#creatingAhead.get(stageId);
    if (pending === undefined) this.#creatingAhead.set(stageId, (pending = new Set()));
    for (; live.nextAhead < until; live.nextAhead++) {
      const digest = live.ahead[live.nextAhead]!;
      const blob = live.blobs.get(digest);
      if (blob === undefined || blob.complete || blob.received > 0 || blob.opened) continue;
      const path = this.#layout.partialPath(stageId, digest);
      const creating = this.#creates
        .run(() => createPrivateFd(path, "append"))
        .then(
          (fd) => {
            // Kept for the blob's first chunk, which then opens nothing (CREATE_AHEAD bounds them);
            // a blob or stage gone meanwhile closes it here.
            if (this.#live.get(stageId) === live && live.blobs.get(digest) === blob && blob.aheadFd === undefined && !blob.opened) blob.aheadFd = fd;
            else fs.closeSync(fd);
          },
          () => undefined, // a chunk creates it itself, and reports what goes wrong
        )
        .finally(() => {
          pending.delete(creating);
          if (pending.size === 0 && this.#creatingAhead.get(stageId) === pending) this.#creatingAhead.delete(stageId);
          if (blob.creating === creating) blob.creating = undefined;
        });
      blob.creating = creating;
      pending.add(creating);
    }
  }

  async get(stageId: string): Promise<StageRecord | undefined> {
    const live = this.#live.get(stageId);
    return live !== undefined ? this.#recordOf(live.row, stageId) : this.#recordOf(this.#selectStage.get(stageId), stageId);
  }

  /** A map lookup for a stage this process has seen: its other blobs are neither read nor copied. */
  async chunkTarget(stageId: string, digest: Digest): Promise<ChunkTarget | undefined> {
    const live = this.#liveOf(stageId);
    if (live === undefined) return undefined;
    const blob = live.blobs.get(digest);
    return {
      stage_id: live.row.stage_id,
      manifest: this.#manifestOf(live.row),
      last_active_at: Math.max(live.row.last_active_at, live.lastActive),
      blob: blob === undefined ? undefined : stageBlobOf(digest, blob),
    };
  }

  /** A commit record closed the stage (and deleted its row). */
  closed(stageId: string): void {
    const live = this.#live.get(stageId);
    if (live !== undefined) this.#forget(stageId, live);
  }

  /** Drops what this process knows of a stage that is gone, closing the descriptors its blobs hold. */
  #forget(stageId: string, live: LiveStage): void {
    this.#manifests.forget(live.row.manifest_digest);
    for (const blob of live.blobs.values()) this.#release(blob);
    if (this.#live.get(stageId) === live) this.#live.delete(stageId);
  }

  async findByManifest(manifestDigest: Digest): Promise<StageRecord | undefined> {
    const row = this.#selectStageByManifest.get(manifestDigest);
    return row === undefined ? undefined : this.#recordOf(row, row.stage_id);
  }

  async list(): Promise<readonly StageRecord[]> {
    return this.#selectStages.all().map((row) => this.#recordOf(row, row.stage_id)!);
  }

  async activity(): Promise<readonly StageActivity[]> {
    return this.#selectActivity.all().map((row) => {
      // Activity is persisted lazily: this process's own record of it is the newer one.
      const live = this.#live.get(row.stage_id);
      return live === undefined || !(live.lastActive > row.last_active_at) ? row : { ...row, last_active_at: live.lastActive };
    });
  }

  async touch(stageId: string, now: number): Promise<void> {
    const live = this.#liveOf(stageId);
    if (live !== undefined) this.#noteActivity(stageId, live, now);
  }

  async openPartial(stageId: string, digest: Digest, received: number): Promise<PartialAppender> {
    const path = this.#layout.partialPath(stageId, digest);
    const live = this.#live.get(stageId);
    if (live !== undefined) this.#syncAhead(stageId, live);
    const blob = live?.blobs.get(digest);
    // A partial this process opened before is opened straight away: the descriptor checks
    // (regular file, owner, mode, one link) still run on every open.
    if (blob?.opened === true && received > 0) return this.#reopen(stageId, digest, path, received, blob);
    if (live !== undefined && blob !== undefined) {
      const index = live.ahead.indexOf(digest, Math.max(0, live.nextAhead - CREATE_AHEAD));
      if (index >= 0) this.#createAhead(stageId, live, index + 1);
      if (blob.creating !== undefined) await blob.creating;
      if (blob.aheadFd !== undefined && received === 0) return this.#takeCreatedAhead(stageId, digest, path, blob);
    }
    // The stage directory is checked (made, if missing) once per stage by this process.
    if (live?.dirChecked !== true) this.#ensureStageDir(stageId, live);
    const existing = lstatOrUndefined(path);
    if (existing === undefined) {
      if (received > 0) throw await this.#lost(stageId, digest, received, 0);
      let fd: number;
      try {
        fd = await createAppendFile(path);
      } catch (error) {
        // The directory checked before is gone (removed by hand): check it again, once.
        if (errnoCode(error) !== "ENOENT") throw error;
        this.#ensureStageDir(stageId, live);
        fd = createPrivateFileSync(path, "append");
      }
      try {
        fire(this.#faults, "partial-created");
      } catch (error) {
        fs.closeSync(fd);
        fs.rmSync(path, { force: true });
        throw error;
      }
      if (blob !== undefined) blob.opened = true;
      return this.#partial(fd, path, 0, stageId, digest, blob);
    }
    checkFileStats(path, existing);
    const partial = await this.#reopen(stageId, digest, path, received, blob);
    if (blob !== undefined) blob.opened = true;
    return partial;
  }

  /**
   * Takes the empty partial created ahead for the blob's first chunk, through the descriptor its
   * creation opened: to the chunk it is the partial it created (the path's checks, and the same
   * `partial-created` point), only without the wait. The path must still name that file, empty: a
   * file put in its place is checked and opened as any existing partial is.
   */
  async #takeCreatedAhead(stageId: string, digest: Digest, path: string, blob: BlobProgress): Promise<PartialAppender> {
    const fd = blob.aheadFd!;
    blob.aheadFd = undefined;
    let existing: fs.Stats | undefined;
    let held: fs.Stats | undefined;
    try {
      existing = lstatOrUndefined(path);
      if (existing !== undefined) {
        checkFileStats(path, existing);
        held = fs.fstatSync(fd);
      }
    } catch (error) {
      fs.closeSync(fd);
      throw error;
    }
    let partial: PartialAppender;
    if (existing !== undefined && held !== undefined && held.dev === existing.dev && held.ino === existing.ino && held.size === 0) {
      partial = this.#partial(fd, path, 0, stageId, digest, blob);
    } else {
      fs.closeSync(fd);
      if (existing === undefined) return this.openPartial(stageId, digest, 0);
      partial = await this.#reopen(stageId, digest, path, 0, blob);
    }
    try {
      fire(this.#faults, "partial-created");
    } catch (error) {
      await partial.abandon();
      throw error;
    }
    blob.opened = true;
    return partial;
  }

  #ensureStageDir(stageId: string, live: LiveStage | undefined): void {
    // `recursive` skips ensurePrivateDirSync's fsync of stages/ (which exists: the store's open
    // made it). A stage directory's name needs no durability of its own: its partials' names are
    // never synced either, nothing in it is durable before commit (which publishes each partial
    // by a link into a shard directory it fsyncs), and a stage that lost its directory in a power
    // loss resumes each blob from 0, as one that lost its partials does (docs/durability.md).
    ensurePrivateDirSync(this.#layout.stageDir(stageId), { create: true, recursive: true });
    if (live !== undefined) live.dirChecked = true;
  }

  async #reopen(stageId: string, digest: Digest, path: string, received: number, blob: BlobProgress | undefined): Promise<PartialAppender> {
    let fd: number;
    try {
      fd = openPrivateFileSync(path, "append");
    } catch (error) {
      if (errnoCode(error) === "ENOENT") throw await this.#lost(stageId, digest, received, 0);
      throw error;
    }
    try {
      const size = fs.fstatSync(fd).size;
      if (size < received) throw await this.#lost(stageId, digest, received, size);
      // Bytes past the received offset were never acknowledged: a chunk that failed midway.
      if (size > received) fs.ftruncateSync(fd, received);
      return this.#partial(fd, path, received, stageId, digest, blob);
    } catch (error) {
      fs.closeSync(fd);
      throw error;
    }
  }

  /**
   * The appender of a partial opened at `openedAt`. When it closes with its blob just received in
   * full (and no sync started), its descriptor is kept for the blob's fdatasync instead of being
   * closed and opened again for it: an fdatasync through any descriptor of a file syncs the
   * file's data, and the one the bytes were written through is also one that sees any writeback
   * error since they were written.
   */
  #partial(fd: number, path: string, openedAt: number, stageId: string, digest: Digest, blob: BlobProgress | undefined): FilePartial {
    if (blob === undefined) return new FilePartial(fd, path, openedAt, this.#faults);
    blob.appending = true;
    const owner: PartialOwner = {
      abandoned: () => {
        blob.appending = false;
      },
      closing: (kept: number): boolean => {
        blob.appending = false;
        // Only for a blob still of a live stage: whatever dropped it closes nothing it never saw.
        if (this.#live.get(stageId)?.blobs.get(digest) !== blob) return false;
        if (blob.complete || blob.received !== blob.byte_len || blob.sync !== undefined || blob.syncFd !== undefined || this.#syncFdsHeld >= SYNC_FDS_HELD) return false;
        blob.syncFd = kept;
        this.#syncFdsHeld++;
        return true;
      },
    };
    return new FilePartial(fd, path, openedAt, this.#faults, owner);
  }

  /** Closes the descriptors a blob holds (created ahead, or kept for its sync): it restarts, is stored, or its stage goes. */
  #release(blob: BlobProgress): void {
    if (blob.aheadFd !== undefined) {
      fs.closeSync(blob.aheadFd);
      blob.aheadFd = undefined;
    }
    if (blob.syncFd !== undefined) {
      fs.closeSync(blob.syncFd);
      blob.syncFd = undefined;
      this.#syncFdsHeld--;
    }
  }

  /** A partial shorter than what it acknowledged lost bytes: ask for the blob again. */
  async #lost(stageId: string, digest: Digest, received: number, size: number): Promise<IntegrityError> {
    const blob = this.#live.get(stageId)?.blobs.get(digest);
    if (blob !== undefined) await this.requireBlob(stageId, { digest, byte_len: blob.byte_len });
    return partialLost(stageId, digest, `the partial of ${digest} has ${size} of ${received} acknowledged bytes`);
  }

  async partialLength(stageId: string, digest: Digest): Promise<number | undefined> {
    const st = lstatOrUndefined(this.#layout.partialPath(stageId, digest));
    return st?.isFile() === true ? st.size : undefined;
  }

  /**
   * The partial's lstat in nanoseconds. Offered only where any write after that lstat moves the
   * ctime on (see `writesAlwaysMoveCtime`); userspace cannot set a ctime, and a replaced file has
   * another inode or ctime.
   */
  readonly partialIdentity?: (stageId: string, digest: Digest) => Promise<string | undefined>;

  async #identity(stageId: string, digest: Digest): Promise<string | undefined> {
    const st = fs.lstatSync(this.#layout.partialPath(stageId, digest), { bigint: true, throwIfNoEntry: false });
    return st === undefined ? undefined : identityOf(st);
  }

  async readPartial(stageId: string, digest: Digest, position: number, length: number, into?: Uint8Array): Promise<Uint8Array> {
    fire(this.#faults, "partial-read");
    const fd = openPrivateFileSync(this.#layout.partialPath(stageId, digest), "read");
    try {
      const bytes = await readExactly(fd, position, length, into);
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
    const live = this.#live.get(stageId);
    const blob = live?.blobs.get(digest);
    if (live === undefined || blob === undefined || blob.complete) {
      throw new NotFoundError("stage-not-found", `stage ${stageId} no longer receives ${digest}`, { details: { stage_id: stageId, digest } });
    }
    this.#noteActivity(stageId, live, now);
    blob.received = received;
    if (received === blob.byte_len) live.unsynced.add(digest);
  }

  /**
   * Starts the fdatasyncs of blobs received in full, in the background, when the stage's next chunk
   * arrives: the disk waits then overlap the rest of the upload instead of all falling on commit.
   * The blob whose last chunk just arrived is synced by the next chunk or by the commit, so a node
   * has no sync left running once an upload's last chunk is answered.
   */
  #syncAhead(stageId: string, live: LiveStage): void {
    for (const digest of live.unsynced) {
      const blob = live.blobs.get(digest);
      // Its last chunk has yet to close (another request's chunk came between): the descriptor it
      // is about to keep serves this sync, started by the chunk after it (or the commit).
      if (blob?.appending === true) continue;
      live.unsynced.delete(digest);
      if (blob !== undefined && !blob.complete && blob.received === blob.byte_len && blob.sync === undefined) {
        blob.sync = this.#startSync(stageId, digest);
      }
    }
  }

  async requireBlob(stageId: string, ref: BlobRef): Promise<void> {
    fs.rmSync(this.#layout.partialPath(stageId, ref.digest), { force: true });
    this.#requireBlob.run(stageId, ref.digest, ref.byte_len);
    const live = this.#live.get(stageId);
    if (live === undefined) return;
    const blob = live.blobs.get(ref.digest);
    if (blob !== undefined) {
      this.#release(blob);
      blob.received = 0;
      blob.complete = false;
      blob.sync = undefined;
      blob.opened = false;
      return;
    }
    // A blob the stage did not upload (a stored one found tampered) joins it, in digest order.
    live.blobs.set(ref.digest, { byte_len: ref.byte_len, received: 0, complete: false, sync: undefined, opened: false });
    live.blobs = new Map([...live.blobs].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
  }

  async syncReceived(stageId: string, refs: readonly BlobRef[]): Promise<void> {
    const durable = refs.map((ref) => this.#durable(stageId, ref));
    this.#syncs.hurry(SYNCS_IN_FLIGHT_AT_COMMIT);
    const synced = await Promise.allSettled(durable);
    const failed = synced.find((s): s is PromiseRejectedResult => s.status === "rejected");
    if (failed !== undefined) throw failed.reason;
  }

  async promote(stageId: string, ref: BlobRef, now: number): Promise<boolean> {
    const path = this.#layout.partialPath(stageId, ref.digest);
    const st = lstatOrUndefined(path);
    if (st === undefined) {
      if (!(await this.#blobs.has(ref.digest))) {
        await this.requireBlob(stageId, ref);
        throw partialLost(stageId, ref.digest, `neither the partial nor the blob ${ref.digest} exists`);
      }
      this.#complete(stageId, ref.digest, now);
      return false;
    }
    if (st.size !== ref.byte_len) {
      await this.requireBlob(stageId, ref);
      throw new IntegrityError("blob-tampered", `the partial of ${ref.digest} has ${st.size} bytes, want ${ref.byte_len}; it restarts at 0`, {
        details: { stage_id: stageId, digest: ref.digest, byte_len: ref.byte_len, size: st.size, expected_offset: 0 },
      });
    }
    await this.#durable(stageId, ref);
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

  /**
   * Makes a complete partial durable, once: `syncReceived` and `promote` share the fdatasync. A
   * partial whose fdatasync failed is dropped and its blob asked for again: a failed fdatasync
   * may have lost the bytes while the file still reads back well, so trying again proves nothing.
   */
  async #durable(stageId: string, ref: BlobRef): Promise<void> {
    const blob = this.#live.get(stageId)?.blobs.get(ref.digest);
    const sync = blob?.sync ?? this.#startSync(stageId, ref.digest);
    if (blob !== undefined) blob.sync = sync;
    const error = await sync;
    if (error === undefined) return;
    if (blob === undefined || blob.sync === sync) await this.requireBlob(stageId, ref);
    throw error;
  }

  /**
   * fdatasyncs a complete partial (bounded: see BoundedRunner), through the descriptor it was
   * written through when that was kept (see `#partial`); resolves to the error, if any.
   */
  #startSync(stageId: string, digest: Digest): Promise<unknown> {
    const blob = this.#live.get(stageId)?.blobs.get(digest);
    // Taken now, not when the job runs: from here on the job alone closes it.
    const kept = blob?.syncFd;
    if (blob !== undefined) blob.syncFd = undefined;
    return this.#syncs
      .run(async () => {
        const fd = kept ?? openPrivateFileSync(this.#layout.partialPath(stageId, digest), "read");
        try {
          fire(this.#faults, "partial-sync");
          await datasync(fd);
        } finally {
          fs.closeSync(fd);
          if (kept !== undefined) this.#syncFdsHeld--;
        }
      })
      .then(
        () => undefined,
        (error: unknown) => error ?? new Error("fdatasync failed"),
      );
  }

  #complete(stageId: string, digest: Digest, now: number): void {
    const live = this.#liveOf(stageId);
    const blob = live?.blobs.get(digest);
    if (live === undefined || blob === undefined) return;
    // The activity write may fail (a full disk): the blob must then still read as not complete,
    // since promote's caller drops the link it made and the partial is again the blob's only name.
    this.#noteActivity(stageId, live, now);
    blob.received = blob.byte_len;
    blob.complete = true;
  }

  async markStored(stageId: string, ref: BlobRef): Promise<void> {
    fs.rmSync(this.#layout.partialPath(stageId, ref.digest), { force: true });
    this.#setComplete.run(stageId, ref.digest);
    const blob = this.#live.get(stageId)?.blobs.get(ref.digest);
    if (blob !== undefined) {
      this.#release(blob);
      blob.received = blob.byte_len;
      blob.complete = true;
      blob.sync = undefined;
      blob.opened = false;
    }
  }

  async remove(stageId: string): Promise<void> {
    const dir = this.#layout.stageDir(stageId);
    // A partial still being created ahead would appear after the directory was listed.
    const creating = this.#creatingAhead.get(stageId);
    if (creating !== undefined) await Promise.all(creating);
    // A directory holding anything but partials refuses before the row or the memory change (G10).
    stageDirNames(dir);
    const row = this.#selectStage.get(stageId);
    if (row !== undefined) this.#manifests.forget(row.manifest_digest);
    const live = this.#live.get(stageId);
    if (live !== undefined) this.#forget(stageId, live);
    try {
      this.#deleteRow(stageId);
    } catch (error) {
      if (!isStorageFull(error)) throw error;
      // On a full disk even a delete needs room (in the database's log), and dropping a stage is
      // how an operator makes room: its partials, thrown away either way, go first. Should the
      // row still stay, the stage asks for its blobs again from 0 (see openPartial).
      removeStageDirSync(dir);
      this.#deleteRow(stageId);
    }
    fire(this.#faults, "stage-remove");
    removeStageDirSync(dir);
  }

  #deleteRow(stageId: string): void {
    this.#db.transaction(() => {
      fire(this.#faults, "stage-row-delete");
      this.#deleteStage.run(stageId);
    })();
  }

  /** Writes the stage's activity to its row when the row is more than ACTIVITY_PERSIST_MS behind. */
  #noteActivity(stageId: string, live: LiveStage, now: number): void {
    live.lastActive = Math.max(live.lastActive, now);
    if (now - live.persistedActive < ACTIVITY_PERSIST_MS) return;
    this.#db.transaction(() => {
      fire(this.#faults, "activity-record");
      this.#touch.run(now, stageId);
    })();
    live.persistedActive = now;
  }

  #liveOf(stageId: string): LiveStage | undefined {
    const live = this.#live.get(stageId);
    if (live !== undefined) return live;
    const row = this.#selectStage.get(stageId);
    return row === undefined ? undefined : this.#load(row);
  }

  /**
   * A stage's blobs as a restarted process finds them: a partial holds what was received (its
   * length was made durable by start-up repair); no partial but a stored blob means its
   * publication finished and only the commit is missing (recovery settles it).
   */
  #load(row: StageRow): LiveStage {
    const rows = this.#selectBlobs.all(row.stage_id);
    // Before any row's digest names a path: the rows must be blobs of the stage's manifest.
    checkStageRecord({
      stage_id: row.stage_id,
      manifest: this.#manifestOf(row),
      created_at: row.created_at,
      last_active_at: row.last_active_at,
      reserved_bytes: row.reserved_bytes,
      // A flag other than 0 or 1 is handed on as it is stored, for the check to refuse.
      blobs: rows.map((b) => ({ digest: b.digest as Digest, byte_len: b.byte_len, received: 0, complete: b.complete === 0 || b.complete === 1 ? b.complete === 1 : (b.complete as unknown as boolean) })),
    });
    const blobs = new Map<string, BlobProgress>();
    for (const b of rows) {
      const digest = b.digest as Digest;
      let received = b.byte_len;
      if (b.complete !== 1) {
        const partial = lstatOrUndefined(this.#layout.partialPath(row.stage_id, digest));
        if (partial?.isFile() === true) received = partial.size <= b.byte_len ? partial.size : 0;
        else if (lstatOrUndefined(this.#layout.blobPath(digest))?.isFile() !== true) received = 0;
      }
      blobs.set(digest, { byte_len: b.byte_len, received, complete: b.complete === 1, sync: undefined, opened: false });
    }
    // A stage read back (after a restart) creates nothing ahead: its partials mostly exist already.
    const live = { row, blobs, lastActive: row.last_active_at, persistedActive: row.last_active_at, unsynced: new Set<Digest>(), dirChecked: false, ahead: [], nextAhead: 0 };
    this.#live.set(row.stage_id, live);
    return live;
  }

  /** The record of a stage whose row was read; a missing row means the stage closed. */
  #recordOf(row: StageRow | undefined, stageId: string): StageRecord | undefined {
    if (row === undefined) {
      const gone = this.#live.get(stageId);
      if (gone !== undefined) this.#forget(stageId, gone);
      return undefined;
    }
    const live = this.#live.get(stageId) ?? this.#load(row);
    return {
      stage_id: row.stage_id,
      manifest: this.#manifestOf(row),
      created_at: row.created_at,
      last_active_at: Math.max(row.last_active_at, live.lastActive),
      reserved_bytes: row.reserved_bytes,
      blobs: [...live.blobs].map(([digest, b]) => stageBlobOf(digest as Digest, b)),
    };
  }

  #manifestOf(row: StageRow): Manifest {
    // The text is read only when the digest is not verified yet (it is the row's largest field).
    const text = (): string => this.#selectManifest.get(row.stage_id)?.manifest ?? "null";
    return this.#manifests.verified(row.manifest_digest, text, `stage ${row.stage_id}`, { stage_id: row.stage_id });
  }
}

/** A partial's identity (see `partialIdentity`): one only a write, or another file, changes. */
function identityOf(st: fs.BigIntStats): string | undefined {
  if (!st.isFile()) return undefined;
  return `${st.dev}:${st.ino}:${st.size}:${st.nlink}:${st.mtimeNs}:${st.ctimeNs}`;
}

function stageBlobOf(digest: Digest, progress: BlobProgress): StageBlob {
  return { digest, byte_len: progress.byte_len, received: progress.received, complete: progress.complete };
}

/** statfs magic numbers of the file systems with multigrain timestamps: ext4, xfs, btrfs, tmpfs. */
const MULTIGRAIN_FILE_SYSTEMS = new Set([0xef53, 0x58465342, 0x9123683e, 0x01021994]);

/**
 * True when a write that follows a stat of a file always changes its ctime. A timestamp normally
 * comes from a clock that ticks every few milliseconds, so a write in the same tick as the stat
 * would go unseen; since Linux 6.13 these file systems give a change that follows a query of the
 * times a fresh fine-grained time (multigrain timestamps).
 */
export function writesAlwaysMoveCtime(dir: string): boolean {
  if (process.platform !== "linux") return false;
  const [major = 0, minor = 0] = os.release().split(".").map((part) => Number.parseInt(part, 10));
  if (major < 6 || (major === 6 && minor < 13)) return false;
  return MULTIGRAIN_FILE_SYSTEMS.has(fs.statfsSync(dir).type);
}

/**
 * Removes a stage directory that holds nothing but partials. Anything else in it is not ours to
 * delete: refuse, naming it, and leave everything in place.
 */
export function removeStageDirSync(dir: string): void {
  const names = stageDirNames(dir);
  if (names === undefined) return;
  for (const name of names) fs.unlinkSync(join(dir, name));
  fs.rmdirSync(dir);
}

/** The names in a stage's directory, every one a partial (undefined: no directory); else refuses. */
function stageDirNames(dir: string): string[] | undefined {
  let names: string[];
  try {
    names = fs.readdirSync(dir);
  } catch (error) {
    if (errnoCode(error) === "ENOENT") return undefined;
    throw error;
  }
  for (const name of names) {
    const path = join(dir, name);
    const st = fs.lstatSync(path);
    if (!PARTIAL_NAME_RE.test(name) || !st.isFile()) {
      throw new UnsafeStorageError("unsafe-storage-name", path, "is not a partial this store created");
    }
  }
  return names;
}

/** Told when a FilePartial ends (the store's blob, see `#partial`). */
interface PartialOwner {
  /** The partial closes, every byte written: true when this takes its descriptor (and will close it). */
  closing(fd: number): boolean;
  /** The partial was abandoned; its descriptor is closed. */
  abandoned(): void;
}

/**
 * A partial being appended to. Copying a chunk into the page cache was the largest part of what
 * the event loop's thread spent per chunk (more than hashing it), so the bytes are written on the
 * I/O threads, one write at a time in order (O_APPEND): pieces that arrive while one is written
 * go together in the next writev. `flush` waits for the last. A small piece with nothing before it
 * is written here: handing it to a thread and back costs more than its copy.
 */
class FilePartial implements PartialAppender {
  readonly #fd: number;
  readonly #path: string;
  readonly #openedAt: number;
  readonly #faults: DeliveryFaults | undefined;
  /** Pieces waiting for the write in flight to end. */
  #queued: Uint8Array[] = [];
  /** The write in flight, if any: it goes on to write what was queued meanwhile. */
  #writing: Promise<void> | undefined;
  /** The first write that failed: the chunk fails with it, and nothing more is written. */
  #failed: { readonly error: unknown } | undefined;
  #closed = false;
  readonly #owner: PartialOwner | undefined;

  constructor(fd: number, path: string, openedAt: number, faults: DeliveryFaults | undefined, owner?: PartialOwner) {
    this.#fd = fd;
    this.#path = path;
    this.#openedAt = openedAt;
    this.#faults = faults;
    this.#owner = owner;
  }

  /**
   * The file's identity as `partialIdentity` answers it for its path, from the open descriptor
   * once every write ended: the file written, found without walking its path again.
   */
  async identity(): Promise<string | undefined> {
    await this.#writing;
    if (this.#closed) return undefined;
    return identityOf(fs.fstatSync(this.#fd, { bigint: true }));
  }

  async append(bytes: Uint8Array): Promise<void> {
    if (this.#failed !== undefined) throw this.#failed.error;
    if (this.#writing === undefined && bytes.byteLength <= SYNC_WRITE_BYTES) {
      writeAllSync(this.#fd, bytes);
      fire(this.#faults, "chunk-written");
      return;
    }
    this.#queued.push(bytes);
    this.#writing ??= this.#writeQueued();
  }

  async #writeQueued(): Promise<void> {
    try {
      while (this.#queued.length > 0 && this.#failed === undefined) {
        const pieces = this.#queued;
        this.#queued = [];
        await writevAll(this.#fd, pieces);
        fire(this.#faults, "chunk-written");
      }
    } catch (error) {
      this.#failed = { error };
      this.#queued = [];
    } finally {
      this.#writing = undefined;
    }
  }

  /**
   * Every appended byte is in the file once the writes end (the page cache survives a crash of
   * this process): nothing more to do.
   */
  async flush(): Promise<void> {
    await this.#writing;
    if (this.#failed !== undefined) throw this.#failed.error;
  }

  async abandon(): Promise<void> {
    // Nothing may be written after the cut (O_APPEND would put it at the new end) or to a closed
    // descriptor number, which may by then be another file's.
    this.#queued = [];
    await this.#writing;
    // Best effort: this runs on an error path, and the next open cuts the partial back anyway.
    try {
      if (this.#openedAt === 0) fs.rmSync(this.#path, { force: true });
      else fs.ftruncateSync(this.#fd, this.#openedAt);
    } catch {
      // the original error is the one worth reporting
    }
    this.#closeOnce();
    this.#owner?.abandoned();
  }

  async close(): Promise<void> {
    await this.#writing;
    if (this.#closed) return;
    this.#closed = true;
    // A partial whose write failed is not offered: what it holds is not known.
    if (this.#failed === undefined && this.#owner?.closing(this.#fd) === true) return;
    fs.closeSync(this.#fd);
    if (this.#failed !== undefined) this.#owner?.abandoned();
  }

  /** A descriptor number is reused once closed: closing it twice could close someone else's file. */
  #closeOnce(): void {
    if (this.#closed) return;
    this.#closed = true;
    fs.closeSync(this.#fd);
  }
}
