/**
 * One chunk of a blob (PATCH /v1/stages/{id}/blobs/{digest}): appended to the blob's partial
 * with an incremental hash and acknowledged once it is part of the partial; when it completes the
 * blob, the digest is checked on the bytes as they arrived (a mismatch restarts the blob at 0).
 * A complete blob is published at commit (`Delivery.commit`), which makes it durable first. A
 * chunk that repeats bytes already received is compared and accepted without writing. The caller
 * (the service) holds the blob's lock and has checked the offset.
 */
import { DigestStream, digestEquals, type Digest } from "../core/digest.js";
import { IntegrityError, isWardenError } from "../core/errors.js";
import type { Limits } from "../core/limits.js";
import { piecesOf, type ByteSource } from "./blob-store.js";
import { chunkTooLarge, outOfOrder, overflow, partialLost } from "./delivery-errors.js";
import type { DeliveryStores } from "./recovery.js";
import { InlineCommitCheck } from "./commit-verify.js";
import { hashPartial, type PartialAppender, type StageBlob } from "./stage.js";

/**
 * Bytes of a chunk's first piece hashed while its partial is being opened (creating a file waits
 * on the file system's journal, up to half a millisecond on a busy disk: about as long as hashing
 * this much); the rest is hashed while it is written. Bounded, so that a large piece still has
 * most of its hashing overlap its write.
 */
const HASH_WHILE_OPENING = 1024 * 1024;

export interface ChunkAccepted {
  readonly next_offset: number;
}

export class ChunkUpload {
  readonly #stores: DeliveryStores;
  readonly #limits: Limits;
  /** Running hash of each partial at its received offset; rebuilt from the partial when missing. */
  readonly #hashes = new Map<string, DigestStream>();
  /**
   * Blobs whose complete partial this process hashed to their digest as the bytes were appended:
   * commit publishes them without hashing them again (it still verifies what it publishes).
   */
  readonly #verified = new Set<string>();
  /** Each stage's inline commit check (null: none can run for it in this process). */
  readonly #inline = new Map<string, InlineCommitCheck | null>();
  /** Each stage's inline check being started, shared by the chunks that arrive meanwhile. */
  readonly #starting = new Map<string, Promise<InlineCommitCheck | null>>();

  constructor(stores: DeliveryStores, limits: Limits) {
    this.#stores = stores;
    this.#limits = limits;
  }

  /** Drops what is known of one blob, or of every blob of a stage that closed. */
  forget(stageId: string, digest?: Digest): void {
    this.#inline.get(stageId)?.end();
    if (digest !== undefined) {
      this.#hashes.delete(hashKey(stageId, digest));
      this.#verified.delete(hashKey(stageId, digest));
      return;
    }
    this.#inline.delete(stageId);
    this.#starting.delete(stageId);
    const prefix = hashKey(stageId, "");
    for (const key of this.#hashes.keys()) if (key.startsWith(prefix)) this.#hashes.delete(key);
    for (const key of this.#verified) if (key.startsWith(prefix)) this.#verified.delete(key);
  }

  /**
   * The stage's inline commit check, handed over once to its commit (undefined when none ran, or
   * when it ended).
   */
  takeInlineCheck(stageId: string): InlineCommitCheck | undefined {
    const check = this.#inline.get(stageId) ?? undefined;
    this.#inline.set(stageId, null);
    return check;
  }

  /**
   * The running hash of what a partial acknowledged, rebuilt by reading it back. A partial that
   * holds less than its record acknowledges lost bytes (a damaged record or file): the blob is
   * asked for again from 0, as a store does when it finds its partial short on opening, rather
   * than refusing every chunk at the acknowledged offset from now on.
   */
  async #hashReceived(stageId: string, blob: StageBlob): Promise<DigestStream> {
    try {
      return await hashPartial(this.#stores.stages, stageId, blob.digest, blob.received);
    } catch (error) {
      if (!(isWardenError(error) && error.code === "stage-partial-short")) throw error;
      await this.#stores.stages.requireBlob(stageId, { digest: blob.digest, byte_len: blob.byte_len });
      this.forget(stageId, blob.digest);
      throw partialLost(stageId, blob.digest, `the partial of ${blob.digest} holds less than its ${blob.received} acknowledged bytes`);
    }
  }

  /**
   * Starts the stage's inline check, once per stage and process (it needs every blob of the
   * stage, a chunk only its own). Chunks of several blobs that arrive while it starts (a push's
   * requests in flight) share it: each starting its own would leave the one kept without the
   * bytes fed to the others, and the commit would read the whole stage back.
   */
  #startInline(stageId: string): Promise<InlineCommitCheck | null> {
    const started = this.#starting.get(stageId);
    if (started !== undefined) return started;
    const starting = InlineCommitCheck.start(this.#stores.stages, stageId).then(
      (check) => {
        // Unless the stage was forgotten meanwhile: then the check is no one's.
        if (this.#starting.get(stageId) === starting) {
          this.#starting.delete(stageId);
          this.#inline.set(stageId, check ?? null);
        }
        return check ?? null;
      },
      (error: unknown) => {
        if (this.#starting.get(stageId) === starting) this.#starting.delete(stageId);
        throw error;
      },
    );
    this.#starting.set(stageId, starting);
    return starting;
  }

  /** True when this process verified the blob's complete partial while receiving it. */
  verified(stageId: string, digest: Digest): boolean {
    return this.#verified.has(hashKey(stageId, digest));
  }

  async append(stageId: string, blob: StageBlob, body: ByteSource, now: number): Promise<ChunkAccepted> {
    const { stages } = this.#stores;
    const key = hashKey(stageId, blob.digest);
    // null: no check can run for this stage here (known once; starting one reads the whole stage).
    const known = this.#inline.get(stageId);
    const inline = known !== undefined ? known : await this.#startInline(stageId);
    const cached = this.#hashes.get(key);
    const base = cached !== undefined && cached.length === blob.received ? cached : await this.#hashReceived(stageId, blob);
    const running = base.copy();
    // A new partial is created on the I/O threads while this thread hashes the start of the first
    // piece; every write then runs there while this thread hashes the rest.
    const opening = stages.openPartial(stageId, blob.digest, blob.received);
    opening.catch(() => undefined); // awaited below, once the first piece (or the end) arrives
    let partial: PartialAppender | undefined;
    try {
      for await (const piece of piecesOf(body)) {
        const position = running.length;
        const written = position - blob.received + piece.byteLength;
        if (written > this.#limits.chunkBytes) throw chunkTooLarge(written, this.#limits.chunkBytes);
        if (blob.received + written > blob.byte_len) throw overflow(blob, blob.received + written);
        let hashed = 0;
        if (partial === undefined) {
          hashed = Math.min(piece.byteLength, HASH_WHILE_OPENING);
          running.update(piece.subarray(0, hashed));
          // The inline check hashes the piece too, while the partial is created if it fits.
          if (hashed === piece.byteLength) inline?.feed(blob.digest, position, piece);
          partial = await opening;
        }
        const appended = partial.append(piece);
        running.update(hashed === 0 ? piece : piece.subarray(hashed));
        if (hashed < piece.byteLength) inline?.feed(blob.digest, position, piece);
        await appended;
      }
      partial ??= await opening;
    } catch (error) {
      inline?.end();
      // The partial was (or is being) opened: whatever this chunk appended is taken back.
      const opened = partial ?? (await opening.catch(() => undefined));
      if (opened !== undefined) await opened.abandon();
      throw error;
    }
    const next = running.length;
    const complete = next === blob.byte_len;
    if (complete) {
      const actual = running.digest();
      if (!digestEquals(actual, blob.digest)) {
        inline?.end();
        this.#hashes.delete(key);
        await partial.abandon();
        await stages.requireBlob(stageId, { digest: blob.digest, byte_len: blob.byte_len });
        throw new IntegrityError("blob-digest-mismatch", `the bytes received for ${blob.digest} hash to ${actual}; the blob restarts at offset 0`, {
          details: { digest: blob.digest, actual, expected_offset: 0 },
        });
      }
    }
    // The flush (a row insert on a database backend) and the record overlap: one wait, not two.
    const flushed = partial.flush();
    flushed.catch(() => undefined); // awaited below, whatever happens to the record
    try {
      await stages.recordReceived(stageId, blob.digest, next, now);
    } catch (error) {
      inline?.end();
      await flushed.catch(() => undefined);
      await partial.abandon();
      throw error;
    }
    try {
      await flushed;
    } catch (error) {
      inline?.end();
      // The chunk is not part of the partial: take back the offset before refusing it.
      await stages.recordReceived(stageId, blob.digest, blob.received, now).catch(() => undefined);
      await partial.abandon();
      throw error;
    }
    if (complete && inline) {
      // Noted once the last byte is written (any later write to the partial changes it), from the
      // descriptor still open where the store offers that, else from the path.
      const identity = stages.partialIdentity === undefined ? undefined : await (partial.identity?.() ?? stages.partialIdentity(stageId, blob.digest));
      inline.written(blob.digest, identity);
    }
    await partial.close();
    if (complete) {
      this.#hashes.delete(key);
      this.#verified.add(key);
    } else {
      this.#hashes.set(key, running);
    }
    return { next_offset: next };
  }

  /** Exact replay: accepted only if every byte equals what is already stored. */
  async replay(stageId: string, blob: StageBlob, offset: number, body: ByteSource, now: number): Promise<ChunkAccepted> {
    const { stages, blobs } = this.#stores;
    const received = blob.complete ? blob.byte_len : blob.received;
    let position = offset;
    for await (const piece of piecesOf(body)) {
      if (position + piece.byteLength > received) throw outOfOrder(blob, received, offset);
      const stored = blob.complete
        ? await blobs.readRange(blob.digest, position, piece.byteLength)
        : await stages.readPartial(stageId, blob.digest, position, piece.byteLength);
      if (Buffer.compare(stored, piece) !== 0) throw outOfOrder(blob, received, offset);
      position += piece.byteLength;
    }
    await stages.touch(stageId, now);
    return { next_offset: position };
  }
}

/** A chunk at the end of a fully received blob: accepted only if it is empty. */
export async function nothingMore(blob: StageBlob, body: ByteSource): Promise<ChunkAccepted> {
  for await (const piece of piecesOf(body)) if (piece.byteLength > 0) throw overflow(blob, blob.byte_len + piece.byteLength);
  return { next_offset: blob.byte_len };
}

function hashKey(stageId: string, digest: Digest | ""): string {
  return `${stageId}:${digest}`;
}
