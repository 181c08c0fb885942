/**
 * Delivery guarantees (G7, G9, G10) pinned by a mutation audit: each test here fails when one
 * specific check that enforces a guarantee is removed, a check that no other test exercised
 * (see also recovery.test.ts, test/storage/publish-durability.test.ts).
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as path from "node:path";
import { UnsafeStorageError } from "../../src/core/errors.js";
import { EmbeddedBlobStore } from "../../src/backends/embedded/delivery/delivery-blob-store.js";
import { openDeliveryDatabase } from "../../src/backends/embedded/delivery/delivery-db.js";
import { DeliveryLayout } from "../../src/backends/embedded/delivery/delivery-layout.js";
import { EmbeddedStageStore } from "../../src/backends/embedded/delivery/delivery-stage-store.js";
import { newStageId } from "../../src/delivery/stage.js";
import { ensurePrivateDirSync } from "../../src/storage/secure-fs.js";
import { buildManifest, bytesOf, failOnceAt, openStore, rejectsWith, skillManifest, tempHome, uploadMissing } from "./store-harness.js";

test("G9: concurrent commits of one stage both answer the same receipt", async (t) => {
  const { delivery } = await openStore(t, tempHome(t, "guarantees"));
  const { manifest, blobs } = skillManifest();
  const begun = await delivery.begin(manifest);
  await uploadMissing(delivery, begun, blobs);
  // A client that timed out and retried while its first commit was still running.
  const [first, second] = await Promise.all([delivery.commit(begun.stage_id), delivery.commit(begun.stage_id)]);
  assert.deepEqual(second, first);
  assert.deepEqual(await delivery.commit(begun.stage_id), first);
  assert.equal((await delivery.catalog.list()).length, 1);
});

test("G7: promote makes a partial durable before linking it: a failed fdatasync publishes nothing", async (t) => {
  // The store on its own, as recovery and any caller other than the commit (which syncs first) use it.
  const home = tempHome(t, "guarantees");
  const layout = new DeliveryLayout(home);
  ensurePrivateDirSync(home, { create: true, recursive: true });
  for (const dir of [layout.root, layout.blobsDir, layout.stagesDir]) ensurePrivateDirSync(dir, { create: true });
  const db = openDeliveryDatabase(layout.dbPath);
  t.after(() => db.close());
  const fault = failOnceAt("partial-sync");
  const blobs = new EmbeddedBlobStore(layout, fault.faults);
  const stages = new EmbeddedStageStore(db, layout, blobs, fault.faults);
  const data = bytesOf(91, 5000);
  const { manifest } = buildManifest([{ path: "data/a.bin", content: data }]);
  const ref = manifest.components[0]!.blob;
  const stageId = newStageId();
  await stages.create({ stage_id: stageId, manifest, created_at: 1, last_active_at: 1, reserved_bytes: data.byteLength, blobs: [{ ...ref, received: 0, complete: false }] });
  const partial = await stages.openPartial(stageId, ref.digest, 0);
  await partial.append(data);
  await partial.flush();
  await partial.close();
  await stages.recordReceived(stageId, ref.digest, data.byteLength, 1);

  fault.arm();
  await assert.rejects(stages.promote(stageId, ref, 2), /injected failure at partial-sync/);
  assert.ok(fault.fired(), "promote synced the partial itself");
  assert.equal(fs.existsSync(layout.blobPath(ref.digest)), false, "bytes not known durable are not published");
  assert.equal((await stages.get(stageId))!.blobs[0]!.received, 0, "the blob is asked for again");
});

test("G10: removing a stage whose directory holds a foreign file refuses and leaves the file", async (t) => {
  const opened = await openStore(t, tempHome(t, "guarantees"));
  const { delivery, layout } = opened;
  const { manifest, blobs } = skillManifest();
  const begun = await delivery.begin(manifest);
  const { digest } = begun.missing[0]!;
  await delivery.putChunk(begun.stage_id, digest, 0, blobs.get(digest)!.subarray(0, 3));
  const foreign = path.join(layout.stageDir(begun.stage_id), "notes.txt");
  fs.writeFileSync(foreign, "not the store's", { mode: 0o600 });
  const error = await rejectsWith(delivery.abort(begun.stage_id), "unsafe-storage-name");
  assert.equal((error as unknown as UnsafeStorageError).path, foreign);
  assert.equal(fs.readFileSync(foreign, "utf8"), "not the store's");
  assert.ok(fs.existsSync(layout.partialPath(begun.stage_id, digest)), "nothing in the directory was deleted");
  // Nor anything else: the stage still answers, with what it had received.
  const status = await delivery.status(begun.stage_id);
  assert.equal(status.missing.find((m) => m.digest === digest)?.offset, 3);
});
