/**
 * Blobs in the database, so nodes share them without a shared filesystem: one `warden_blobs` row
 * per digest and the bytes as `warden_blob_chunks` rows (bytea) in offset order. A blob row and
 * its chunks commit in one transaction, so a stored digest always has all its bytes; every read
 * still goes through verifyingStream (G8), because rows can be edited outside warden.
 */
import type { Digest } from "../../core/digest.js";
import { IntegrityError, NotFoundError } from "../../core/errors.js";
import { RECEIVED_MISMATCH, TAMPERED, piecesOf, verifyingStream, type BlobStore, type ByteSource } from "../../delivery/blob-store.js";
import type { BlobRef } from "../../delivery/manifest-types.js";
import { query, transaction, type PgPool } from "./connection.js";

/** Size of the chunk rows `put` writes. */
const ROW_BYTES = 1024 * 1024;
/** Rows fetched per round trip when streaming. */
const ROWS_PER_FETCH = 4;
const LIST_PAGE = 1000;

export class PostgresBlobStore implements BlobStore {
  readonly #pool: PgPool;

  constructor(pool: PgPool) {
    this.#pool = pool;
  }

  async has(digest: Digest): Promise<boolean> {
    return (await this.#storedLength(digest)) !== undefined;
  }

  async put(ref: BlobRef, source: ByteSource): Promise<boolean> {
    if (await this.has(ref.digest)) return false;
    return transaction(this.#pool, "store a blob", async (client) => {
      const created = await client.query({
        name: "warden-blob-create",
        text: "INSERT INTO warden_blobs (digest, byte_len, created_at) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING",
        values: [ref.digest, ref.byte_len, Date.now()],
      });
      // Stored meanwhile by another writer (its transaction committed first).
      if (created.rowCount !== 1) return false;
      let offset = 0;
      let pending: Buffer[] = [];
      let pendingBytes = 0;
      const flush = async (): Promise<void> => {
        if (pendingBytes === 0) return;
        await client.query({
          name: "warden-blob-chunk",
          text: "INSERT INTO warden_blob_chunks (digest, off, bytes) VALUES ($1, $2, $3)",
          values: [ref.digest, offset, Buffer.concat(pending)],
        });
        offset += pendingBytes;
        pending = [];
        pendingBytes = 0;
      };
      // A mismatch throws out of the stream: the transaction rolls back and nothing is stored.
      for await (const piece of verifyingStream(ref, piecesOf(source), RECEIVED_MISMATCH)) {
        pending.push(Buffer.from(piece));
        pendingBytes += piece.byteLength;
        if (pendingBytes >= ROW_BYTES) await flush();
      }
      await flush();
      return true;
    });
  }

  stream(ref: BlobRef): AsyncIterable<Uint8Array> {
    return this.#stream(ref);
  }

  async *#stream(ref: BlobRef): AsyncIterable<Uint8Array> {
    const stored = await this.#storedLength(ref.digest);
    if (stored === undefined) throw notFound(ref.digest);
    if (stored !== ref.byte_len) {
      throw new IntegrityError("blob-tampered", `stored blob ${ref.digest} has ${stored} bytes, want ${ref.byte_len}`, {
        details: { digest: ref.digest, byte_len: ref.byte_len, size: stored },
      });
    }
    yield* verifyingStream(ref, this.#rows(ref.digest), TAMPERED);
  }

  /** The chunk rows in order; a gap or overlap between rows counts as tampering. */
  async *#rows(digest: Digest): AsyncIterable<Uint8Array> {
    let position = 0;
    for (;;) {
      const result = await query<{ off: number; bytes: Buffer }>(this.#pool, "read a blob", {
        name: "warden-blob-rows",
        text: `SELECT off, bytes FROM warden_blob_chunks WHERE digest = $1 AND off >= $2 ORDER BY off LIMIT ${ROWS_PER_FETCH}`,
        values: [digest, position],
      });
      for (const row of result.rows) {
        if (row.off !== position) {
          throw new IntegrityError("blob-tampered", `stored blob ${digest} has a gap or overlap at offset ${position}`, { details: { digest } });
        }
        position += row.bytes.byteLength;
        yield row.bytes;
      }
      if (result.rows.length < ROWS_PER_FETCH) return;
    }
  }

  async read(ref: BlobRef): Promise<Uint8Array> {
    const pieces: Uint8Array[] = [];
    for await (const piece of this.stream(ref)) pieces.push(piece);
    return pieces.length === 1 ? pieces[0]! : Buffer.concat(pieces);
  }

  async readRange(digest: Digest, position: number, length: number): Promise<Uint8Array> {
    if ((await this.#storedLength(digest)) === undefined) throw notFound(digest);
    return readRangeOf(this.#pool, "warden_blob_chunks", "octet_length(bytes)", ["digest = $3"], [digest], position, length);
  }

  /** Committed rows are durable already (synchronous_commit): nothing to do. */
  async sync(_digests: readonly Digest[]): Promise<void> {}

  async delete(digest: Digest): Promise<void> {
    await query(this.#pool, "delete a blob", {
      name: "warden-blob-delete",
      text: "DELETE FROM warden_blobs WHERE digest = $1",
      values: [digest],
    });
  }

  async *list(): AsyncIterable<Digest> {
    let after = "";
    for (;;) {
      const result = await query<{ digest: Digest }>(this.#pool, "list blobs", {
        name: "warden-blob-list",
        text: `SELECT digest FROM warden_blobs WHERE digest > $1 ORDER BY digest LIMIT ${LIST_PAGE}`,
        values: [after],
      });
      for (const row of result.rows) yield row.digest;
      if (result.rows.length < LIST_PAGE) return;
      after = result.rows[result.rows.length - 1]!.digest;
    }
  }

  async #storedLength(digest: Digest): Promise<number | undefined> {
    const result = await query<{ byte_len: number }>(this.#pool, "find a blob", {
      name: "warden-blob-has",
      text: "SELECT byte_len FROM warden_blobs WHERE digest = $1",
      values: [digest],
    });
    return result.rows[0]?.byte_len;
  }
}

/**
 * Bytes `[position, position + length)` of rows `(off, bytes)` selected by `where` (parameters
 * from $3), cut server-side so only the requested bytes travel. Shorter than asked when the rows
 * end first; the caller decides what that means.
 */
export async function readRangeOf(
  pool: PgPool,
  table: string,
  lengthExpr: string,
  where: readonly string[],
  values: readonly unknown[],
  position: number,
  length: number,
): Promise<Buffer> {
  const end = position + length;
  const result = await query<{ off: number; piece: Buffer }>(pool, "read stored bytes", {
    name: `warden-range-${table}`,
    text:
      `SELECT off, substring(bytes FROM (GREATEST($1 - off, 0) + 1)::int FOR (LEAST(off + ${lengthExpr}, $2) - GREATEST(off, $1))::int) AS piece ` +
      `FROM ${table} WHERE ${where.join(" AND ")} AND off < $2 AND off + ${lengthExpr} > $1 ORDER BY off`,
    values: [position, end, ...values],
  });
  const pieces: Buffer[] = [];
  let at = position;
  for (const row of result.rows) {
    if (Math.max(row.off, position) !== at) break;
    pieces.push(row.piece);
    at += row.piece.byteLength;
  }
  return pieces.length === 1 ? pieces[0]! : Buffer.concat(pieces);
}

function notFound(digest: Digest): NotFoundError {
  return new NotFoundError("blob-not-found", `blob ${digest} is not stored`, { details: { digest } });
}
