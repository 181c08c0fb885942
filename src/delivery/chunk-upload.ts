/**
 * One chunk of a blob (PATCH /v1/stages/{id}/blobs/{digest}): appended to the blob's partial
 * with an incremental hash, acknowledged once durable, published when the blob is complete and
 * its digest verified; or, when it repeats bytes already received, compared and accepted without
 * writing. The caller (the service) holds the blob's lock and has checked the offset.
 */
import { DigestStream, digestEquals, type Digest } from "../core/digest.js";
import { IntegrityError } from "../core/errors.js";
import type { Limits } from "../core/limits.js";
import { piecesOf, type ByteSource } from "./blob-store.js";
import { chunkTooLarge, outOfOrder, overflow } from "./delivery-errors.js";
import type { DeliveryStores } from "./recovery.js";
import { hashPartial, type StageBlob } from "./stage.js";

export interface ChunkAccepted {
  readonly next_offset: number;
}

export class ChunkUpload {
  readonly #stores: DeliveryStores;
  readonly #limits: Limits;
  /** Running hash of each partial at its durable offset; rebuilt from the partial when missing. */
  readonly #hashes = new Map<string, DigestStream>();

  constructor(stores: DeliveryStores, limits: Limits) {
    this.#stores = stores;
    this.#limits = limits;
  }

  /** Drops the running hash of one blob, or of every blob of a stage that closed. */
  forget(stageId: string, digest?: Digest): void {
    if (digest !== undefined) {
      this.#hashes.delete(hashKey(stageId, digest));
      return;
    }
    const prefix = hashKey(stageId, "");
    for (const key of this.#hashes.keys()) if (key.startsWith(prefix)) this.#hashes.delete(key);
  }

  async append(stageId: string, blob: StageBlob, body: ByteSource, now: number): Promise<ChunkAccepted> {
    const { stages } = this.#stores;
    const key = hashKey(stageId, blob.digest);
    const ref = { digest: blob.digest, byte_len: blob.byte_len };
    const cached = this.#hashes.get(key);
    const base = cached !== undefined && cached.length === blob.received ? cached : await hashPartial(stages, stageId, blob.digest, blob.received);
    const running = base.copy();
    const partial = await stages.openPartial(stageId, blob.digest, blob.received);
    try {
      for await (const piece of piecesOf(body)) {
        const written = running.length - blob.received + piece.byteLength;
        if (written > this.#limits.chunkBytes) throw chunkTooLarge(written, this.#limits.chunkBytes);
        if (blob.received + written > blob.byte_len) throw overflow(blob, blob.received + written);
        // The write runs on the I/O threads while this thread hashes the same bytes.
        const appended = partial.append(piece);
        running.update(piece);
        await appended;
      }
    } catch (error) {
      await partial.abandon();
      throw error;
    }
    const next = running.length;
    const complete = next === blob.byte_len;
    if (complete) {
      this.#hashes.delete(key);
      const actual = running.digest();
      if (!digestEquals(actual, blob.digest)) {
        await partial.abandon();
        await stages.requireBlob(stageId, ref);
        throw new IntegrityError("blob-digest-mismatch", `the bytes received for ${blob.digest} hash to ${actual}; the blob restarts at offset 0`, {
          details: { digest: blob.digest, actual, expected_offset: 0 },
        });
      }
    }
    // A chunk is acknowledged once its bytes (fdatasync) and its new offset (a durable record)
    // are both on disk. The record commits while the fdatasync runs on an I/O thread: one disk
    // wait instead of two. Should the machine fail between them, the record may name bytes the
    // partial lacks; recovery restarts such a blob, and no blob is ever published unverified.
    const synced = partial.sync();
    synced.catch(() => undefined); // awaited below, whatever happens to the record
    let published = false;
    try {
      if (complete) published = await stages.promote(stageId, ref, now);
      else await stages.recordReceived(stageId, blob.digest, next, now);
    } catch (error) {
      await synced.catch(() => undefined);
      await partial.abandon();
      throw error;
    }
    try {
      await synced;
    } catch (error) {
      // The bytes are not known durable: take back what was recorded before refusing the chunk.
      if (complete) {
        if (published) await this.#stores.blobs.delete(blob.digest);
        await stages.requireBlob(stageId, ref);
      } else {
        await stages.recordReceived(stageId, blob.digest, blob.received, now);
      }
      await partial.abandon();
      throw error;
    }
    await partial.close();
    if (!complete) this.#hashes.set(key, running);
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
