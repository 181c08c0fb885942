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

/**
 * A pack's body as the pieces that go on the wire back to back: each frame's header, then its
 * bytes. The headers share one small buffer and each frame's bytes are the caller's own, not
 * copied: joining them cost a push a fresh 4 MiB buffer per pack, zeroed, faulted in and filled
 * (issue 34). A sender that can write several buffers (the client's own fetch) sends these as they are.
 */
export function packPieces(frames: readonly PackChunk[]): Uint8Array[] {
  const headers = new Uint8Array(frames.length * FRAME_HEADER_BYTES);
  const pieces: Uint8Array[] = [];
  for (const [i, frame] of frames.entries()) {
    const at = i * FRAME_HEADER_BYTES;
    writeFrameHeader(headers, at, frame.digest, frame.offset, frame.bytes.byteLength);
    pieces.push(headers.subarray(at, at + FRAME_HEADER_BYTES), frame.bytes);
  }
  return pieces;
}

/** Pieces joined into one buffer (for a sender that takes one body). */
export function joinPieces(pieces: readonly Uint8Array[]): Uint8Array {
  const body = new Uint8Array(pieces.reduce((sum, p) => sum + p.byteLength, 0));
  let at = 0;
  for (const piece of pieces) {
    body.set(piece, at);
    at += piece.byteLength;
  }
  return body;
}

/** A whole pack's body in one buffer: each frame's header and bytes, in order. */
export function encodePack(frames: readonly PackChunk[]): Uint8Array {
  return joinPieces(packPieces(frames));
}
