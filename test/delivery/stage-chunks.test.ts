/**
 * The chunk protocol of stages (DESIGN.md PATCH /v1/stages/{id}/blobs/{digest}), ported from the
 * reference's chunk tests and extended to what warden adds: append-only partials, streamed
 * bodies, limits with their own codes, and failures at each I/O step.
 */
import { test, type TestContext } from "node:test";
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as path from "node:path";
import { createRequire, syncBuiltinESMExports } from "node:module";
import { sha256Digest } from "../../src/core/digest.js";
import type { EmbeddedDeliveryOptions } from "../../src/backends/embedded/delivery/delivery-backend.js";
import { EmbeddedBlobStore } from "../../src/backends/embedded/delivery/delivery-blob-store.js";
import { openDeliveryDatabase } from "../../src/backends/embedded/delivery/delivery-db.js";
import { DeliveryLayout } from "../../src/backends/embedded/delivery/delivery-layout.js";
import { EmbeddedStageStore } from "../../src/backends/embedded/delivery/delivery-stage-store.js";
import { ensurePrivateDirSync } from "../../src/storage/secure-fs.js";
import {
  buildManifest,
  bytesOf,
  failOnceAt,
  openStore,
  rejectsWith,
  skillManifest,
  tempHome,
  uploadMissing,
} from "./store-harness.js";
import { waitFor } from "../support/wait.js";

const enc = (s: string): Uint8Array => new TextEncoder().encode(s);

async function* streamOf(...pieces: Uint8Array[]): AsyncIterable<Uint8Array> {
  for (const p of pieces) yield p;
}

test("out-of-order chunks are refused with the expected offset; an exact replay is accepted", async (t) => {
  const { delivery } = await openStore(t, tempHome(t));
  const { manifest, blobs } = skillManifest();
  const begun = await delivery.begin(manifest);
  const { digest } = begun.missing[0]!;
  const bytes = blobs.get(digest)!;

  const early = await rejectsWith(delivery.putChunk(begun.stage_id, digest, 1, bytes.subarray(0, 5)), "chunk-out-of-order");
  assert.equal(early.status, 409);
  assert.equal(early.details.expected_offset, 0);

  assert.deepEqual(await delivery.putChunk(begun.stage_id, digest, 0, bytes.subarray(0, 5)), { next_offset: 5 });
  assert.deepEqual(await delivery.putChunk(begun.stage_id, digest, 0, bytes.subarray(0, 5)), { next_offset: 5 });

  const resumed = await delivery.begin(manifest);
  assert.equal(resumed.stage_id, begun.stage_id);
  assert.deepEqual(resumed.missing.find((m) => m.digest === digest), { digest, byte_len: bytes.byteLength, offset: 5 });

  const wrong = await rejectsWith(delivery.putChunk(begun.stage_id, digest, 0, enc("wrong")), "chunk-out-of-order");
  assert.equal(wrong.details.expected_offset, 5);
  const gap = await rejectsWith(delivery.putChunk(begun.stage_id, digest, 7, bytes.subarray(7, 9)), "chunk-out-of-order");
  assert.equal(gap.details.expected_offset, 5);
  // A replay may not run past what was received, even when its prefix matches.
  await rejectsWith(delivery.putChunk(begun.stage_id, digest, 3, bytes.subarray(3, 8)), "chunk-out-of-order");
  assert.equal((await delivery.status(begun.stage_id)).missing.find((m) => m.digest === digest)!.offset, 5);
});

test("replay reports the exact end of each chunk after several chunks, then the blob completes", async (t) => {
  const opened = await openStore(t, tempHome(t));
  const { delivery } = opened;
  const { manifest, blobs } = skillManifest();
  const begun = await delivery.begin(manifest);
  const { digest } = begun.missing.find((m) => m.byte_len >= 6)!;
  const bytes = blobs.get(digest)!;
  assert.equal((await delivery.putChunk(begun.stage_id, digest, 0, bytes.subarray(0, 2))).next_offset, 2);
  assert.equal((await delivery.putChunk(begun.stage_id, digest, 2, bytes.subarray(2, 4))).next_offset, 4);
  assert.equal((await delivery.putChunk(begun.stage_id, digest, 0, bytes.subarray(0, 2))).next_offset, 2);
  assert.equal((await delivery.putChunk(begun.stage_id, digest, 2, bytes.subarray(2, 4))).next_offset, 4);
  const partial = opened.layout.partialPath(begun.stage_id, digest);
  assert.deepEqual(new Uint8Array(fs.readFileSync(partial)), bytes.subarray(0, 4));
  assert.equal((await delivery.putChunk(begun.stage_id, digest, 4, bytes.subarray(4))).next_offset, bytes.byteLength);

  // Received and verified: the partial holds exactly the blob; it is published at commit.
  assert.deepEqual(new Uint8Array(fs.readFileSync(partial)), bytes);
  assert.equal(fs.existsSync(opened.layout.blobPath(digest)), false);
  assert.equal((await delivery.status(begun.stage_id)).missing.some((m) => m.digest === digest), false);
  // Replays of a received blob are compared with its partial.
  assert.equal((await delivery.putChunk(begun.stage_id, digest, 2, bytes.subarray(2, 4))).next_offset, 4);
  await rejectsWith(delivery.putChunk(begun.stage_id, digest, 2, enc("xy")), "chunk-out-of-order");
  assert.equal((await delivery.putChunk(begun.stage_id, digest, bytes.byteLength, new Uint8Array(0))).next_offset, bytes.byteLength);
  await rejectsWith(delivery.putChunk(begun.stage_id, digest, bytes.byteLength, enc("!")), "chunk-overflow");

  await uploadMissing(delivery, { ...begun, missing: begun.missing.filter((m) => m.digest !== digest) }, blobs);
  const receipt = await delivery.commit(begun.stage_id);
  assert.equal(receipt.manifest_digest, manifest.manifest_digest);
  // Published: the partial is gone and the blob store holds exactly the bytes.
  assert.equal(fs.existsSync(partial), false);
  assert.deepEqual(new Uint8Array(fs.readFileSync(opened.layout.blobPath(digest))), bytes);
});

test("replays of a blob another bundle stored meanwhile are compared with the stored blob", async (t) => {
  const { delivery } = await openStore(t, tempHome(t));
  const shared = bytesOf(30, 9_000);
  const a = buildManifest([{ path: "data/shared.bin", content: shared }], "bundle-a");
  const b = buildManifest([{ path: "data/shared.bin", content: shared }, { path: "data/b.bin", content: bytesOf(31, 500) }], "bundle-b");
  const stageB = await delivery.begin(b.manifest);
  const digest = a.manifest.components[0]!.blob.digest;
  await delivery.putChunk(stageB.stage_id, digest, 0, shared.subarray(0, 3000));
  await uploadMissing(delivery, await delivery.begin(a.manifest), a.blobs);
  await delivery.commit((await delivery.begin(a.manifest)).stage_id);
  // Resuming B finds the blob stored: it is no longer asked for, and replays compare with it.
  const resumed = await delivery.begin(b.manifest);
  assert.deepEqual(resumed.missing.map((m) => m.digest), b.manifest.components.filter((c) => c.blob.digest !== digest).map((c) => c.blob.digest));
  assert.equal((await delivery.putChunk(stageB.stage_id, digest, 3000, shared.subarray(3000, 6000))).next_offset, 6000);
  await rejectsWith(delivery.putChunk(stageB.stage_id, digest, 3000, shared.subarray(0, 3000)), "chunk-out-of-order");
  await uploadMissing(delivery, resumed, b.blobs);
  await delivery.commit(stageB.stage_id);
});

/** A store with a stage of one blob (`size` bytes of `seed`), whose first `first` bytes it received. */
async function oneBlobStage(t: TestContext, seed: number, size: number, first: number, options: EmbeddedDeliveryOptions = {}) {
  const opened = await openStore(t, tempHome(t), options);
  const data = bytesOf(seed, size);
  const { manifest } = buildManifest([{ path: "data/a.bin", content: data }]);
  const begun = await opened.delivery.begin(manifest);
  const digest = begun.missing[0]!.digest;
  await opened.delivery.putChunk(begun.stage_id, digest, 0, data.subarray(0, first));
  return { opened, delivery: opened.delivery, data, begun, digest };
}

test("a partial only grows by appends: earlier bytes and the file itself are never rewritten", async (t) => {
  const { opened, delivery, data: big, begun, digest } = await oneBlobStage(t, 1, 200_000, 70_000);
  const partial = opened.layout.partialPath(begun.stage_id, digest);
  const before = fs.statSync(partial);
  await delivery.putChunk(begun.stage_id, digest, 70_000, streamOf(big.subarray(70_000, 100_000), big.subarray(100_000, 140_000)));
  const after = fs.statSync(partial);
  assert.equal(after.ino, before.ino, "same file, not a rewritten copy");
  assert.equal(after.size, 140_000);
  assert.equal(after.mode & 0o777, 0o600);
  assert.deepEqual(new Uint8Array(fs.readFileSync(partial)), big.subarray(0, 140_000));
  assert.equal(fs.statSync(path.dirname(partial)).mode & 0o777, 0o700);
});

test("a streamed chunk is accepted piece by piece and checked against the blob's length", async (t) => {
  const opened = await openStore(t, tempHome(t));
  const { delivery } = opened;
  const data = bytesOf(2, 50_000);
  const { manifest } = buildManifest([{ path: "data/a.bin", content: data }]);
  const begun = await delivery.begin(manifest);
  const digest = begun.missing[0]!.digest;
  await delivery.putChunk(begun.stage_id, digest, 0, data.subarray(0, 10_000));
  const overflow = await rejectsWith(
    delivery.putChunk(begun.stage_id, digest, 10_000, streamOf(data.subarray(10_000, 30_000), new Uint8Array(30_001))),
    "chunk-overflow",
  );
  assert.equal(overflow.status, 413);
  // The refused chunk's first piece was written, then cut back: nothing of it stays.
  assert.equal((await delivery.status(begun.stage_id)).missing[0]!.offset, 10_000);
  const next = await delivery.putChunk(begun.stage_id, digest, 10_000, streamOf(data.subarray(10_000, 30_000), data.subarray(30_000)));
  assert.equal(next.next_offset, data.byteLength);
  await delivery.commit(begun.stage_id);
  assert.deepEqual(new Uint8Array(fs.readFileSync(opened.layout.blobPath(digest))), data);
});

test("limits: an oversized chunk has its own code, and a chunk past byte_len writes nothing", async (t) => {
  const opened = await openStore(t, tempHome(t), { limits: { chunkBytes: 1000 } });
  const { delivery } = opened;
  const data = bytesOf(3, 5000);
  const { manifest } = buildManifest([{ path: "data/a.bin", content: data }]);
  const begun = await delivery.begin(manifest);
  const digest = begun.missing[0]!.digest;
  const tooLarge = await rejectsWith(delivery.putChunk(begun.stage_id, digest, 0, data.subarray(0, 1001)), "chunk-too-large");
  assert.equal(tooLarge.status, 413);
  await rejectsWith(delivery.putChunk(begun.stage_id, digest, 0, streamOf(data.subarray(0, 600), data.subarray(600, 1200))), "chunk-too-large");
  assert.equal(fs.existsSync(opened.layout.partialPath(begun.stage_id, digest)), false, "a refused first chunk leaves no partial");

  for (let offset = 0; offset < 4500; offset += 500) await delivery.putChunk(begun.stage_id, digest, offset, data.subarray(offset, offset + 500));
  await rejectsWith(delivery.putChunk(begun.stage_id, digest, 4500, new Uint8Array(501)), "chunk-overflow");
  assert.equal(fs.statSync(opened.layout.partialPath(begun.stage_id, digest)).size, 4500);
});

test("a completed blob whose digest mismatches is refused (422) and restarts at offset 0", async (t) => {
  const opened = await openStore(t, tempHome(t));
  const { delivery } = opened;
  const { manifest, blobs } = skillManifest();
  const begun = await delivery.begin(manifest);
  const { digest } = begun.missing[0]!;
  const tampered = new Uint8Array(blobs.get(digest)!);
  tampered[0]! ^= 1;
  await delivery.putChunk(begun.stage_id, digest, 0, tampered.subarray(0, 10));
  const error = await rejectsWith(delivery.putChunk(begun.stage_id, digest, 10, tampered.subarray(10)), "blob-digest-mismatch");
  assert.equal(error.status, 422);
  assert.equal(fs.existsSync(opened.layout.partialPath(begun.stage_id, digest)), false);
  assert.equal(fs.existsSync(opened.layout.blobPath(digest)), false, "nothing was published");
  assert.equal((await delivery.status(begun.stage_id)).missing.find((m) => m.digest === digest)!.offset, 0);
  await uploadMissing(delivery, await delivery.begin(manifest), blobs);
  assert.equal((await delivery.commit(begun.stage_id)).bundle_id, "review-tools");
});

test("unknown stages, foreign digests and bad offsets each have their own code", async (t) => {
  const { delivery } = await openStore(t, tempHome(t));
  const { manifest, blobs } = skillManifest();
  const begun = await delivery.begin(manifest);
  const { digest } = begun.missing[0]!;
  const bytes = blobs.get(digest)!;
  const unknown = await rejectsWith(delivery.putChunk("0".repeat(32), digest, 0, bytes), "stage-not-found");
  assert.equal(unknown.status, 404);
  await rejectsWith(delivery.status("0".repeat(32)), "stage-not-found");
  await rejectsWith(delivery.putChunk("../../etc", digest, 0, bytes), "stage-id-invalid");
  await rejectsWith(delivery.putChunk(begun.stage_id, sha256Digest("other"), 0, bytes), "stage-blob-not-found");
  await rejectsWith(delivery.putChunk(begun.stage_id, "sha256:XYZ", 0, bytes), "invalid-digest");
  await rejectsWith(delivery.putChunk(begun.stage_id, digest, -1, bytes), "chunk-offset-invalid");
  await rejectsWith(delivery.putChunk(begun.stage_id, digest, 0.5, bytes), "chunk-offset-invalid");
});

test("an unsafe partial path (directory or symlink) is refused and nothing is written through it", async (t) => {
  const home = tempHome(t);
  const opened = await openStore(t, home);
  const { delivery } = opened;
  const { manifest, blobs } = skillManifest();
  const begun = await delivery.begin(manifest);
  const [first, second] = begun.missing;
  // Their empty partials are created ahead of the chunks: each is replaced by the planted path.
  await partialsCreatedAhead(opened, begun.stage_id, [first!.digest, second!.digest]);
  const dirPartial = opened.layout.partialPath(begun.stage_id, first!.digest);
  fs.rmSync(dirPartial);
  fs.mkdirSync(dirPartial, { mode: 0o700 });
  await rejectsWith(delivery.putChunk(begun.stage_id, first!.digest, 0, blobs.get(first!.digest)!), "unsafe-storage-not-regular");
  assert.ok(fs.statSync(dirPartial).isDirectory(), "the planted directory is left alone");

  const outside = path.join(home, "outside.txt");
  fs.writeFileSync(outside, "precious", { mode: 0o600 });
  const linkPartial = opened.layout.partialPath(begun.stage_id, second!.digest);
  fs.rmSync(linkPartial);
  fs.symlinkSync(outside, linkPartial);
  await rejectsWith(delivery.putChunk(begun.stage_id, second!.digest, 0, blobs.get(second!.digest)!), "unsafe-storage-symlink");
  assert.equal(fs.readFileSync(outside, "utf8"), "precious");
  assert.ok(fs.lstatSync(linkPartial).isSymbolicLink());
  // Fails closed every time, not just once.
  await rejectsWith(delivery.putChunk(begun.stage_id, second!.digest, 0, blobs.get(second!.digest)!), "unsafe-storage-symlink");
});

/** Waits until the empty partials of `digests` exist, created ahead of their first chunk. */
async function partialsCreatedAhead(opened: { readonly layout: { partialPath(stageId: string, digest: string): string } }, stageId: string, digests: readonly string[]): Promise<void> {
  await waitFor(`the empty partials of ${digests.length} blobs created ahead of their chunks`, () =>
    digests.every((d) => fs.lstatSync(opened.layout.partialPath(stageId, d), { throwIfNoEntry: false })?.isFile() === true) ? true : undefined,
    60_000,
  );
}

test("begin creates the first blobs' empty partials ahead of their chunks (0600, nothing in them); each chunk takes its file", async (t) => {
  const opened = await openStore(t, tempHome(t));
  const { delivery } = opened;
  const files = Array.from({ length: 40 }, (_, i) => ({ path: `data/f${String(i).padStart(2, "0")}.bin`, content: bytesOf(100 + i, 1000) }));
  const { manifest, blobs } = buildManifest(files);
  const begun = await delivery.begin(manifest);
  assert.equal(begun.missing.length, 40);
  // Bounded: a begin creates the next 16 the client is told to send, not one file per blob.
  const ahead = begun.missing.slice(0, 16).map((m) => m.digest);
  await partialsCreatedAhead(opened, begun.stage_id, ahead);
  for (const digest of ahead) {
    const st = fs.lstatSync(opened.layout.partialPath(begun.stage_id, digest));
    assert.equal(st.size, 0);
    assert.equal(st.mode & 0o777, 0o600);
  }
  assert.equal(fs.existsSync(opened.layout.partialPath(begun.stage_id, begun.missing[16]!.digest)), false);
  // The status still asks for every blob from 0: an empty partial records nothing.
  assert.deepEqual((await delivery.status(begun.stage_id)).missing, begun.missing);
  // Each chunk moves the window on; every blob is received and the commit publishes the bundle.
  await uploadMissing(delivery, begun, blobs);
  await delivery.commit(begun.stage_id);
  assert.equal(fs.existsSync(opened.layout.stageDir(begun.stage_id)), false);
});

test("a stage aborted while its partials are being created ahead leaves no file behind", async (t) => {
  const opened = await openStore(t, tempHome(t));
  const { delivery } = opened;
  const files = Array.from({ length: 16 }, (_, i) => ({ path: `data/f${String(i).padStart(2, "0")}.bin`, content: bytesOf(200 + i, 100) }));
  for (let round = 0; round < 5; round++) {
    const begun = await delivery.begin(buildManifest(files, "abort-ahead", `r${round}`).manifest);
    await delivery.abort(begun.stage_id);
    assert.equal(fs.existsSync(opened.layout.stageDir(begun.stage_id)), false, `round ${round}: the stage directory is gone`);
  }
});

test("a failure right after creating a partial removes it, and the exact retry succeeds", async (t) => {
  const opened = await openStore(t, tempHome(t), { faults: failOnceAt("partial-created", true).faults });
  const { delivery } = opened;
  const { manifest, blobs } = skillManifest();
  const begun = await delivery.begin(manifest);
  const { digest } = begun.missing[0]!;
  const error = await rejectsWith(delivery.putChunk(begun.stage_id, digest, 0, blobs.get(digest)!), "delivery-storage-failed");
  assert.equal(error.status, 503);
  assert.equal(fs.existsSync(opened.layout.partialPath(begun.stage_id, digest)), false);
  assert.equal((await delivery.putChunk(begun.stage_id, digest, 0, blobs.get(digest)!)).next_offset, blobs.get(digest)!.byteLength);
  await uploadMissing(delivery, { ...begun, missing: begun.missing.slice(1) }, blobs);
  await delivery.commit(begun.stage_id);
});

for (const point of ["chunk-written", "activity-record"] as const) {
  test(`a failure at ${point} acknowledges nothing; the partial is cut back and the retry continues`, async (t) => {
    const fault = failOnceAt(point);
    // Activity is written at most once a second: this clock makes every chunk write it.
    let now = 1_000_000;
    const { opened, delivery, data, begun, digest } = await oneBlobStage(t, 4, 30_000, 10_000, { faults: fault.faults, clock: () => (now += 2000) });
    fault.arm();
    await rejectsWith(delivery.putChunk(begun.stage_id, digest, 10_000, data.subarray(10_000, 20_000)), "delivery-storage-failed");
    assert.ok(fault.fired());
    assert.equal((await delivery.status(begun.stage_id)).missing[0]!.offset, 10_000, "acknowledged offset unchanged");
    assert.equal(fs.statSync(opened.layout.partialPath(begun.stage_id, digest)).size, 10_000, "the refused chunk's bytes are gone");
    // The client retries the same chunk at the same offset.
    assert.equal((await delivery.putChunk(begun.stage_id, digest, 10_000, data.subarray(10_000, 20_000))).next_offset, 20_000);
    assert.equal((await delivery.putChunk(begun.stage_id, digest, 20_000, data.subarray(20_000))).next_offset, 30_000);
    await delivery.commit(begun.stage_id);
    assert.deepEqual(new Uint8Array(fs.readFileSync(opened.layout.blobPath(digest))), data);
  });
}

test("a chunk whose pieces are written on the I/O threads fails whole when one of those writes fails: nothing acknowledged, the partial cut back", async (t) => {
  // Pieces over 16 KiB are written off the event loop's thread, one writev at a time; the failure
  // is met by the first one, while the later pieces are queued or still arriving.
  for (const failing of [1, 3]) {
    const fault = failOnceAt("chunk-written");
    const { opened, delivery, data, begun, digest } = await oneBlobStage(t, 7 + failing, 300_000, 50_000, { faults: fault.faults });
    const pieces = (from: number): Uint8Array[] => [0, 1, 2, 3, 4].map((i) => data.subarray(from + i * 50_000, from + (i + 1) * 50_000));
    // Arms the fault once `failing` pieces were handed over: the next write to end fails.
    async function* armedAfter(all: Uint8Array[]): AsyncIterable<Uint8Array> {
      for (const [i, piece] of all.entries()) {
        if (i === failing) fault.arm();
        yield piece;
        await new Promise<void>((resolve) => setImmediate(resolve));
      }
    }
    await rejectsWith(delivery.putChunk(begun.stage_id, digest, 50_000, armedAfter(pieces(50_000))), "delivery-storage-failed");
    assert.ok(fault.fired());
    assert.equal((await delivery.status(begun.stage_id)).missing[0]!.offset, 50_000, "acknowledged offset unchanged");
    assert.equal(fs.statSync(opened.layout.partialPath(begun.stage_id, digest)).size, 50_000, "the refused chunk's bytes are gone");
    assert.equal((await delivery.putChunk(begun.stage_id, digest, 50_000, streamOf(...pieces(50_000)))).next_offset, 300_000);
    await delivery.commit(begun.stage_id);
    assert.deepEqual(new Uint8Array(fs.readFileSync(opened.layout.blobPath(digest))), data);
  }
});

test("a chunk that meets a full disk is refused as exhausted capacity (507); the partial is cut back and the upload resumes once there is room", async (t) => {
  let full = false;
  const faults = {
    at: (point: string): void => {
      if (full && point === "chunk-written") throw Object.assign(new Error("ENOSPC: no space left on device, write"), { code: "ENOSPC", errno: -28 });
    },
  };
  const opened = await openStore(t, tempHome(t), { faults });
  const { delivery } = opened;
  const data = bytesOf(5, 30_000);
  const { manifest } = buildManifest([{ path: "data/a.bin", content: data }]);
  const begun = await delivery.begin(manifest);
  const digest = begun.missing[0]!.digest;
  await delivery.putChunk(begun.stage_id, digest, 0, data.subarray(0, 10_000));
  full = true;
  const refused = await rejectsWith(delivery.putChunk(begun.stage_id, digest, 10_000, data.subarray(10_000, 20_000)), "capacity-exhausted");
  assert.equal(refused.status, 507);
  assert.match(refused.message, /storage is full/);
  assert.equal((await delivery.status(begun.stage_id)).missing[0]!.offset, 10_000, "acknowledged offset unchanged");
  assert.equal(fs.statSync(opened.layout.partialPath(begun.stage_id, digest)).size, 10_000, "the refused chunk's bytes are gone");
  full = false;
  assert.equal((await delivery.putChunk(begun.stage_id, digest, 10_000, data.subarray(10_000))).next_offset, 30_000);
  await delivery.commit(begun.stage_id);
  assert.deepEqual(new Uint8Array(fs.readFileSync(opened.layout.blobPath(digest))), data);
});

test("a chunk costs no database commit and no fsync; the bytes are made durable once, at commit, before they are published", async (t) => {
  const points: string[] = [];
  // A still clock: activity is then never due for writing, which a test of its own covers.
  const opened = await openStore(t, tempHome(t), { faults: { at: (p) => void points.push(p) }, clock: () => 1_000_000 });
  const { delivery } = opened;
  const data = bytesOf(6, 40_000);
  const { manifest, blobs } = buildManifest([{ path: "data/a.bin", content: data }]);
  const begun = await delivery.begin(manifest);
  await uploadMissing(delivery, begun, blobs, 1000);
  assert.deepEqual(points, ["partial-created", ...Array<string>(40).fill("chunk-written")], "no sync and no record per chunk");
  points.length = 0;
  await delivery.commit(begun.stage_id);
  // Durability order: the bytes before their link into the store, the links before the record.
  assert.deepEqual(points, ["partial-sync", "blob-linked", "blob-dir-sync", "commit-record", "commit-recorded", "stage-row-delete", "stage-remove"]);
});

test("a blob's fdatasync starts while the next blob uploads, never after the upload's last chunk", async (t) => {
  const points: string[] = [];
  const opened = await openStore(t, tempHome(t), { faults: { at: (p) => void points.push(p) }, clock: () => 1_000_000 });
  const { delivery } = opened;
  const { manifest, blobs } = buildManifest([
    { path: "data/a.bin", content: bytesOf(7, 3000) },
    { path: "data/b.bin", content: bytesOf(8, 3000) },
  ]);
  const begun = await delivery.begin(manifest);
  const [first, second] = begun.missing;
  await uploadMissing(delivery, { ...begun, missing: [first!] }, blobs, 1000);
  assert.equal(points.includes("partial-sync"), false, "the last chunk is answered with no sync started");
  await delivery.putChunk(begun.stage_id, second!.digest, 0, blobs.get(second!.digest)!.subarray(0, 1000));
  assert.equal(points.filter((p) => p === "partial-sync").length, 1, "the next chunk starts the first blob's sync");
  await uploadMissing(delivery, { ...begun, missing: [{ ...second!, offset: 1000 }] }, blobs, 1000);
  assert.equal(points.filter((p) => p === "partial-sync").length, 1);
  points.length = 0;
  await delivery.commit(begun.stage_id);
  assert.deepEqual(points.filter((p) => p === "partial-sync").length, 1, "the commit syncs only the last blob");
  assert.ok(points.indexOf("partial-sync") < points.indexOf("blob-dir-sync"));
});

test("a failed fdatasync at commit publishes nothing, commits nothing and asks for the blob again", async (t) => {
  const fault = failOnceAt("partial-sync");
  const opened = await openStore(t, tempHome(t), { faults: fault.faults });
  const { delivery } = opened;
  const data = bytesOf(5, 30_000);
  const { manifest, blobs } = buildManifest([{ path: "data/a.bin", content: data }]);
  const begun = await delivery.begin(manifest);
  const digest = begun.missing[0]!.digest;
  await uploadMissing(delivery, begun, blobs, 10_000);
  fault.arm();
  await rejectsWith(delivery.commit(begun.stage_id), "delivery-storage-failed");
  assert.ok(fault.fired());
  assert.equal(fs.existsSync(opened.layout.blobPath(digest)), false, "bytes not known durable are not published");
  assert.equal(fs.existsSync(opened.layout.partialPath(begun.stage_id, digest)), false, "nor kept");
  assert.deepEqual(await delivery.catalog.list(), []);
  assert.equal((await delivery.status(begun.stage_id)).missing[0]!.offset, 0);
  await rejectsWith(delivery.commit(begun.stage_id), "stage-incomplete");
  await uploadMissing(delivery, await delivery.begin(manifest), blobs);
  await delivery.commit(begun.stage_id);
});

test("chunks of several blobs of one stage may arrive concurrently; a duplicated chunk is a replay", async (t) => {
  const { delivery } = await openStore(t, tempHome(t));
  const files = [0, 1, 2, 3].map((i) => ({ path: `data/f${i}.bin`, content: bytesOf(10 + i, 40_000 + i) }));
  const { manifest, blobs } = buildManifest(files);
  const begun = await delivery.begin(manifest);
  await Promise.all(begun.missing.map((m) => uploadMissing(delivery, { ...begun, missing: [m] }, blobs, 7000)));
  const first = begun.missing[0]!;
  const again = await Promise.all([1, 2].map(() => delivery.putChunk(begun.stage_id, first.digest, 0, blobs.get(first.digest)!.subarray(0, 7000))));
  assert.deepEqual(again, [{ next_offset: 7000 }, { next_offset: 7000 }]);
  await delivery.commit(begun.stage_id);
});

test("a commit that meets a full database is refused as exhausted capacity (507) and deletes nothing: once there is room, the same commit succeeds without a byte sent again", async (t) => {
  let full = false;
  const sqliteFull = (): Error => Object.assign(new Error("database or disk is full"), { code: "SQLITE_FULL" });
  const faults = {
    at: (point: string): void => {
      if (full && point === "activity-record") throw sqliteFull();
    },
  };
  // Activity is written at most once a second: this clock makes every publication write it.
  let now = 1_000_000;
  const opened = await openStore(t, tempHome(t), { faults, clock: () => (now += 2000) });
  const { delivery } = opened;
  const files = [0, 1, 2].map((i) => ({ path: `data/${i}.bin`, content: bytesOf(20 + i, 20_000) }));
  const { manifest, blobs } = buildManifest(files);
  const begun = await delivery.begin(manifest);
  await uploadMissing(delivery, begun, blobs);
  full = true;
  const refused = await rejectsWith(delivery.commit(begun.stage_id), "capacity-exhausted");
  assert.equal(refused.status, 507);
  full = false;
  assert.deepEqual((await delivery.status(begun.stage_id)).missing, [], "a refused commit asks for no acknowledged byte again");
  await delivery.commit(begun.stage_id);
  for (const f of files) assert.deepEqual(new Uint8Array(fs.readFileSync(opened.layout.blobPath(sha256Digest(f.content)))), f.content);
});

test("a chunk body that fails as it is read is the sender's abort (chunk-body-aborted, 400), not a storage failure; nothing of it is kept", async (t) => {
  const { opened, delivery, data, begun, digest } = await oneBlobStage(t, 5, 30_000, 10_000);
  async function* cutOff(): AsyncIterable<Uint8Array> {
    yield data.subarray(10_000, 15_000);
    throw Object.assign(new Error("aborted"), { code: "ECONNRESET" });
  }
  const error = await rejectsWith(delivery.putChunk(begun.stage_id, digest, 10_000, cutOff()), "chunk-body-aborted");
  assert.equal(error.status, 400);
  assert.match(error.message, /\(aborted\)/);
  assert.equal((await delivery.status(begun.stage_id)).missing[0]!.offset, 10_000, "acknowledged offset unchanged");
  assert.equal(fs.statSync(opened.layout.partialPath(begun.stage_id, digest)).size, 10_000, "the aborted chunk's bytes are gone");
  assert.equal((await delivery.putChunk(begun.stage_id, digest, 10_000, data.subarray(10_000))).next_offset, 30_000);
});

/** The descriptors this process has open now. */
function openFds(): number {
  return fs.readdirSync("/proc/self/fd").length;
}

/** Counts the opens of paths under `dir` (fs.open and fs.openSync, as the stores call them) while the test runs. */
function countOpens(t: TestContext, dir: string): { readonly count: () => number } {
  const cjs = createRequire(import.meta.url)("node:fs") as typeof fs;
  const { open, openSync } = cjs;
  let count = 0;
  const under = (p: fs.PathLike): boolean => String(p).startsWith(dir + path.sep);
  cjs.open = ((p: fs.PathLike, ...rest: unknown[]) => {
    if (under(p)) count++;
    return (open as (...args: unknown[]) => void)(p, ...rest);
  }) as typeof fs.open;
  cjs.openSync = ((p: fs.PathLike, ...rest: unknown[]) => {
    if (under(p)) count++;
    return (openSync as (...args: unknown[]) => number)(p, ...rest);
  }) as typeof fs.openSync;
  syncBuiltinESMExports();
  t.after(() => {
    cjs.open = open;
    cjs.openSync = openSync;
    syncBuiltinESMExports();
  });
  return { count: () => count };
}

test("a blob's partial is opened once, when it is created: its chunk, its identity and its fdatasync use that descriptor; none is left open", async (t) => {
  const opened = await openStore(t, tempHome(t));
  const { delivery } = opened;
  const files = Array.from({ length: 20 }, (_, i) => ({ path: `data/f${String(i).padStart(2, "0")}.bin`, content: bytesOf(300 + i, 5000) }));
  const { manifest, blobs } = buildManifest(files, "one-open", "r1");
  const fdsBefore = openFds();
  const opens = countOpens(t, opened.layout.stagesDir);
  const begun = await delivery.begin(manifest);
  await uploadMissing(delivery, begun, blobs);
  await delivery.commit(begun.stage_id);
  assert.equal(opens.count(), 20, "one open per blob, its creation: none for its chunk, its identity or its fdatasync");
  assert.equal(openFds(), fdsBefore, "every descriptor kept for a sync or created ahead is closed once the stage commits");

  // Chunks of several blobs at once (a push's requests in flight): a blob's sync waits for its
  // last chunk to hand over the descriptor, even when another blob's chunk comes between.
  const third = buildManifest(files.map((f, i) => ({ ...f, content: bytesOf(500 + i, 5000) })), "one-open", "r3");
  const concurrent = await delivery.begin(third.manifest);
  await Promise.all(concurrent.missing.map((m) => delivery.putChunk(concurrent.stage_id, m.digest, 0, third.blobs.get(m.digest)!)));
  await delivery.commit(concurrent.stage_id);
  assert.equal(opens.count(), 40, `one open per blob with 20 chunks in flight too (${opens.count() - 20})`);
  assert.equal(openFds(), fdsBefore);

  // A stage aborted midway closes what its blobs hold (created ahead, kept for a sync) too.
  const other = buildManifest(files.map((f, i) => ({ ...f, content: bytesOf(400 + i, 5000) })), "one-open", "r2");
  const second = await delivery.begin(other.manifest);
  await partialsCreatedAhead(opened, second.stage_id, second.missing.slice(6, 16).map((m) => m.digest));
  await uploadMissing(delivery, { ...second, missing: second.missing.slice(0, 6) }, other.blobs);
  await delivery.abort(second.stage_id);
  // The fdatasyncs started while it uploaded close their descriptors when they end.
  await waitFor("the aborted stage's descriptors all closed", () => (openFds() === fdsBefore ? true : undefined), 30_000);
});

test("a blob completed while another blob's chunk opens has its fdatasync wait for its own descriptor, not open the partial again", async (t) => {
  const home = tempHome(t);
  const layout = new DeliveryLayout(home);
  for (const dir of [home, layout.root, layout.blobsDir, layout.stagesDir]) ensurePrivateDirSync(dir, { create: true });
  const db = openDeliveryDatabase(layout.dbPath);
  t.after(() => db.close());
  const blobs = new EmbeddedBlobStore(layout);
  blobs.createShards();
  const stages = new EmbeddedStageStore(db, layout, blobs);
  const a = bytesOf(600, 40_000);
  const b = bytesOf(601, 40_000);
  const { manifest } = buildManifest([{ path: "data/a.bin", content: a }, { path: "data/b.bin", content: b }], "sync-handover", "r1");
  const [refA, refB] = manifest.components.map((c) => c.blob);
  const stageId = "5".repeat(32);
  const blobRows = [refA!, refB!].map((ref) => ({ digest: ref.digest, byte_len: ref.byte_len, received: 0, complete: false }));
  const opens = countOpens(t, layout.stagesDir);
  await stages.create({ stage_id: stageId, manifest, created_at: 1, last_active_at: 1, reserved_bytes: 80_000, blobs: blobRows });
  // A's last bytes are written and recorded; before its chunk closes, B's chunk opens its partial
  // (another request of the same push), which starts the syncs of the blobs complete by then.
  const partialA = await stages.openPartial(stageId, refA!.digest, 0);
  await partialA.append(a);
  await partialA.flush();
  await stages.recordReceived(stageId, refA!.digest, a.byteLength, 2);
  const partialB = await stages.openPartial(stageId, refB!.digest, 0);
  await partialA.close();
  await partialB.append(b);
  await partialB.flush();
  await stages.recordReceived(stageId, refB!.digest, b.byteLength, 3);
  await partialB.close();
  await stages.syncReceived(stageId, [refA!, refB!]);
  assert.equal(opens.count(), 2, `each partial opened once, created ahead: both fdatasyncs go through the descriptors written through (${opens.count()})`);
  await stages.remove(stageId);
});
