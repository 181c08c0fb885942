/**
 * gc runs while commits go on (POST .../retirement collects at once): a commit that lands between
 * gc's reads of the stages and of the catalog must neither lose a blob nor read as a corrupt catalog.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { EmbeddedCatalogStore } from "../../src/backends/embedded/delivery/delivery-catalog-store.js";
import { EmbeddedStageStore } from "../../src/backends/embedded/delivery/delivery-stage-store.js";
import { bytesOf, openStore, skillManifest, tempHome, uploadMissing } from "./store-harness.js";

test("a commit between gc's two reads keeps its blobs and gc succeeds", async (t) => {
  const { delivery } = await openStore(t, tempHome(t));
  const shared = bytesOf(7, 4000);
  const old = skillManifest("old", "r1", [{ path: "docs/shared.md", content: shared }]);
  const first = await delivery.begin(old.manifest);
  await uploadMissing(delivery, first, old.blobs);
  await delivery.commit(first.stage_id);
  await delivery.catalog.retire("old", "r1");
  const next = skillManifest("next", "r1", [{ path: "docs/shared.md", content: shared }]);
  const staged = await delivery.begin(next.manifest);
  await uploadMissing(delivery, staged, next.blobs);

  // The commit runs right after gc's first read, whichever store that is.
  let pending: (() => Promise<unknown>) | undefined = () => delivery.commit(staged.stage_id);
  const afterFirstRead = async (): Promise<void> => {
    const step = pending;
    pending = undefined;
    if (step !== undefined) await step();
  };
  const liveBlobDigests = EmbeddedCatalogStore.prototype.liveBlobDigests;
  const list = EmbeddedStageStore.prototype.list;
  t.after(() => {
    EmbeddedCatalogStore.prototype.liveBlobDigests = liveBlobDigests;
    EmbeddedStageStore.prototype.list = list;
  });
  EmbeddedCatalogStore.prototype.liveBlobDigests = async function (this: EmbeddedCatalogStore) {
    const read = await liveBlobDigests.call(this);
    await afterFirstRead();
    return read;
  };
  EmbeddedStageStore.prototype.list = async function (this: EmbeddedStageStore) {
    const read = await list.call(this);
    await afterFirstRead();
    return read;
  };

  assert.equal(await delivery.gc(), 0, "the shared blob is the new revision's");
  assert.equal(pending, undefined, "the commit ran inside gc");
  for (const component of next.manifest.components) await delivery.reads.openBlob(component.blob);
});
