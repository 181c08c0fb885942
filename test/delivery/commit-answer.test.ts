/**
 * What a commit's answer waits for: the durable commit record, not the removal of the stage's
 * files, which follows the answer (and which `close` waits for).
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import * as fs from "node:fs";
import { ensurePrivateDirSync } from "../../src/storage/secure-fs.js";
import { DeliveryLayout } from "../../src/backends/embedded/delivery/delivery-layout.js";
import { openDeliveryDatabase } from "../../src/backends/embedded/delivery/delivery-db.js";
import { EmbeddedBlobStore } from "../../src/backends/embedded/delivery/delivery-blob-store.js";
import { EmbeddedStageStore } from "../../src/backends/embedded/delivery/delivery-stage-store.js";
import { EmbeddedCatalogStore } from "../../src/backends/embedded/delivery/delivery-catalog-store.js";
import { Delivery, type DeliveryBackend } from "../../src/delivery/service.js";
import type { StageStore } from "../../src/delivery/stage.js";
import { buildManifest, bytesOf, tempHome, uploadMissing } from "./store-harness.js";

/** How long a commit may take to answer on a loaded machine before the test calls it stuck. */
const ANSWER_WITHIN_MS = 20_000;

function gate(): { readonly wait: Promise<void>; readonly open: () => void } {
  let open!: () => void;
  const wait = new Promise<void>((resolve) => (open = resolve));
  return { wait, open };
}

/** `stages`, whose `remove` first tells `reached` and then waits for `release`. */
function holdingRemove(stages: StageStore, reached: () => void, release: Promise<void>): StageStore {
  return new Proxy(stages, {
    get(target, prop) {
      if (prop === "remove") {
        return async (stageId: string): Promise<void> => {
          reached();
          await release;
          await target.remove(stageId);
        };
      }
      const value: unknown = Reflect.get(target, prop, target);
      return typeof value === "function" ? (value as (...args: unknown[]) => unknown).bind(target) : value;
    },
  });
}

test("a commit answers once its record is durable, while its stage's files are still being removed; close waits for the removal", async (t) => {
  const home = tempHome(t);
  const layout = new DeliveryLayout(home);
  for (const dir of [layout.root, layout.blobsDir, layout.stagesDir]) ensurePrivateDirSync(dir, { create: true, recursive: true });
  const db = openDeliveryDatabase(layout.dbPath);
  const blobs = new EmbeddedBlobStore(layout);
  blobs.createShards();
  const stages = new EmbeddedStageStore(db, layout, blobs);
  const catalog = new EmbeddedCatalogStore(db, undefined, (stageId) => stages.closed(stageId));
  const removing = gate();
  const release = gate();
  let closed = false;
  const backend: DeliveryBackend = {
    blobs,
    stages: holdingRemove(stages, removing.open, release.wait),
    catalog,
    close: async () => {
      if (closed) return;
      closed = true;
      db.close();
    },
  };
  const delivery = await Delivery.open(backend);
  t.after(async () => {
    release.open();
    await delivery.close();
  });

  const { manifest, blobs: bytes } = buildManifest([
    { path: "data/a.bin", content: bytesOf(1, 40_000) },
    { path: "data/b.bin", content: bytesOf(2, 3_000) },
  ]);
  const begun = await delivery.begin(manifest);
  assert.equal(begun.committed, false);
  await uploadMissing(delivery, begun, bytes, 16 * 1024);

  let timer: NodeJS.Timeout | undefined;
  const stuck = new Promise<"stuck">((resolve) => (timer = setTimeout(() => resolve("stuck"), ANSWER_WITHIN_MS)));
  const answered = await Promise.race([delivery.commit(begun.stage_id), stuck]);
  clearTimeout(timer);
  if (answered === "stuck") assert.fail(`the commit did not answer within ${ANSWER_WITHIN_MS} ms while its stage's removal was held`);
  assert.equal(answered.manifest_digest, manifest.manifest_digest);
  await removing.wait;
  assert.ok(fs.existsSync(layout.stageDir(begun.stage_id)), "the stage's directory is removed after the answer, not before");

  // Meanwhile the commit is what every reader sees.
  assert.deepEqual(await delivery.commit(begun.stage_id), answered);
  const again = await delivery.begin(manifest);
  assert.equal(again.committed, true);
  assert.equal((await delivery.catalog.manifest(manifest.bundle_id, manifest.revision)).manifest_digest, manifest.manifest_digest);

  // close lets the removal finish before the stores close under it.
  release.open();
  await delivery.close();
  assert.equal(fs.existsSync(layout.stageDir(begun.stage_id)), false, "close waited for the stage's removal");
});
