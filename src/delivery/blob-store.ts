/**
 * The content-addressed blob store (G8): what a backend must provide, and the verification every
 * read goes through. Blobs are addressed by the sha256 of their bytes; a blob is published only
 * after its digest and length were checked, and checked again whenever it is read.
 */
import { webcrypto } from "node:crypto";
import { DigestStream, digestEquals, type Digest } from "../core/digest.js";
import { IntegrityError, LimitError } from "../core/errors.js";
import type { BlobRef } from "./manifest-types.js";

/** A request body: whole bytes, or a stream of pieces that is never buffered whole. */
export type ByteSource = Uint8Array | AsyncIterable<Uint8Array>;

export interface BlobStore {
  /** True when a blob with this digest is stored. Says nothing about its integrity. */
  has(digest: Digest): Promise<boolean>;
  /**
   * Streams `source` into the store, verifying digest and length before an atomic create-new
   * publish. Returns false when the blob was already stored. A mismatch throws IntegrityError
   * (`blob-digest-mismatch`, `blob-length-mismatch`) and stores nothing.
   */
  put(ref: BlobRef, source: ByteSource): Promise<boolean>;
  /**
   * Streams a stored blob through `verifyingStream`: the iteration throws `blob-tampered` if the
   * bytes do not match `ref`, so a consumer must not act on the bytes before it completes.
   * A missing blob throws NotFoundError `blob-not-found`.
   */
  stream(ref: BlobRef): AsyncIterable<Uint8Array>;
  /** A whole blob, verified (digest and length) before it is returned. Callers bound its size. */
  read(ref: BlobRef): Promise<Uint8Array>;
  /** Unverified bytes `[position, position + length)`, for comparing a replayed chunk. */
  readRange(digest: Digest, position: number, length: number): Promise<Uint8Array>;
  /**
   * Makes these stored blobs durable where storing them was not yet (for files: their directory
   * entries). A commit calls it before writing its record, so publishing a blob need not wait
   * for the disk on every upload.
   */
  sync(digests: readonly Digest[]): Promise<void>;
  /** Removes a blob (garbage collection, or a blob found tampered). Absent is not an error. */
  delete(digest: Digest): Promise<void>;
  /** Every stored digest. */
  list(): AsyncIterable<Digest>;
}

/** Iterates a body as pieces, whether it arrived whole or streamed. */
export async function* piecesOf(source: ByteSource): AsyncIterable<Uint8Array> {
  if (source instanceof Uint8Array) {
    yield source;
    return;
  }
  yield* source;
}

/** Which IntegrityError code a failed check raises: stored bytes are "tampered", received bytes "mismatched". */
export interface MismatchCodes {
  readonly length: string;
  readonly digest: string;
}

export const TAMPERED: MismatchCodes = { length: "blob-tampered", digest: "blob-tampered" };
export const RECEIVED_MISMATCH: MismatchCodes = { length: "blob-length-mismatch", digest: "blob-digest-mismatch" };

/**
 * Passes `source` through while hashing it; throws an IntegrityError as soon as it is longer than
 * `ref.byte_len`, or at the end when length or digest differ. This is the one place where bytes
 * are checked against their address, for reads and for `put` alike.
 */
export async function* verifyingStream(
  ref: BlobRef,
  source: AsyncIterable<Uint8Array>,
  codes: MismatchCodes = TAMPERED,
): AsyncIterable<Uint8Array> {
  const hash = new DigestStream();
  for await (const piece of source) {
    hash.update(piece);
    if (hash.length > ref.byte_len) throw mismatch(ref, codes.length, `is longer than ${ref.byte_len} bytes`);
    yield piece;
  }
  if (hash.length !== ref.byte_len) throw mismatch(ref, codes.length, `has ${hash.length} bytes, want ${ref.byte_len}`);
  const actual = hash.digest();
  if (!digestEquals(actual, ref.digest)) throw mismatch(ref, codes.digest, `hashes to ${actual}`);
}

function mismatch(ref: BlobRef, code: string, what: string): IntegrityError {
  return new IntegrityError(code, `blob ${ref.digest} ${what}`, { details: { digest: ref.digest, byte_len: ref.byte_len } });
}

/**
 * Checks whole bytes against their address. The digest runs on the I/O threads (WebCrypto), so a
 * caller hashing other bytes on this thread overlaps with it.
 */
export async function verifyBytes(ref: BlobRef, bytes: Uint8Array, codes: MismatchCodes = TAMPERED): Promise<void> {
  if (bytes.byteLength !== ref.byte_len) throw mismatch(ref, codes.length, `has ${bytes.byteLength} bytes, want ${ref.byte_len}`);
  const actual = await digestOffThread(bytes);
  if (!digestEquals(actual, ref.digest)) throw mismatch(ref, codes.digest, `hashes to ${actual}`);
}

/** The digest of whole bytes, computed on the I/O threads (WebCrypto) rather than this one. */
export async function digestOffThread(bytes: Uint8Array): Promise<Digest> {
  return `sha256:${Buffer.from(await webcrypto.subtle.digest("SHA-256", bytes)).toString("hex")}`;
}

/** Refuses to hold in memory a blob over `maxBytes`. */
export function checkBufferable(ref: BlobRef, maxBytes: number): void {
  if (ref.byte_len > maxBytes) {
    throw new LimitError("blob-too-large-to-buffer", `blob ${ref.digest} is ${ref.byte_len} bytes, over ${maxBytes}`, {
      details: { digest: ref.digest, byte_len: ref.byte_len, limit: maxBytes },
    });
  }
}

/** Reads a whole blob, verified before any byte is returned, refusing one over `maxBytes`. */
export async function readVerifiedBlob(store: BlobStore, ref: BlobRef, maxBytes: number): Promise<Uint8Array> {
  checkBufferable(ref, maxBytes);
  return store.read(ref);
}
