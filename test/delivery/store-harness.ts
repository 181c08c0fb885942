/**
 * Shared set-up of the delivery store tests: temporary homes, the reference's sample bundle, an
 * uploader that counts the bytes it sends, and small assertions on error codes and trees.
 */
import * as fs from "node:fs";
import * as path from "node:path";
import assert from "node:assert/strict";
import type { TestContext } from "node:test";
import type { Digest } from "../../src/core/digest.js";
import { isWardenError } from "../../src/core/errors.js";
import { executableFormatOf } from "../../src/delivery/contract/executable.js";
import { openEmbeddedDelivery, type EmbeddedDelivery, type EmbeddedDeliveryOptions } from "../../src/backends/embedded/delivery/delivery-backend.js";
import type { DeliveryFaultPoint, DeliveryFaults } from "../../src/backends/embedded/delivery/delivery-faults.js";
import type { Delivery } from "../../src/delivery/service.js";
import type { MissingBlob } from "../../src/delivery/stage.js";
import type { Manifest } from "../../src/delivery/manifest-types.js";
import { buildManifest, type BuiltManifest, type FileSpec } from "./manifest-fixtures.js";
import { tempDir } from "../support/temp.js";

export { buildManifest, type BuiltManifest, type FileSpec };

/** A private temporary warden home, removed after the test. */
export function tempHome(t: TestContext, label = "store"): string {
  return tempDir(`delivery-${label}`, (remove) => t.after(remove));
}

/** Opens the embedded delivery store and closes it after the test (closing twice is harmless). */
export async function openStore(t: TestContext, home: string, options: EmbeddedDeliveryOptions = {}): Promise<EmbeddedDelivery> {
  const opened = await openEmbeddedDelivery(home, options);
  t.after(() => opened.delivery.close());
  return opened;
}

export const PLUGIN_JSON = '{"name":"review-tools","description":"review tools","version":"1.0.0"}';
export const ROOT_PLUGIN_JSON = '{"$schema":"https://agent-plugins.org/schemas/1.0.0/plugin.schema.json","name":"review-tools"}';
export const SKILL_MD = "---\nname: review\ndescription: review changes\n---\nReview.\n";

/** The reference's `skill_manifest`: both plugin manifests and one skill. */
export function skillManifest(bundleId = "review-tools", revision = "r1", extra: readonly FileSpec[] = []): BuiltManifest {
  return buildManifest(
    [
      { path: ".claude-plugin/plugin.json", content: PLUGIN_JSON },
      { path: "plugin.json", content: ROOT_PLUGIN_JSON },
      { path: "skills/review/SKILL.md", content: SKILL_MD },
      ...extra,
    ],
    bundleId,
    revision,
  );
}

/** Deterministic pseudo-random bytes (no two files of a test alike unless asked). */
export function bytesOf(seed: number, length: number): Uint8Array {
  const out = new Uint8Array(length);
  let x = (seed * 2654435761) >>> 0 || 1;
  for (let i = 0; i < length; i++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    out[i] = x & 0xff;
  }
  // Content the contract refuses at commit (`#!`, `MZ`, ELF, Mach-O) would fail a test that means
  // arbitrary data: a seed drawn at random (uniqueBundle's) made a few files in 100,000 start
  // with `MZ`. Such a start has its first byte's top bit flipped, which starts no magic.
  if (executableFormatOf(out) !== undefined) out[0] = out[0]! ^ 0x80;
  return out;
}

/**
 * Uploads every missing blob from its current offset in chunks of `chunkBytes`; returns the
 * number of blob bytes sent, so tests can prove only missing bytes travelled.
 */
export async function uploadMissing(
  delivery: Pick<Delivery, "putChunk">,
  begun: { readonly stage_id: string; readonly missing: readonly MissingBlob[] },
  blobs: ReadonlyMap<Digest, Uint8Array>,
  chunkBytes = 64 * 1024,
): Promise<number> {
  let sent = 0;
  for (const missing of begun.missing) {
    const bytes = blobs.get(missing.digest);
    assert.ok(bytes !== undefined, `test has no bytes for ${missing.digest}`);
    let offset = missing.offset;
    do {
      const chunk = bytes.subarray(offset, Math.min(offset + chunkBytes, bytes.byteLength));
      const accepted = await delivery.putChunk(begun.stage_id, missing.digest, offset, chunk);
      sent += chunk.byteLength;
      assert.equal(accepted.next_offset, offset + chunk.byteLength);
      offset = accepted.next_offset;
    } while (offset < bytes.byteLength);
  }
  return sent;
}

/** Awaits a rejection with exactly this WardenError code; returns the error for more checks. */
export async function rejectsWith(promise: Promise<unknown>, code: string): Promise<Error & { code: string; status: number; details: Record<string, unknown> }> {
  try {
    await promise;
  } catch (error) {
    assert.ok(isWardenError(error), `expected a WardenError ${code}, got ${String(error)}`);
    assert.equal(error.code, code, `expected code ${code}, got ${error.code}: ${error.message}`);
    return error as Error & { code: string; status: number; details: Record<string, unknown> };
  }
  assert.fail(`expected rejection with ${code}, but it resolved`);
}

/** Every entry under `root`, relative, sorted (directories with a trailing slash). */
export function treeOf(root: string): string[] {
  const out: string[] = [];
  const walk = (dir: string, rel: string): void => {
    for (const name of fs.readdirSync(dir).sort()) {
      const p = path.join(dir, name);
      const r = rel === "" ? name : `${rel}/${name}`;
      const st = fs.lstatSync(p);
      if (st.isDirectory()) {
        out.push(`${r}/`);
        walk(p, r);
      } else out.push(r);
    }
  };
  walk(root, "");
  return out;
}

/** Files under the store's blobs/ and stages/ (the parts delivery writes). */
export function dataFilesOf(opened: EmbeddedDelivery): string[] {
  return treeOf(opened.layout.root).filter((p) => (p.startsWith("blobs/") || p.startsWith("stages/")) && !p.endsWith("/"));
}

/** Verifies a committed bundle end to end through the materializer's entry points. */
export async function assertBundleIntact(delivery: Delivery, manifest: Manifest, blobs: ReadonlyMap<Digest, Uint8Array>): Promise<void> {
  const stored = await delivery.reads.getManifest(manifest.bundle_id, manifest.revision);
  assert.deepEqual(stored, manifest);
  for (const c of manifest.components) {
    const bytes = await delivery.reads.openBlob(c.blob);
    assert.deepEqual(new Uint8Array(bytes), new Uint8Array(blobs.get(c.blob.digest)!));
  }
}

/** Fault hooks that throw once at `point`, after `arm()` (or right away when `armed`). */
export function failOnceAt(point: DeliveryFaultPoint, armed = false): { faults: DeliveryFaults; arm: () => void; fired: () => boolean } {
  let fired = false;
  return {
    faults: {
      at: (p) => {
        if (p === point && armed) {
          armed = false;
          fired = true;
          throw new Error(`injected failure at ${p}`);
        }
      },
    },
    arm: () => {
      armed = true;
    },
    fired: () => fired,
  };
}

/** A home holding one stage whose single blob (`size` bytes) received its first `received` bytes; closed. */
export async function partlyUploaded(
  t: TestContext,
  seed: number,
  size: number,
  received: number,
): Promise<BuiltManifest & { home: string; stageId: string; digest: Digest; data: Uint8Array; partial: string }> {
  const home = tempHome(t);
  const data = bytesOf(seed, size);
  const built = buildManifest([{ path: "data/big.bin", content: data }]);
  const first = await openStore(t, home);
  const begun = await first.delivery.begin(built.manifest);
  const digest = begun.missing[0]!.digest;
  await first.delivery.putChunk(begun.stage_id, digest, 0, data.subarray(0, received));
  await first.delivery.close();
  return { ...built, home, stageId: begun.stage_id, digest, data, partial: first.layout.partialPath(begun.stage_id, digest) };
}
