/**
 * Stages: a manifest being uploaded. The stage record is durable (stages resume after a restart)
 * and each blob being received has an append-only partial. A chunk is acknowledged once it is
 * part of its partial; the partial itself is the record of what was received, so no offset has to
 * be written per chunk: after a restart a store reports what its partial holds (a crash of the
 * machine may lose an unsynced tail, and then the client simply resumes earlier). Bytes become
 * durable when a complete, verified partial is published (`promote`, at commit), before the
 * commit record is written. This module holds the stage model and the store interface a backend
 * implements; the upload rules themselves live in service.ts.
 */
import { randomBytes } from "node:crypto";
import { DigestStream, type Digest } from "../core/digest.js";
import { ValidationError } from "../core/errors.js";
import type { BlobRef, Manifest } from "./manifest-types.js";

/** One blob a stage must receive (it was not in the blob store when the stage began). */
export interface StageBlob {
  readonly digest: Digest;
  readonly byte_len: number;
  /**
   * Bytes received: what the blob's partial holds. After a restart it is what the partial still
   * holds (made durable at start-up); `byte_len` once every byte was received and verified.
   */
  readonly received: number;
  /** Published into the blob store (at commit, or found already stored); the partial is gone. */
  readonly complete: boolean;
}

export interface StageRecord {
  readonly stage_id: string;
  readonly manifest: Manifest;
  readonly created_at: number;
  /** Last begin, chunk or status: stages expire after a period of inactivity, not of age. */
  readonly last_active_at: number;
  /** Bytes counted against the staged-bytes capacity: the blobs missing at begin. */
  readonly reserved_bytes: number;
  /** Sorted by digest. */
  readonly blobs: readonly StageBlob[];
}

export interface MissingBlob {
  readonly digest: Digest;
  readonly byte_len: number;
  /** Where the next chunk must start. */
  readonly offset: number;
}

/**
 * What one chunk needs of its stage: the stage's activity and manifest, and the one blob the chunk
 * is for, without the stage's other blobs (a push of N blobs sends N chunks or more: reading every
 * blob for each would cost O(N²)).
 */
export interface ChunkTarget {
  readonly stage_id: string;
  readonly manifest: Manifest;
  readonly last_active_at: number;
  /** The blob, as `StageRecord.blobs` holds it; undefined when the stage does not receive it. */
  readonly blob: StageBlob | undefined;
}

/** An open append-only partial. Nothing written is acknowledged until `flush` returns. */
export interface PartialAppender {
  /**
   * Takes the next bytes of the chunk. A store may only queue them (written in the background, or
   * all at `flush`): a failure to write them then rejects a later `append` or `flush`.
   */
  append(bytes: Uint8Array): Promise<void>;
  /**
   * Ends a chunk: every appended byte is part of the partial, read back by `readPartial` and kept
   * across a crash of this process. Surviving a crash of the machine is not required here: a
   * store reports after a restart only what its partial still holds, and `promote` makes the
   * whole partial durable before it is published.
   */
  flush(): Promise<void>;
  /** Drops everything appended since opening (back to the offset it was opened at) and closes. */
  abandon(): Promise<void>;
  close(): Promise<void>;
  /**
   * After `flush`, before `close`: what `StageStore.partialIdentity` would answer for this
   * partial now, taken from the open file (optional: a store without it is asked by path).
   */
  identity?(): Promise<string | undefined>;
}

/** What capacity and expiry need of a stage; the values are as stored (see `activity`). */
export interface StageActivity {
  readonly stage_id: string;
  readonly last_active_at: number;
  readonly reserved_bytes: number;
}

export interface StageStore {
  /** Durably records a new stage. */
  create(stage: StageRecord): Promise<void>;
  get(stageId: string): Promise<StageRecord | undefined>;
  /**
   * The stage as `get` reads it, narrowed to one blob (undefined: no such stage). It refuses a
   * damaged record as `get` does for what it reads (the manifest, the stage's own fields, that
   * blob); it need not look at the stage's other blobs.
   */
  chunkTarget(stageId: string, digest: Digest): Promise<ChunkTarget | undefined>;
  findByManifest(manifestDigest: Digest): Promise<StageRecord | undefined>;
  list(): Promise<readonly StageRecord[]>;
  /**
   * Every stage's activity and reservation, read without its manifest or blob rows: the capacity
   * check of every begin and the expiry sweep read all stages, and one stage whose record is
   * damaged must not stop them (it is refused where it is used, and cleared by `abort`).
   */
  activity(): Promise<readonly StageActivity[]>;
  /**
   * Records activity (begin, chunk, status): stages expire after inactivity. A store may persist
   * it lazily, a second or so behind; a crash can then make a stage look that much older.
   */
  touch(stageId: string, now: number): Promise<void>;
  /**
   * Opens the blob's partial positioned at `received` (a longer partial holds bytes of a chunk that
   * was never acknowledged, and is cut back; a shorter one lost bytes: the blob restarts at 0).
   */
  openPartial(stageId: string, digest: Digest, received: number): Promise<PartialAppender>;
  /** Length of the blob's partial file, or undefined when there is none. */
  partialLength(stageId: string, digest: Digest): Promise<number | undefined>;
  /**
   * A token for the partial's current state, or undefined when there is none: two equal tokens
   * mean no byte of it was written in between (for files: device, inode, size, link count and the
   * change and modification times, which every write moves on). A store that cannot tell leaves it
   * out, and every commit then reads its partials back and checks them.
   */
  partialIdentity?(stageId: string, digest: Digest): Promise<string | undefined>;
  /**
   * Bytes `[position, position + length)` of the partial (unverified; for replay, rehashing and
   * commit). With `into` (at least `length` bytes) a store may read into it and return a view of
   * it, so that a caller reading many partials reuses its buffers.
   */
  readPartial(stageId: string, digest: Digest, position: number, length: number, into?: Uint8Array): Promise<Uint8Array>;
  /**
   * Records that the blob's partial now holds `received` bytes (a flushed chunk), and the stage's
   * activity. It need not be durable on its own: the partial is the record that survives.
   */
  recordReceived(stageId: string, digest: Digest, received: number, now: number): Promise<void>;
  /**
   * Asks for a blob again from offset 0: drops any partial and records the blob missing, adding
   * it to the stage when it was not uploaded through it (a stored blob found tampered at commit).
   */
  requireBlob(stageId: string, ref: BlobRef): Promise<void>;
  /**
   * Makes the complete partials of these blobs durable ahead of their publication, all at once so
   * their disk waits overlap (and overlap with the commit's verification reading them). A partial
   * of the wrong length was changed since it was received: it is dropped, the blob asked for again
   * and `blob-tampered` thrown; one whose sync fails is dropped too (its bytes are not known to be
   * on disk). A store whose partials are durable as written does nothing.
   */
  syncReceived(stageId: string, refs: readonly BlobRef[]): Promise<void>;
  /**
   * Publishes the blob's complete partial into the blob store (create-new; an already stored blob
   * is kept) and records it complete: the partial's bytes are made durable first (unless
   * `syncReceived` just did), so a published blob is never torn by a crash. The caller verified
   * the partial's digest; a partial found changed since is dropped, the blob asked for again, and
   * `blob-tampered` thrown. The publication's directory entry becomes durable with
   * `BlobStore.sync` at commit. Returns true when this call created the blob, false when it was
   * already stored.
   */
  promote(stageId: string, ref: BlobRef, now: number): Promise<boolean>;
  /** Marks a blob complete because the blob store already holds it; drops any partial. */
  markStored(stageId: string, ref: BlobRef): Promise<void>;
  /** Removes the stage's metadata (if still present) and every file it owns. */
  remove(stageId: string): Promise<void>;
}

const STAGE_ID_RE = /^[0-9a-f]{32}$/;

/** Stage ids are 128 random bits in lowercase hex: unguessable, and safe as a file name. */
export function newStageId(): string {
  return randomBytes(16).toString("hex");
}

export function isStageId(value: unknown): value is string {
  return typeof value === "string" && STAGE_ID_RE.test(value);
}

export function parseStageId(value: unknown): string {
  if (!isStageId(value)) {
    throw new ValidationError("stage-id-invalid", "a stage id is 32 lowercase hex digits");
  }
  return value;
}

/**
 * Blobs the client still has to send, with the offset to resume each from, in the order their
 * files come in the manifest: a client that sends them in this order lets the commit check each
 * file as it arrives instead of reading the stage back (InlineCommitCheck).
 */
export function missingOf(stage: StageRecord): MissingBlob[] {
  const order = new Map<Digest, number>();
  stage.manifest.components.forEach((c, i) => {
    if (!order.has(c.blob.digest)) order.set(c.blob.digest, i);
  });
  const rank = (digest: Digest): number => order.get(digest) ?? order.size;
  return stage.blobs
    .filter((b) => !b.complete && b.received < b.byte_len)
    .sort((a, b) => rank(a.digest) - rank(b.digest))
    .map((b) => ({ digest: b.digest, byte_len: b.byte_len, offset: b.received }));
}

export function isExpired(stage: Pick<StageRecord, "last_active_at">, now: number, expiryMs: number): boolean {
  return now - stage.last_active_at >= expiryMs;
}

const REHASH_PIECE = 1024 * 1024;

/** Hashes the first `length` bytes of a partial: rebuilds a running hash lost to a restart. */
export async function hashPartial(stages: StageStore, stageId: string, digest: Digest, length: number): Promise<DigestStream> {
  const hash = new DigestStream();
  for (let position = 0; position < length; position += REHASH_PIECE) {
    hash.update(await stages.readPartial(stageId, digest, position, Math.min(REHASH_PIECE, length - position)));
  }
  return hash;
}
