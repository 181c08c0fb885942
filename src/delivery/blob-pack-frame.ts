/**
 * A blob pack's frame layout (DESIGN.md "Blob packs"): `digest (32 bytes, raw sha256) ‖ offset
 * (u64 big-endian) ‖ length (u32 big-endian) ‖ length bytes`, frames back to back. Plain
 * JavaScript on purpose: the client encodes with it, in Node and in the console's browser build.
 */

/** Bytes of a frame's header: digest, offset, length. */
export const FRAME_HEADER_BYTES = 32 + 8 + 4;
/** The largest frame length the header can carry. */
export const MAX_FRAME_LENGTH = 0xffff_ffff;

const DIGEST_RE = /^sha256:([0-9a-f]{64})$/;

/** One frame to send: `bytes` are the blob's bytes from `offset`. */
export interface PackChunk {
  /** `sha256:<64 hex>` */
  readonly digest: string;
  readonly offset: number;
  readonly bytes: Uint8Array;
}

/** The bytes a pack of these frames takes on the wire. */
export function packBytes(frames: readonly Pick<PackChunk, "bytes">[]): number {
  return frames.reduce((sum, f) => sum + FRAME_HEADER_BYTES + f.bytes.byteLength, 0);
}

/** Writes a frame's header at `at` of `into`. */
export function writeFrameHeader(into: Uint8Array, at: number, digest: string, offset: number, length: number): void {
  const hex = DIGEST_RE.exec(digest)?.[1];
  if (hex === undefined) throw new TypeError(`not a sha256 digest: ${digest}`);
  if (!Number.isSafeInteger(offset) || offset < 0) throw new RangeError(`a frame's offset must be a non-negative integer, not ${offset}`);
  if (!Number.isSafeInteger(length) || length < 0 || length > MAX_FRAME_LENGTH) throw new RangeError(`a frame's length must fit 32 bits, not ${length}`);
  for (let i = 0; i < 32; i++) into[at + i] = parseInt(hex.slice(2 * i, 2 * i + 2), 16);
  const view = new DataView(into.buffer, into.byteOffset + at + 32, 12);
  view.setBigUint64(0, BigInt(offset));
  view.setUint32(8, length);
}

/** A whole pack's body: each frame's header and bytes, in order. */
export function encodePack(frames: readonly PackChunk[]): Uint8Array {
  const body = new Uint8Array(packBytes(frames));
  let at = 0;
  for (const frame of frames) {
    writeFrameHeader(body, at, frame.digest, frame.offset, frame.bytes.byteLength);
    body.set(frame.bytes, at + FRAME_HEADER_BYTES);
    at += FRAME_HEADER_BYTES + frame.bytes.byteLength;
  }
  return body;
}
