/**
 * Stage lifecycle: begin/resume, durable metadata across restarts (warden resumes where
 * gate4agent forgot), expiry by inactivity (not by age), abort, and capacity limits that refuse
 * new work with distinct codes while deleting nothing.
 */
import { test, type TestContext } from "node:test";
import assert from "node:assert/strict";
import * as fs from "node:fs";
import {
  buildManifest,
  bytesOf,
  dataFilesOf,
  openStore,
  partlyUploaded,
  rejectsWith,
  skillManifest,
  tempHome,
  uploadMissing,
} from "./store-harness.js";

test("begin asks for every unique blob once, sorted by digest, each from offset 0", async (t) => {
  const { delivery } = await openStore(t, tempHome(t));
  const same = bytesOf(5, 3000);
  const { manifest } = buildManifest([
    { path: "a/one.md", content: same },
    { path: "a/two.md", content: same },
    { path: "b/three.md", content: bytesOf(6, 100) },
  ]);
  const begun = await delivery.begin(manifest);
  assert.equal(begun.committed, false);
  assert.equal(begun.manifest_digest, manifest.manifest_digest);
  assert.match(begun.stage_id, /^[0-9a-f]{32}$/);
  assert.equal(begun.missing.length, 2);
  assert.ok(begun.missing[0]!.digest < begun.missing[1]!.digest);
  assert.deepEqual(begun.missing.map((m) => m.offset), [0, 0]);
  assert.deepEqual(begun.missing.map((m) => m.byte_len).sort((a, b) => a - b), [100, 3000]);
  // The manifest may also arrive as JSON text; invalid text has its own code.
  assert.equal((await delivery.begin(JSON.stringify(manifest))).stage_id, begun.stage_id);
  await rejectsWith(delivery.begin("{not json"), "manifest-json-invalid");
});

/**
 * A stage of a big blob and a small one, begun in a store that acknowledged `acknowledged` bytes of
 * the big one (in chunks of `chunk`) and was then closed, as before a restart.
 */
async function stageBeforeRestart(t: TestContext, seed: number, size: number, acknowledged: number, chunk: number) {
  const home = tempHome(t);
  const data = bytesOf(seed, size);
  const { manifest, blobs } = buildManifest([
    { path: "data/big.bin", content: data },
    { path: "data/small.md", content: "small\n" },
  ]);
  const first = await openStore(t, home);
  const begun = await first.delivery.begin(manifest);
  const big = begun.missing.find((m) => m.byte_len === data.byteLength)!;
  for (let offset = 0; offset < acknowledged; offset += chunk) {
    await first.delivery.putChunk(begun.stage_id, big.digest, offset, data.subarray(offset, offset + chunk));
  }
  await first.delivery.close();
  return { home, data, manifest, blobs, first, begun, big };
}

test("stages survive a restart and resume from the last durable offset", async (t) => {
  const { home, data, manifest, blobs, begun, big } = await stageBeforeRestart(t, 7, 300_000, 120_000, 40_000);

  const second = await openStore(t, home);
  const resumed = await second.delivery.begin(manifest);
  assert.equal(resumed.stage_id, begun.stage_id);
  assert.deepEqual(resumed.missing.find((m) => m.digest === big.digest), { digest: big.digest, byte_len: data.byteLength, offset: 120_000 });
  assert.deepEqual((await second.delivery.status(begun.stage_id)).missing, resumed.missing);
  const sent = await uploadMissing(second.delivery, resumed, blobs, 50_000);
  assert.equal(sent, data.byteLength - 120_000 + "small\n".length, "only the missing bytes travel");
  const receipt = await second.delivery.commit(begun.stage_id);
  assert.equal(receipt.manifest_digest, manifest.manifest_digest);
});

test("a crash mid-chunk keeps the bytes it wrote: the blob resumes at the partial's length", async (t) => {
  const { home, manifest, blobs, stageId, digest, data, partial } = await partlyUploaded(t, 8, 100_000, 30_000);
  // The first 5000 bytes of a chunk the crashed node was writing when it died, never acknowledged.
  fs.appendFileSync(partial, data.subarray(30_000, 35_000));

  const second = await openStore(t, home);
  assert.equal(second.repairs.droppedPartials, 0);
  const resumed = await second.delivery.begin(manifest);
  assert.equal(resumed.missing[0]!.offset, 35_000);
  // The client may still send the chunk it never saw acknowledged: the overlap is refused with the offset to go on from.
  const overlap = await rejectsWith(second.delivery.putChunk(stageId, digest, 30_000, data.subarray(30_000, 40_000)), "chunk-out-of-order");
  assert.equal(overlap.details.expected_offset, 35_000);
  // The running hash is rebuilt from the partial: the final digest check passes.
  assert.equal(await uploadMissing(second.delivery, resumed, blobs, 40_000), 65_000, "only the bytes the partial lacks travel");
  await second.delivery.commit(stageId);
  assert.deepEqual(new Uint8Array(await second.delivery.reads.openBlob({ digest, byte_len: data.byteLength })), data);
});

test("bytes in a partial that are not the blob's are caught when it completes: 422, the blob restarts at 0", async (t) => {
  const { home, manifest, blobs, stageId, digest, data, partial } = await partlyUploaded(t, 8, 100_000, 30_000);
  // A machine crash can leave a tail that was never written (zeros) in a partial.
  fs.appendFileSync(partial, new Uint8Array(5000));

  const second = await openStore(t, home);
  const resumed = await second.delivery.begin(manifest);
  assert.equal(resumed.missing[0]!.offset, 35_000, "what the partial holds is all the node can report");
  const mismatch = await rejectsWith(second.delivery.putChunk(stageId, digest, 35_000, data.subarray(35_000)), "blob-digest-mismatch");
  assert.equal(mismatch.status, 422);
  assert.equal(mismatch.details.expected_offset, 0);
  assert.equal(fs.existsSync(second.layout.blobPath(digest)), false, "nothing was published");
  await uploadMissing(second.delivery, await second.delivery.begin(manifest), blobs);
  await second.delivery.commit(stageId);
  assert.deepEqual(new Uint8Array(await second.delivery.reads.openBlob({ digest, byte_len: data.byteLength })), data);
});

test("a partial longer than its blob is dropped on reopen: the blob restarts at 0", async (t) => {
  const { home, manifest, blobs, stageId, partial } = await partlyUploaded(t, 8, 10_000, 3_000);
  fs.appendFileSync(partial, new Uint8Array(7001).fill(0xee));
  const second = await openStore(t, home);
  assert.equal(second.repairs.droppedPartials, 1);
  assert.equal(fs.existsSync(partial), false);
  const resumed = await second.delivery.begin(manifest);
  assert.equal(resumed.missing[0]!.offset, 0);
  await uploadMissing(second.delivery, resumed, blobs);
  await second.delivery.commit(stageId);
});

test("a partial that lost its tail (a machine crash before it was synced) resumes from what it still holds", async (t) => {
  const { home, manifest, blobs, stageId, partial } = await partlyUploaded(t, 9, 50_000, 30_000);
  fs.truncateSync(partial, 1000);
  const second = await openStore(t, home);
  const resumed = await second.delivery.begin(manifest);
  assert.equal(resumed.missing[0]!.offset, 1000);
  assert.equal(await uploadMissing(second.delivery, resumed, blobs), 49_000);
  await second.delivery.commit(stageId);
});

test("a partial cut shorter while the node runs lost acknowledged bytes: the blob restarts at 0", async (t) => {
  const opened = await openStore(t, tempHome(t));
  const data = bytesOf(9, 50_000);
  const { manifest, blobs } = buildManifest([{ path: "data/big.bin", content: data }]);
  const begun = await opened.delivery.begin(manifest);
  const digest = begun.missing[0]!.digest;
  await opened.delivery.putChunk(begun.stage_id, digest, 0, data.subarray(0, 30_000));
  fs.truncateSync(opened.layout.partialPath(begun.stage_id, digest), 1000);
  const lost = await rejectsWith(opened.delivery.putChunk(begun.stage_id, digest, 30_000, data.subarray(30_000)), "stage-partial-lost");
  assert.equal(lost.details.expected_offset, 0);
  assert.equal((await opened.delivery.status(begun.stage_id)).missing[0]!.offset, 0);
  await uploadMissing(opened.delivery, await opened.delivery.begin(manifest), blobs);
  await opened.delivery.commit(begun.stage_id);
});

test("stages expire after inactivity, not after creation", async (t) => {
  let now = 1_000_000;
  const expiry = 15 * 60 * 1000;
  const opened = await openStore(t, tempHome(t), { clock: () => now });
  const { delivery } = opened;
  const data = bytesOf(10, 10_000);
  const { manifest, blobs } = buildManifest([{ path: "data/a.bin", content: data }]);
  const begun = await delivery.begin(manifest);
  const digest = begun.missing[0]!.digest;
  // Activity every 10 minutes keeps the stage alive well past 15 minutes of age.
  for (let i = 0; i < 4; i++) {
    now += 10 * 60 * 1000;
    await delivery.putChunk(begun.stage_id, digest, i * 1000, data.subarray(i * 1000, (i + 1) * 1000));
  }
  now += 10 * 60 * 1000;
  await delivery.status(begun.stage_id);
  now += expiry - 1;
  assert.equal((await delivery.status(begun.stage_id)).missing[0]!.offset, 4000, "status is activity too");
  now += expiry;
  const expired = await rejectsWith(delivery.putChunk(begun.stage_id, digest, 4000, data.subarray(4000, 5000)), "stage-expired");
  assert.equal(expired.status, 404);
  assert.equal(await delivery.expire(), 1);
  await rejectsWith(delivery.status(begun.stage_id), "stage-not-found");
  assert.deepEqual(dataFilesOf(opened), [], "the expired stage's partial is removed");

  const fresh = await delivery.begin(manifest);
  assert.notEqual(fresh.stage_id, begun.stage_id);
  assert.equal(fresh.missing[0]!.offset, 0);
  await uploadMissing(delivery, fresh, blobs);
  await delivery.commit(fresh.stage_id);
});

test("expiry also applies across a restart (inactivity is measured on the clock)", async (t) => {
  const home = tempHome(t);
  let now = 5_000_000;
  const { manifest } = skillManifest();
  const first = await openStore(t, home, { clock: () => now });
  const begun = await first.delivery.begin(manifest);
  await first.delivery.close();
  now += 16 * 60 * 1000;
  const second = await openStore(t, home, { clock: () => now });
  assert.equal(second.delivery.recovery?.expiredStages, 1);
  await rejectsWith(second.delivery.status(begun.stage_id), "stage-not-found");
});

test("abort removes the stage and its partials; unknown stages are not found; a committed stage aborts as a no-op", async (t) => {
  const opened = await openStore(t, tempHome(t));
  const { delivery } = opened;
  const { manifest, blobs } = skillManifest();
  const begun = await delivery.begin(manifest);
  const { digest } = begun.missing[0]!;
  await delivery.putChunk(begun.stage_id, digest, 0, blobs.get(digest)!.subarray(0, 3));
  assert.ok(fs.existsSync(opened.layout.stageDir(begun.stage_id)));
  await delivery.abort(begun.stage_id);
  assert.equal(fs.existsSync(opened.layout.stageDir(begun.stage_id)), false);
  await rejectsWith(delivery.status(begun.stage_id), "stage-not-found");
  await rejectsWith(delivery.abort(begun.stage_id), "stage-not-found");

  const again = await delivery.begin(manifest);
  assert.notEqual(again.stage_id, begun.stage_id);
  await uploadMissing(delivery, again, blobs);
  const receipt = await delivery.commit(again.stage_id);
  await delivery.abort(again.stage_id);
  assert.deepEqual(await delivery.commit(again.stage_id), receipt);
});

test("dropping a stage on a full disk frees its partials first, so the drop itself gets the room it needs", async (t) => {
  const sqliteFull = (): Error => Object.assign(new Error("database or disk is full"), { code: "SQLITE_FULL" });
  // The row's delete fails while the partials are on disk (the log has no room), then succeeds.
  let layout: { stageDir(stageId: string): string } | undefined;
  let stageId = "";
  const faults = {
    at: (point: string): void => {
      if (point === "stage-row-delete" && fs.existsSync(layout!.stageDir(stageId))) throw sqliteFull();
    },
  };
  const opened = await openStore(t, tempHome(t), { faults });
  layout = opened.layout;
  const { delivery } = opened;
  const data = bytesOf(41, 50_000);
  const { manifest } = buildManifest([{ path: "data/big.bin", content: data }]);
  const begun = await delivery.begin(manifest);
  stageId = begun.stage_id;
  await delivery.putChunk(stageId, begun.missing[0]!.digest, 0, data.subarray(0, 20_000));
  assert.ok(fs.existsSync(layout.stageDir(stageId)));
  await delivery.abort(stageId);
  assert.equal(fs.existsSync(layout.stageDir(stageId)), false);
  await rejectsWith(delivery.status(stageId), "stage-not-found");
  // A new push of the same manifest starts over, from 0.
  const again = await delivery.begin(manifest);
  assert.notEqual(again.stage_id, stageId);
  assert.deepEqual(again.missing.map((m) => m.offset), [0]);
});

test("a stage whose row cannot be deleted even then is refused as exhausted capacity, and asks for its blob again from 0", async (t) => {
  const home = tempHome(t);
  const sqliteFull = (): Error => Object.assign(new Error("database or disk is full"), { code: "SQLITE_FULL" });
  let full = true;
  const faults = {
    at: (point: string): void => {
      if (full && point === "stage-row-delete") throw sqliteFull();
    },
  };
  const { delivery } = await openStore(t, home, { faults });
  const data = bytesOf(42, 50_000);
  const { manifest } = buildManifest([{ path: "data/big.bin", content: data }]);
  const begun = await delivery.begin(manifest);
  await delivery.putChunk(begun.stage_id, begun.missing[0]!.digest, 0, data.subarray(0, 20_000));
  const refused = await rejectsWith(delivery.abort(begun.stage_id), "capacity-exhausted");
  assert.equal(refused.status, 507);
  full = false;
  // Its partial went to make room: the stage lives on, and asks for the blob from 0.
  assert.deepEqual((await delivery.status(begun.stage_id)).missing.map((m) => m.offset), [0]);
  await delivery.abort(begun.stage_id);
  await rejectsWith(delivery.status(begun.stage_id), "stage-not-found");
});

test("a stage whose directory a power loss took (its row durable, its directory entry never synced) resumes every blob from 0 and commits", async (t) => {
  // begin fsyncs the stage's row, not stages/ (docs/durability.md "Chunks"): after a power loss the
  // row can name a stage whose directory, and so every partial in it, is gone. Removing the
  // directory between two openings of the store is that state.
  const { home, manifest, blobs, first, begun } = await stageBeforeRestart(t, 43, 200_000, 80_000, 80_000);
  fs.rmSync(first.layout.stageDir(begun.stage_id), { recursive: true });

  const second = await openStore(t, home);
  const resumed = await second.delivery.begin(manifest);
  assert.equal(resumed.stage_id, begun.stage_id, "the durable row still names the stage");
  assert.deepEqual(
    resumed.missing.map((m) => m.offset),
    resumed.missing.map(() => 0),
    "every blob is asked for again from 0",
  );
  await uploadMissing(second.delivery, resumed, blobs);
  const receipt = await second.delivery.commit(resumed.stage_id);
  assert.equal(receipt.manifest_digest, manifest.manifest_digest);
  assert.deepEqual(await second.delivery.commit(resumed.stage_id), receipt);
});
