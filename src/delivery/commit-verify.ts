/**
 * What a commit checks before its record is written (G7, G8): every component re-read from the
 * blob store and verified, the bundle digest recomputed over them in path order, and the bundle
 * contract's content rules on the same bytes — one read of each component for all three.
 */
import { digestEquals, type Digest } from "../core/digest.js";
import { ConflictError, IntegrityError, isWardenError } from "../core/errors.js";
import type { Limits } from "../core/limits.js";
import { readVerifiedBlob } from "./blob-store.js";
import { checkContractContent } from "./contract.js";
import { BundleDigestBuilder, type BlobRef } from "./manifest-types.js";
import type { DeliveryStores } from "./recovery.js";
import type { StageRecord } from "./stage.js";

/** Components read ahead (bounds the memory held to this many files). */
const READ_AHEAD = 4;

export async function verifyForCommit(stores: DeliveryStores, stage: StageRecord, limits: Limits): Promise<void> {
  const manifest = stage.manifest;
  const components = manifest.components;
  const read = (ref: BlobRef): Promise<Uint8Array> => readForCommit(stores, stage, ref, limits);
  const builder = new BundleDigestBuilder();
  // Reads (and their digests) run ahead on the I/O threads while this thread feeds the bundle digest.
  const ahead = new Map<number, Promise<Uint8Array>>();
  const readAhead = (index: number): Promise<Uint8Array> => {
    let pending = ahead.get(index);
    if (pending === undefined) {
      pending = read(components[index]!.blob);
      pending.catch(() => undefined); // awaited when its turn comes; never an unhandled rejection
      ahead.set(index, pending);
    }
    return pending;
  };
  let fed = 0;
  await checkContractContent(manifest, async (component) => {
    // The contract reads components once each in manifest order; if it ever did not, the
    // digest is recomputed below in a pass of its own rather than from a wrong order.
    if (fed < 0 || component !== components[fed]) {
      fed = -1;
      return read(component.blob);
    }
    for (let next = fed + 1; next < Math.min(fed + 1 + READ_AHEAD, components.length); next++) readAhead(next);
    const bytes = await readAhead(fed);
    ahead.delete(fed);
    builder.file(component.relative_path, component.blob.byte_len).update(bytes);
    fed++;
    return bytes;
  });
  const actual = fed === components.length ? builder.digest() : await bundleDigestOf(stage, read);
  if (!digestEquals(actual, manifest.bundle_digest)) {
    throw new IntegrityError("bundle-digest-mismatch", `the blobs hash to bundle digest ${actual}, the manifest says ${manifest.bundle_digest}`, {
      details: { expected: manifest.bundle_digest, actual },
    });
  }
}

async function bundleDigestOf(stage: StageRecord, read: (ref: BlobRef) => Promise<Uint8Array>): Promise<Digest> {
  const builder = new BundleDigestBuilder();
  for (const component of stage.manifest.components) {
    builder.file(component.relative_path, component.blob.byte_len).update(await read(component.blob));
  }
  return builder.digest();
}

/**
 * A blob's verified bytes for commit. A blob that is missing or fails verification is asked for
 * again (bytes that do not match their address are garbage and are dropped), so the client can
 * repair the stage instead of failing every commit.
 */
async function readForCommit(stores: DeliveryStores, stage: StageRecord, ref: BlobRef, limits: Limits): Promise<Uint8Array> {
  try {
    return await readVerifiedBlob(stores.blobs, ref, limits.fileBytes);
  } catch (error) {
    if (!isWardenError(error) || (error.code !== "blob-tampered" && error.code !== "blob-not-found")) throw error;
    if (error.code === "blob-tampered") await stores.blobs.delete(ref.digest);
    await stores.stages.requireBlob(stage.stage_id, ref);
    if (error.code === "blob-tampered") throw error;
    throw new ConflictError("stage-incomplete", `blob ${ref.digest} is no longer stored; upload it again`, {
      details: { stage_id: stage.stage_id, digest: ref.digest },
    });
  }
}
