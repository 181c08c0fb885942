/**
 * The catalog and the content-addressed store behind it: dedupe across bundles, revisions as
 * entries, retirement, garbage collection, and the materializer's verified reads (G8).
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import * as fs from "node:fs";
import { sha256Digest } from "../../src/core/digest.js";
import type { Delivery } from "../../src/delivery/service.js";
import {
  assertBundleIntact,
  buildManifest,
  bytesOf,
  openStore,
  rejectsWith,
  skillManifest,
  tempHome,
  uploadMissing,
  type BuiltManifest,
} from "./store-harness.js";

async function push(delivery: Delivery, built: BuiltManifest): Promise<{ stage_id: string; sent: number }> {
  const begun = await delivery.begin(built.manifest);
  const sent = await uploadMissing(delivery, begun, built.blobs);
  await delivery.commit(begun.stage_id);
  return { stage_id: begun.stage_id, sent };
}

test("identical blobs are stored once and never asked for again, across bundles", async (t) => {
  const opened = await openStore(t, tempHome(t));
  const { delivery } = opened;
  await push(delivery, skillManifest("review-tools-a"));
  const second = skillManifest("review-tools-b");
  const begun = await delivery.begin(second.manifest);
  assert.deepEqual(begun.missing, []);
  await delivery.commit(begun.stage_id);

  const third = skillManifest("review-tools-c", "r1", [{ path: "docs/new.md", content: "only this is new\n" }]);
  const partly = await delivery.begin(third.manifest);
  assert.deepEqual(partly.missing.map((m) => m.digest), [sha256Digest("only this is new\n")]);
  await uploadMissing(delivery, partly, third.blobs);
  await delivery.commit(partly.stage_id);
  const stored = [...fs.readdirSync(opened.layout.blobsDir)].flatMap((s) => fs.readdirSync(`${opened.layout.blobsDir}/${s}`));
  assert.equal(stored.length, 4);
  await assertBundleIntact(delivery, second.manifest, second.blobs);
});

test("list and show: bundles with their revisions and receipts; a new revision is a new entry", async (t) => {
  let now = Date.UTC(2030, 0, 1);
  const { delivery } = await openStore(t, tempHome(t), { clock: () => now });
  const r1 = skillManifest("tools", "r1");
  const r2 = skillManifest("tools", "r2", [{ path: "docs/changes.md", content: "r2\n" }]);
  const other = skillManifest("alpha", "v1");
  await push(delivery, r1);
  now += 1000;
  await push(delivery, r2);
  await push(delivery, other);
  const listed = await delivery.catalog.list();
  assert.deepEqual(listed.map((b) => b.bundle_id), ["alpha", "tools"]);
  const tools = await delivery.catalog.show("tools");
  assert.deepEqual(tools, listed[1]);
  assert.deepEqual(tools.revisions.map((r) => r.revision), ["r1", "r2"]);
  assert.equal(tools.revisions[0]!.committed_at, "2030-01-01T00:00:00.000Z");
  assert.equal(tools.revisions[1]!.receipt.manifest_digest, r2.manifest.manifest_digest);
  assert.equal(tools.revisions[1]!.retired, false);
  await rejectsWith(delivery.catalog.show("nope"), "bundle-not-found");
  assert.deepEqual(await delivery.reads.getManifest("tools", "r2"), r2.manifest);
  await rejectsWith(delivery.reads.getManifest("tools", "r9"), "revision-not-found");
});

test("retire hides a revision from new sessions and lets gc reclaim only what nothing else needs", async (t) => {
  const opened = await openStore(t, tempHome(t));
  const { delivery } = opened;
  const r1 = skillManifest("tools", "r1", [{ path: "docs/r1-only.md", content: bytesOf(30, 2000) }]);
  const r2 = skillManifest("tools", "r2", [{ path: "docs/r2-only.md", content: bytesOf(31, 2000) }]);
  await push(delivery, r1);
  await push(delivery, r2);
  // An active stage references a blob that only r1 has, too.
  const staging = buildManifest([{ path: "docs/shared.md", content: bytesOf(30, 2000) }], "staging");
  const staged = await delivery.begin(staging.manifest);
  assert.deepEqual(staged.missing, []);

  await delivery.catalog.retire("tools", "r1");
  await delivery.catalog.retire("tools", "r1");
  await rejectsWith(delivery.catalog.retire("tools", "r7"), "revision-not-found");
  const retired = await rejectsWith(delivery.reads.getManifest("tools", "r1"), "revision-retired");
  assert.equal(retired.status, 409);
  await rejectsWith(delivery.begin(r1.manifest), "revision-retired");
  const view = await delivery.catalog.show("tools");
  assert.equal(view.revisions[0]!.retired, true);
  assert.ok(view.revisions[0]!.retired_at !== undefined);

  assert.equal(await delivery.gc(), 0, "shared blobs stay: r2 and the stage need them");
  await delivery.abort(staged.stage_id);
  assert.equal(await delivery.gc(), 1);
  const r1Only = sha256Digest(bytesOf(30, 2000));
  assert.equal(fs.existsSync(opened.layout.blobPath(r1Only)), false);
  await assertBundleIntact(delivery, r2.manifest, r2.blobs);
});

test("openBlob returns verified bytes; tampered or missing bytes are never returned", async (t) => {
  const opened = await openStore(t, tempHome(t));
  const { delivery } = opened;
  const built = skillManifest();
  await push(delivery, built);
  const component = built.manifest.components[2]!;
  assert.deepEqual(new Uint8Array(await delivery.reads.openBlob(component.blob)), built.blobs.get(component.blob.digest));

  const blobPath = opened.layout.blobPath(component.blob.digest);
  const original = fs.readFileSync(blobPath);
  const flipped = Buffer.from(original);
  flipped[5]! ^= 1;
  fs.writeFileSync(blobPath, flipped);
  const tampered = await rejectsWith(delivery.reads.openBlob(component.blob), "blob-tampered");
  assert.equal(tampered.status, 422);
  const streamed: Uint8Array[] = [];
  await rejectsWith(
    (async () => {
      for await (const piece of delivery.reads.openBlobStream(component.blob)) streamed.push(piece);
    })(),
    "blob-tampered",
  );
  fs.writeFileSync(blobPath, Buffer.concat([original, Buffer.from("x")]));
  await rejectsWith(delivery.reads.openBlob(component.blob), "blob-tampered");
  fs.rmSync(blobPath);
  await rejectsWith(delivery.reads.openBlob(component.blob), "blob-not-found");
  fs.writeFileSync(blobPath, original, { mode: 0o644 });
  fs.chmodSync(blobPath, 0o644);
  await rejectsWith(delivery.reads.openBlob(component.blob), "unsafe-storage-mode");
});
