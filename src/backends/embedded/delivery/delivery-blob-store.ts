/**
 * Blobs as private files, content-addressed and sharded: blobs/ab/<64 hex>. Publication is
 * create-new (link(2), never rename over), and every read is verified against the address.
 */
import * as fs from "node:fs";
import { join } from "node:path";
import { digestFromHex, type Digest } from "../../../core/digest.js";
import { IntegrityError, NotFoundError, errnoCode } from "../../../core/errors.js";
import {
  RECEIVED_MISMATCH,
  TAMPERED,
  piecesOf,
  verifyBytes,
  verifyingStream,
  type BlobStore,
  type ByteSource,
} from "../../../delivery/blob-store.js";
import type { BlobRef } from "../../../delivery/manifest-types.js";
import {
  createPrivateFileSync,
  ensurePrivateDirSync,
  openPrivateFileSync,
  publishTempFile,
  syncDirSync,
  tempPathFor,
} from "../../../storage/secure-fs.js";
import { datasync, lstatOrUndefined, readExactly, syncDirectory, writeAll } from "./delivery-fd-io.js";
import { fire, type DeliveryFaults } from "./delivery-faults.js";
import { BLOB_NAME_RE, SHARD_NAME_RE, type DeliveryLayout } from "./delivery-layout.js";

const READ_PIECE = 1024 * 1024;

export class EmbeddedBlobStore implements BlobStore {
  readonly #layout: DeliveryLayout;
  readonly #faults: DeliveryFaults | undefined;
  /** Shard directories this process checked (ensurePrivateDirSync); shards are never removed. */
  readonly #shardsChecked = new Set<string>();

  constructor(layout: DeliveryLayout, faults?: DeliveryFaults) {
    this.#layout = layout;
    this.#faults = faults;
  }

  async has(digest: Digest): Promise<boolean> {
    return lstatOrUndefined(this.#layout.blobPath(digest))?.isFile() === true;
  }

  async put(ref: BlobRef, source: ByteSource): Promise<boolean> {
    const target = this.#layout.blobPath(ref.digest);
    this.#ensureShard(ref.digest);
    if (await this.has(ref.digest)) return false;
    const temp = tempPathFor(target);
    const fd = createPrivateFileSync(temp, "append");
    try {
      for await (const piece of verifyingStream(ref, piecesOf(source), RECEIVED_MISMATCH)) await writeAll(fd, piece);
      await datasync(fd);
    } catch (error) {
      fs.closeSync(fd);
      fs.rmSync(temp, { force: true });
      throw error;
    }
    fs.closeSync(fd);
    fire(this.#faults, "blob-temp-written");
    return publishTempFile(temp, target);
  }

  /**
   * Publishes a verified, fsynced file (a completed partial) without copying it: a create-new
   * link(2) into its shard. Returns false when the blob was already stored. The link is made
   * durable later by `sync`, before any commit that needs it, so an upload waits for one fsync
   * per chunk, not three; a power loss before that only loses the upload, never a commit.
   */
  async link(ref: BlobRef, source: string): Promise<boolean> {
    const dir = this.#layout.shardDir(ref.digest);
    this.#ensureShard(ref.digest);
    try {
      fs.linkSync(source, this.#layout.blobPath(ref.digest));
      return true;
    } catch (error) {
      if (errnoCode(error) === "EEXIST") return false;
      if (errnoCode(error) !== "ENOENT" || !this.#shardsChecked.delete(dir) || lstatOrUndefined(source) === undefined) throw error;
      // The shard this process checked is gone (removed by hand): check it, and link, anew.
      return this.link(ref, source);
    }
  }

  async sync(digests: readonly Digest[]): Promise<void> {
    fire(this.#faults, "blob-dir-sync");
    const dirs = new Set([this.#layout.blobsDir, ...digests.map((d) => this.#layout.shardDir(d))]);
    await Promise.all([...dirs].map((dir) => syncDirectory(dir)));
  }

  /**
   * A new store has every shard (`createShards`); an older one gets them on first use, their own
   * directory entries made durable by `sync`.
   */
  #ensureShard(digest: Digest): void {
    const dir = this.#layout.shardDir(digest);
    // Checked once per process: the tree is ours (0700) and audited at start-up, like the
    // partials this process opened before.
    if (this.#shardsChecked.has(dir)) return;
    // `recursive` skips ensurePrivateDirSync's parent fsync (blobs/ exists), which sync() does.
    ensurePrivateDirSync(dir, { create: true, recursive: true });
    this.#shardsChecked.add(dir);
  }

  /**
   * Lays out a new store's 256 shards at once. A mkdir costs about half a millisecond here, and
   * the first bundles put into a store would otherwise create one per blob, during their commit.
   */
  createShards(): void {
    for (let i = 0; i < 256; i++) {
      const dir = join(this.#layout.blobsDir, i.toString(16).padStart(2, "0"));
      ensurePrivateDirSync(dir, { create: true, recursive: true });
      this.#shardsChecked.add(dir);
    }
    syncDirSync(this.#layout.blobsDir);
  }

  /** The whole blob, verified (off this thread: see verifyBytes) before it is returned. */
  async read(ref: BlobRef): Promise<Uint8Array> {
    const fd = this.#open(ref.digest);
    let bytes: Buffer;
    try {
      checkSize(ref, fs.fstatSync(fd).size);
      bytes = await readExactly(fd, 0, ref.byte_len);
    } finally {
      fs.closeSync(fd);
    }
    await verifyBytes(ref, bytes, TAMPERED);
    return bytes;
  }

  stream(ref: BlobRef): AsyncIterable<Uint8Array> {
    return this.#stream(ref);
  }

  async *#stream(ref: BlobRef): AsyncIterable<Uint8Array> {
    const fd = this.#open(ref.digest);
    try {
      checkSize(ref, fs.fstatSync(fd).size);
      yield* verifyingStream(ref, readPieces(fd, ref.byte_len), TAMPERED);
    } finally {
      fs.closeSync(fd);
    }
  }

  async readRange(digest: Digest, position: number, length: number): Promise<Uint8Array> {
    const fd = this.#open(digest);
    try {
      return await readExactly(fd, position, length);
    } finally {
      fs.closeSync(fd);
    }
  }

  async delete(digest: Digest): Promise<void> {
    fs.rmSync(this.#layout.blobPath(digest), { force: true });
  }

  async *list(): AsyncIterable<Digest> {
    for (const shard of readdirOrEmpty(this.#layout.blobsDir)) {
      if (!SHARD_NAME_RE.test(shard)) continue;
      for (const name of readdirOrEmpty(join(this.#layout.blobsDir, shard))) {
        if (BLOB_NAME_RE.test(name)) yield digestFromHex(name);
      }
    }
  }

  #open(digest: Digest): number {
    try {
      return openPrivateFileSync(this.#layout.blobPath(digest), "read");
    } catch (error) {
      if (errnoCode(error) === "ENOENT") {
        throw new NotFoundError("blob-not-found", `blob ${digest} is not stored`, { details: { digest } });
      }
      throw error;
    }
  }
}

/** A stored blob of the wrong size is refused before any of its bytes is used. */
function checkSize(ref: BlobRef, size: number): void {
  if (size !== ref.byte_len) {
    throw new IntegrityError("blob-tampered", `stored blob ${ref.digest} has ${size} bytes, want ${ref.byte_len}`, {
      details: { digest: ref.digest, byte_len: ref.byte_len, size },
    });
  }
}

/** Reads up to `limit` bytes (one past is enough to notice a longer file) in fresh pieces. */
async function* readPieces(fd: number, limit: number): AsyncIterable<Uint8Array> {
  let position = 0;
  for (;;) {
    const piece = await readExactly(fd, position, Math.min(READ_PIECE, limit + 1 - position));
    if (piece.byteLength === 0) return;
    yield piece;
    position += piece.byteLength;
    if (position > limit) return;
  }
}

function readdirOrEmpty(dir: string): string[] {
  try {
    return fs.readdirSync(dir);
  } catch (error) {
    if (errnoCode(error) === "ENOENT") return [];
    throw error;
  }
}
