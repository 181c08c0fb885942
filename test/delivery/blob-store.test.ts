/**
 * The embedded blob store on its own: content-addressed sharded private files, a streaming put
 * that verifies digest and length before a create-new publish, and reads that re-verify.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as path from "node:path";
import { sha256Digest, digestHex } from "../../src/core/digest.js";
import { readVerifiedBlob } from "../../src/delivery/blob-store.js";
import { EmbeddedBlobStore } from "../../src/backends/embedded/delivery/delivery-blob-store.js";
import { DeliveryLayout } from "../../src/backends/embedded/delivery/delivery-layout.js";
import { bytesOf, rejectsWith, tempHome, treeOf } from "./store-harness.js";

function storeIn(home: string): { store: EmbeddedBlobStore; layout: DeliveryLayout } {
  const layout = new DeliveryLayout(home);
  fs.mkdirSync(layout.blobsDir, { recursive: true, mode: 0o700 });
  fs.chmodSync(layout.root, 0o700);
  return { store: new EmbeddedBlobStore(layout), layout };
}

async function* pieces(bytes: Uint8Array, size: number): AsyncIterable<Uint8Array> {
  for (let i = 0; i < bytes.byteLength; i += size) yield bytes.subarray(i, i + size);
}

test("put streams, verifies and publishes create-new into a private shard", async (t) => {
  const { store, layout } = storeIn(tempHome(t, "blob"));
  const bytes = bytesOf(1, 3 * 1024 * 1024 + 5);
  const ref = { digest: sha256Digest(bytes), byte_len: bytes.byteLength };
  assert.equal(await store.has(ref.digest), false);
  assert.equal(await store.put(ref, pieces(bytes, 100_000)), true);
  const file = layout.blobPath(ref.digest);
  assert.equal(path.basename(path.dirname(file)), digestHex(ref.digest).slice(0, 2));
  assert.equal(fs.statSync(file).mode & 0o777, 0o600);
  assert.equal(fs.statSync(path.dirname(file)).mode & 0o777, 0o700);
  assert.equal(await store.has(ref.digest), true);
  assert.equal(await store.put(ref, bytes), false, "an existing blob is kept, never overwritten");
  assert.deepEqual(new Uint8Array(await readVerifiedBlob(store, ref, 4 * 1024 * 1024)), bytes);
  assert.deepEqual(new Uint8Array(await store.readRange(ref.digest, 10, 5)), bytes.subarray(10, 15));
  const listed: string[] = [];
  for await (const d of store.list()) listed.push(d);
  assert.deepEqual(listed, [ref.digest]);
  await store.delete(ref.digest);
  await store.delete(ref.digest);
  assert.equal(await store.has(ref.digest), false);
});

test("put refuses wrong bytes, too many or too few, and leaves nothing behind", async (t) => {
  const { store, layout } = storeIn(tempHome(t, "blob"));
  const bytes = bytesOf(2, 10_000);
  const ref = { digest: sha256Digest(bytes), byte_len: bytes.byteLength };
  const flipped = new Uint8Array(bytes);
  flipped[9_999]! ^= 1;
  const wrong = await rejectsWith(store.put(ref, pieces(flipped, 4096)), "blob-digest-mismatch");
  assert.equal(wrong.status, 422);
  await rejectsWith(store.put(ref, pieces(new Uint8Array([...bytes, 1]), 4096)), "blob-length-mismatch");
  await rejectsWith(store.put(ref, bytes.subarray(0, 9_999)), "blob-length-mismatch");
  assert.deepEqual(treeOf(layout.blobsDir), [`${digestHex(ref.digest).slice(0, 2)}/`], "no blob, no temp file");
});

test("reads re-verify: same-length tampering fails at the end, a wrong length before any byte", async (t) => {
  const { store, layout } = storeIn(tempHome(t, "blob"));
  const bytes = bytesOf(3, 2_500_000);
  const ref = { digest: sha256Digest(bytes), byte_len: bytes.byteLength };
  await store.put(ref, bytes);
  const file = layout.blobPath(ref.digest);
  const flipped = Buffer.from(bytes);
  flipped[2_400_000]! ^= 1;
  fs.writeFileSync(file, flipped);
  let seen = 0;
  await rejectsWith(
    (async () => {
      for await (const piece of store.stream(ref)) seen += piece.byteLength;
    })(),
    "blob-tampered",
  );
  assert.equal(seen, bytes.byteLength, "the stream is verified at its end, after every byte");
  fs.writeFileSync(file, Buffer.from(bytes.subarray(1)));
  seen = 0;
  await rejectsWith(
    (async () => {
      for await (const piece of store.stream(ref)) seen += piece.byteLength;
    })(),
    "blob-tampered",
  );
  assert.equal(seen, 0, "a wrong size is refused before any byte");
  fs.rmSync(file);
  await rejectsWith(readVerifiedBlob(store, ref, 4 * 1024 * 1024), "blob-not-found");
  await rejectsWith(readVerifiedBlob(store, ref, 1024), "blob-too-large-to-buffer");
});

test("a symlink or hard link in the blob's place is refused, never followed", async (t) => {
  const home = tempHome(t, "blob");
  const { store, layout } = storeIn(home);
  const bytes = new TextEncoder().encode("hello\n");
  const ref = { digest: sha256Digest(bytes), byte_len: bytes.byteLength };
  const outside = path.join(home, "outside");
  fs.writeFileSync(outside, bytes, { mode: 0o600 });
  fs.mkdirSync(layout.shardDir(ref.digest), { mode: 0o700 });
  fs.symlinkSync(outside, layout.blobPath(ref.digest));
  await rejectsWith(readVerifiedBlob(store, ref, 100), "unsafe-storage-symlink");
  fs.rmSync(layout.blobPath(ref.digest));
  fs.linkSync(outside, layout.blobPath(ref.digest));
  await rejectsWith(readVerifiedBlob(store, ref, 100), "unsafe-storage-hard-link");
});
