/**
 * A blob pack (DESIGN.md "Blob packs"): many chunks of a stage's blobs in one body, each frame
 * `digest (32 bytes, raw sha256) ‖ offset (u64 BE) ‖ length (u32 BE) ‖ length bytes`, back to back.
 * This module reads the framing only: each frame's bytes go to the per-blob chunk logic as a
 * sub-stream of the body (the caller's `apply`), so a frame means exactly what the same chunk sent
 * alone means. The layout itself is spelled in blob-pack-frame.ts.
 */
import { digestFromHex, type Digest } from "../core/digest.js";
import { ValidationError, isWardenError, type WardenError } from "../core/errors.js";
import type { ByteSource } from "./blob-store.js";
import { FRAME_HEADER_BYTES } from "./blob-pack-frame.js";
import { chunkBodyAborted, chunkTooLarge } from "./delivery-errors.js";

/** One frame as read, for the chunk logic. */
export interface PackFrame {
  /** the frame's position in the pack, from 0 */
  readonly index: number;
  readonly digest: Digest;
  readonly offset: number;
  readonly length: number;
  /** exactly `length` bytes; the callee must read it to its end */
  readonly body: ByteSource;
}

/** The framing is broken at frame `frame`: the body ends inside its header or its data. */
export function blobPackInvalid(frame: number, why: string): ValidationError {
  return new ValidationError("blob-pack-invalid", `the blob pack ${why} at frame ${frame}; the frames before it were applied`, { details: { frame } });
}

/**
 * The same failure, naming the frame it happened at (and its blob): same class, code, status and
 * message, the details of the chunk's own error kept.
 */
export function inFrame(error: WardenError, frame: number, digest: Digest | undefined): WardenError {
  return error.withDetails({ frame, ...(digest === undefined ? {} : { digest }) });
}

export interface FrameOptions {
  /** the most bytes a body may hold (the chunk limit) */
  readonly limitBytes: number;
  /** the body's declared length (an HTTP Content-Length), when known */
  readonly declaredBytes?: number | undefined;
  /** told of each frame's data bytes as they are handed on */
  readonly onBlobBytes?: ((bytes: number) => void) | undefined;
}

/**
 * Reads the pack's frames in order and hands each to `apply`; answers how many were applied. A
 * failure at frame k leaves frames 0…k-1 applied and is thrown with `frame: k` (inFrame); the
 * body's unread rest is left unread for the caller. `declaredBytes` (an HTTP Content-Length) lets
 * a frame that would end past the body be refused before any of it is applied. The body is bounded
 * by `limitBytes`, as a chunk's is.
 */
export async function applyFrames(source: ByteSource, options: FrameOptions, apply: (frame: PackFrame) => Promise<void>): Promise<number> {
  const { limitBytes, declaredBytes, onBlobBytes } = options;
  const total = source instanceof Uint8Array ? source.byteLength : declaredBytes;
  if (total !== undefined && total > limitBytes) throw chunkTooLarge(total, limitBytes);
  const reader = new PieceReader(source, limitBytes, onBlobBytes);
  try {
    for (let index = 0; ; index++) {
      let digest: Digest | undefined;
      try {
        const header = await reader.take(FRAME_HEADER_BYTES);
        if (header === undefined) return index;
        if (header.byteLength < FRAME_HEADER_BYTES) throw blobPackInvalid(index, "ends inside a frame header");
        const view = Buffer.from(header.buffer, header.byteOffset, header.byteLength);
        digest = digestFromHex(view.toString("hex", 0, 32));
        const offset = Number(view.readBigUInt64BE(32));
        const length = view.readUInt32BE(40);
        if (total !== undefined && reader.consumed + length > total) throw blobPackInvalid(index, "ends inside a frame's data");
        const body = reader.sub(length, index);
        await apply({ index, digest, offset, length, body: body.source });
        // Every chunk path reads its body to the end; one that did not would leave the framing behind.
        if (!body.done()) throw new Error(`frame ${index} was applied without reading its data`);
      } catch (error) {
        throw isWardenError(error) ? inFrame(error, index, digest) : error;
      }
    }
  } finally {
    await reader.close();
  }
}

/** The body as a run of bytes: exact takes across its pieces, and sub-streams of a frame's length. */
class PieceReader {
  readonly #iterator: AsyncIterator<Uint8Array> | undefined;
  readonly #limit: number;
  readonly #onData: ((bytes: number) => void) | undefined;
  #piece: Uint8Array;
  #at = 0;
  #ended = false;
  /** bytes taken from the body so far */
  consumed = 0;

  constructor(source: ByteSource, limit: number, onData: ((bytes: number) => void) | undefined) {
    this.#limit = limit;
    this.#onData = onData;
    if (source instanceof Uint8Array) {
      this.#piece = source;
      this.#ended = true;
    } else {
      this.#piece = new Uint8Array(0);
      this.#iterator = source[Symbol.asyncIterator]();
    }
  }

  /** True when a byte is buffered; false at the body's end. */
  async #fill(): Promise<boolean> {
    while (this.#at >= this.#piece.byteLength) {
      if (this.#ended || this.#iterator === undefined) return false;
      let next: IteratorResult<Uint8Array>;
      try {
        next = await this.#iterator.next();
      } catch (error) {
        throw isWardenError(error) ? error : chunkBodyAborted(error);
      }
      if (next.done === true) {
        this.#ended = true;
        return false;
      }
      this.#piece = next.value;
      this.#at = 0;
    }
    return true;
  }

  #advance(bytes: number): void {
    this.#at += bytes;
    this.consumed += bytes;
    if (this.consumed > this.#limit) throw chunkTooLarge(this.consumed, this.#limit);
  }

  /** The next `bytes` bytes; fewer at the body's end, undefined when it ended before any. */
  async take(bytes: number): Promise<Uint8Array | undefined> {
    if (!(await this.#fill())) return undefined;
    if (this.#piece.byteLength - this.#at >= bytes) {
      const whole = this.#piece.subarray(this.#at, this.#at + bytes);
      this.#advance(bytes);
      return whole;
    }
    const out = new Uint8Array(bytes);
    let got = 0;
    while (got < bytes && (await this.#fill())) {
      const n = Math.min(bytes - got, this.#piece.byteLength - this.#at);
      out.set(this.#piece.subarray(this.#at, this.#at + n), got);
      this.#advance(n);
      got += n;
    }
    return out.subarray(0, got);
  }

  /**
   * The next `length` bytes as a chunk's body: the buffered bytes themselves when they hold the
   * whole frame (the common case of a small blob), else a stream of its pieces as they arrive. A
   * body that ends first fails the frame as `blob-pack-invalid`, so its short data is never taken
   * for a whole chunk.
   */
  sub(length: number, index: number): { source: ByteSource; done(): boolean } {
    if (this.#piece.byteLength - this.#at >= length) {
      const whole = this.#piece.subarray(this.#at, this.#at + length);
      this.#advance(length);
      this.#onData?.(length);
      return { source: whole, done: () => true };
    }
    let left = length;
    const pieces = async function* (reader: PieceReader): AsyncIterable<Uint8Array> {
      while (left > 0) {
        if (!(await reader.#fill())) throw blobPackInvalid(index, "ends inside a frame's data");
        const n = Math.min(left, reader.#piece.byteLength - reader.#at);
        const piece = reader.#piece.subarray(reader.#at, reader.#at + n);
        reader.#advance(n);
        reader.#onData?.(n);
        left -= n;
        yield piece;
      }
    };
    return { source: pieces(this), done: () => left === 0 };
  }

  /** Stops reading: the source is told (its rest stays unread, for the caller to drain or drop). */
  async close(): Promise<void> {
    if (!this.#ended) await this.#iterator?.return?.();
  }
}
