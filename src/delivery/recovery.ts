/**
 * Backend-independent recovery: what a node does with its delivery state after a restart (and
 * what `gc` does at any time). The backend has already made its storage consistent (temp files
 * removed, partials cut back to their durable offsets); this settles what a crash interrupted
 * between two durable steps, drops expired stages and collects blobs nothing references.
 */
import { digestEquals, type Digest } from "../core/digest.js";
import { IntegrityError, isWardenError } from "../core/errors.js";
import type { Limits } from "../core/limits.js";
import type { BlobStore } from "./blob-store.js";
import type { CatalogStore } from "./catalog.js";
import { hashPartial, isExpired, type StageBlob, type StageStore } from "./stage.js";

export interface DeliveryStores {
  readonly blobs: BlobStore;
  readonly stages: StageStore;
  readonly catalog: CatalogStore;
}

export interface RecoveryReport {
  readonly expiredStages: number;
  /** Blobs whose upload had finished but whose publication a crash interrupted. */
  readonly settledBlobs: number;
  readonly collectedBlobs: number;
}

/**
 * A blob received in full (received = byte_len) by an earlier process but not published, or
 * whose publication a crash interrupted: publish the partial if it still verifies, else adopt an
 * identical stored blob, else ask for the blob again. Verification here matters because the
 * running hash did not survive the restart.
 */
async function settleReceivedBlob(stores: DeliveryStores, stageId: string, blob: StageBlob, now: number): Promise<void> {
  const { stages, blobs } = stores;
  const ref = { digest: blob.digest, byte_len: blob.byte_len };
  if ((await stages.partialLength(stageId, blob.digest)) === blob.byte_len) {
    const hash = await hashPartial(stages, stageId, blob.digest, blob.byte_len);
    if (digestEquals(hash.digest(), blob.digest)) {
      await stages.promote(stageId, ref, now);
      return;
    }
  } else if (await isStoredIntact(blobs, ref)) {
    await stages.markStored(stageId, ref);
    return;
  }
  await stages.requireBlob(stageId, ref);
}

/**
 * True when the store holds this blob with the right bytes. A stored blob that fails verification
 * is deleted: bytes that do not match their address are garbage, and removing them lets the
 * blob be uploaded again instead of failing every commit that needs it.
 */
export async function isStoredIntact(blobs: BlobStore, ref: { digest: Digest; byte_len: number }): Promise<boolean> {
  if (!(await blobs.has(ref.digest))) return false;
  try {
    for await (const _ of blobs.stream(ref)) {
      // reading through the verifying stream is the check
    }
    return true;
  } catch (error) {
    if (isWardenError(error) && error.code === "blob-tampered") {
      await blobs.delete(ref.digest);
      return false;
    }
    throw error;
  }
}

/**
 * Deletes every stored blob that no live revision and no active stage references. Stages are read
 * before the catalog: a commit (which does not wait for this store-wide step) records its catalog
 * entry before it removes its stage, so a stage missing from the first read is in the second. In
 * the other order a commit landing between the reads was in neither, and the check below then
 * refused the whole collection as a corrupt catalog.
 */
export async function collectUnreferencedBlobs(stores: DeliveryStores): Promise<number> {
  const stages = await stores.stages.list();
  const referenced = new Set<Digest>(await stores.catalog.liveBlobDigests());
  for (const stage of stages) {
    for (const component of stage.manifest.components) referenced.add(component.blob.digest);
  }
  const unreferenced: Digest[] = [];
  for await (const digest of stores.blobs.list()) if (!referenced.has(digest)) unreferenced.push(digest);
  if (unreferenced.length > 0) await refuseIfLiveNeedsAny(stores.catalog, new Set(unreferenced));
  for (const digest of unreferenced) await stores.blobs.delete(digest);
  return unreferenced.length;
}

/**
 * The catalog's index of the blobs live revisions use is checked against their own (verified)
 * receipts before anything is deleted: an index row lost to an edit or a bad disk would otherwise
 * delete a blob a committed bundle needs. It reads every live receipt, so it runs only when
 * something is about to be deleted.
 */
async function refuseIfLiveNeedsAny(catalog: CatalogStore, candidates: ReadonlySet<Digest>): Promise<void> {
  for (const entry of await catalog.list()) {
    if (entry.retired_at !== null) continue;
    const needed = entry.receipt.blobs.find((b) => candidates.has(b.digest));
    if (needed === undefined) continue;
    const where = `${entry.bundle_id}/${entry.revision}`;
    throw new IntegrityError("delivery-record-corrupt", `the catalog's blob index lacks ${needed.digest} of ${where}; no blob was collected`, {
      status: 500,
      details: { bundle_id: entry.bundle_id, revision: entry.revision, digest: needed.digest },
    });
  }
}

export async function recoverDelivery(stores: DeliveryStores, now: number, limits: Limits): Promise<RecoveryReport> {
  let expiredStages = 0;
  let settledBlobs = 0;
  for (const stage of await stores.stages.list()) {
    if (isExpired(stage, now, limits.stageExpiryMs)) {
      await stores.stages.remove(stage.stage_id);
      expiredStages++;
      continue;
    }
    for (const blob of stage.blobs) {
      if (blob.complete || blob.received !== blob.byte_len) continue;
      await settleReceivedBlob(stores, stage.stage_id, blob, now);
      settledBlobs++;
    }
  }
  const collectedBlobs = await collectUnreferencedBlobs(stores);
  return { expiredStages, settledBlobs, collectedBlobs };
}
