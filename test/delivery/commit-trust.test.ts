/**
 * What a commit may take on trust (G8). A blob this process hashed to its digest as it arrived is
 * not hashed again at commit: the bundle digest covers it, recomputed over the bytes read back,
 * or over the bytes as they arrived, taken in path order (InlineCommitCheck),
 * when every partial still has the identity it had once its last byte was written. So bytes
 * changed after their last chunk, in place, with the same size and the modification time put
 * back, must still fail the commit; and a restarted node trusts nothing it received before: it
 * hashes those partials again, so a change that the bundle digest alone would not reveal (a
 * manifest whose bundle digest was computed over the changed bytes) is caught.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import * as fs from "node:fs";
import { sha256Digest, type Digest } from "../../src/core/digest.js";
import { bundleDigestOf, manifestDigestOf, type Manifest } from "../../src/delivery/manifest-types.js";
import type { DeliveryFaults } from "../../src/backends/embedded/delivery/delivery-faults.js";
import { writesAlwaysMoveCtime } from "../../src/backends/embedded/delivery/delivery-stage-store.js";
import type { Delivery } from "../../src/delivery/service.js";
import { buildManifest, bytesOf, openStore, rejectsWith, skillManifest, tempHome, uploadMissing, type BuiltManifest } from "./store-harness.js";

/** Counts the reads of partials (the embedded store's fault seam, here only watching). */
function readCounter(): { faults: DeliveryFaults; reads: () => number } {
  let reads = 0;
  return {
    faults: { at: (point) => void (point === "partial-read" && reads++) },
    reads: () => reads,
  };
}

/** Flips one byte of a file in place: same size, same inode, modification time put back. */
function flipInPlace(path: string, at: number): void {
  const before = fs.statSync(path);
  const flipped = Buffer.from([fs.readFileSync(path)[at]! ^ 0xff]);
  const fd = fs.openSync(path, "r+");
  try {
    fs.writeSync(fd, flipped, 0, 1, at);
  } finally {
    fs.closeSync(fd);
  }
  fs.utimesSync(path, before.atimeMs / 1000, before.mtimeMs / 1000);
  const after = fs.statSync(path);
  assert.equal(after.size, before.size);
  assert.equal(after.ino, before.ino);
  assert.equal(Math.floor(after.mtimeMs), Math.floor(before.mtimeMs));
}

test("a partial changed in place after its last chunk (same size, mtime put back) is refused at commit, and asked for again", async (t) => {
  const { delivery, layout } = await openStore(t, tempHome(t));
  const built = skillManifest("trust-commit", "r1", [{ path: "data/payload.bin", content: bytesOf(8, 300_000) }]);
  const begun = await delivery.begin(built.manifest);
  await uploadMissing(delivery, begun, built.blobs);
  const payload = built.manifest.components.find((c) => c.relative_path === "data/payload.bin")!.blob;
  flipInPlace(layout.partialPath(begun.stage_id, payload.digest), 123_456);
  const refused = await rejectsWith(delivery.commit(begun.stage_id), "blob-tampered");
  assert.equal(refused.details.digest, payload.digest);
  assert.deepEqual(await delivery.catalog.list().then((l) => l.filter((b) => b.bundle_id === "trust-commit")), []);
  assert.deepEqual((await delivery.status(begun.stage_id)).missing.map((m) => [m.digest, m.offset]), [[payload.digest, 0]]);
  await uploadMissing(delivery, await delivery.begin(built.manifest), built.blobs);
  assert.equal((await delivery.commit(begun.stage_id)).bundle_id, "trust-commit");
  assert.deepEqual(new Uint8Array(await delivery.reads.openBlob(payload)), built.blobs.get(payload.digest));
});

test("a restarted node re-hashes what it received before: a partial changed while it was down is asked for again", async (t) => {
  const home = tempHome(t);
  const original = bytesOf(9, 50_000);
  const changed = new Uint8Array(original);
  changed[4321] = changed[4321]! ^ 0xff;
  const payload = { digest: sha256Digest(original), byte_len: original.byteLength };
  // The bundle digest is that of the changed bytes: only hashing the blob itself tells them apart.
  const body = {
    bundle_id: "trust-restart",
    revision: "r1",
    bundle_digest: bundleDigestOf([{ path: "data/payload.bin", content: changed }]),
    components: [{ kind: "file" as const, scope: "session" as const, relative_path: "data/payload.bin", blob: payload }],
  };
  const manifest: Manifest = { ...body, manifest_digest: manifestDigestOf(body) };
  const first = await openStore(t, home);
  const begun = await first.delivery.begin(manifest);
  await uploadMissing(first.delivery, begun, new Map<Digest, Uint8Array>([[payload.digest, original]]));
  await first.delivery.close();
  flipInPlace(first.layout.partialPath(begun.stage_id, payload.digest), 4321);
  const second = await openStore(t, home);
  assert.deepEqual((await second.delivery.status(begun.stage_id)).missing.map((m) => [m.digest, m.offset]), [[payload.digest, 0]]);
  await rejectsWith(second.delivery.commit(begun.stage_id), "stage-incomplete");
  await rejectsWith(second.delivery.reads.openBlob(payload), "blob-not-found");
});

test("a stage whose blobs arrive in any order, one after another or interleaved, commits without reading its partials back", async (t) => {
  const counter = readCounter();
  const home = tempHome(t);
  const { delivery } = await openStore(t, home, { faults: counter.faults });
  // Where a write could leave a partial's times unchanged, nothing is taken on trust.
  const inline = writesAlwaysMoveCtime(home);
  const files = (seed: number) => [1, 2, 3, 4].map((i) => ({ path: `data/f${i}.bin`, content: bytesOf(seed + i, 70_000) }));
  const inOrder = buildManifest(files(20), "trust-order", "r1");
  const begun = await delivery.begin(inOrder.manifest);
  assert.deepEqual(
    begun.missing.map((m) => m.digest),
    inOrder.manifest.components.map((c) => c.blob.digest),
    "missing blobs are asked for in path order",
  );
  await uploadMissing(delivery, begun, inOrder.blobs, 32 * 1024);
  let before = counter.reads();
  await delivery.commit(begun.stage_id);
  assert.equal(counter.reads() - before, inline ? 0 : 4, inline ? "checked as the chunks arrived" : "read back at commit");
  await assertIntact(delivery, inOrder);

  const reversed = buildManifest(files(30), "trust-order", "r2");
  const second = await delivery.begin(reversed.manifest);
  await uploadMissing(delivery, { ...second, missing: [...second.missing].reverse() }, reversed.blobs, 32 * 1024);
  before = counter.reads();
  await delivery.commit(second.stage_id);
  assert.equal(counter.reads() - before, inline ? 0 : 4, "blobs completed in reverse order are taken in path order");
  await assertIntact(delivery, reversed);

  // Four blobs at once, as the client uploads: their chunks interleave.
  const interleaved = buildManifest(files(40), "trust-order", "r3");
  const third = await delivery.begin(interleaved.manifest);
  for (let offset = 0; offset < 70_000; offset += 16 * 1024) {
    for (const m of [...third.missing].reverse()) {
      const bytes = interleaved.blobs.get(m.digest)!;
      await delivery.putChunk(third.stage_id, m.digest, offset, bytes.subarray(offset, Math.min(offset + 16 * 1024, bytes.byteLength)));
    }
  }
  before = counter.reads();
  await delivery.commit(third.stage_id);
  assert.equal(counter.reads() - before, inline ? 0 : 4, "interleaved chunks of several blobs");
  await assertIntact(delivery, interleaved);
});

test("a stage that would hold too much for the inline check (files far ahead of their turn) is read back at commit", async (t) => {
  const counter = readCounter();
  const home = tempHome(t);
  const { delivery } = await openStore(t, home, { faults: counter.faults });
  // 17 files of 1 MiB, the first in path order sent last: 17 MiB would be held, over the bound.
  const files = Array.from({ length: 17 }, (_, i) => ({ path: `data/f${String(i).padStart(2, "0")}.bin`, content: bytesOf(60 + i, 1024 * 1024) }));
  const built = buildManifest(files, "trust-bound", "r1");
  const begun = await delivery.begin(built.manifest);
  await uploadMissing(delivery, { ...begun, missing: [...begun.missing].reverse() }, built.blobs, 1024 * 1024);
  const before = counter.reads();
  assert.equal((await delivery.commit(begun.stage_id)).bundle_id, "trust-bound");
  assert.ok(counter.reads() - before >= 17, "each partial read back and checked at commit");
  await assertIntact(delivery, built);
});

test("a partial changed after its last chunk makes the commit read everything back, and a broken rule is still reported", async (t) => {
  const counter = readCounter();
  const { delivery, layout } = await openStore(t, tempHome(t), { faults: counter.faults });
  // An ELF header: refused by the contract's content rules, inline or at commit alike.
  const elf = new Uint8Array(4096);
  elf.set([0x7f, 0x45, 0x4c, 0x46]);
  const built = skillManifest("trust-rules", "r1", [{ path: "data/tool.bin", content: elf }]);
  const begun = await delivery.begin(built.manifest);
  await uploadMissing(delivery, begun, built.blobs);
  await rejectsWith(delivery.commit(begun.stage_id), "contract-executable-content");
  const ok = skillManifest("trust-rules", "r2", [{ path: "data/payload.bin", content: bytesOf(41, 90_000) }]);
  const staged = await delivery.begin(ok.manifest);
  await uploadMissing(delivery, staged, ok.blobs);
  const skill = ok.manifest.components.find((c) => c.relative_path === "skills/review/SKILL.md")!.blob;
  const path = layout.partialPath(staged.stage_id, skill.digest);
  fs.utimesSync(path, new Date(), new Date()); // no byte changed, but the partial was touched
  const before = counter.reads();
  assert.equal((await delivery.commit(staged.stage_id)).bundle_id, "trust-rules");
  assert.equal(counter.reads() - before, staged.missing.length, "each partial read back and checked at commit");
});

/** A chunk as the HTTP route hands it over: a stream of pieces of `size` bytes. */
async function* inPieces(bytes: Uint8Array, size: number): AsyncIterable<Uint8Array> {
  for (let at = 0; at < bytes.byteLength; at += size) yield bytes.subarray(at, Math.min(at + size, bytes.byteLength));
}

test("files whose chunks arrive in many pieces are checked inline: whole where a rule reads them whole, magic bytes split across pieces still refused", async (t) => {
  const counter = readCounter();
  const home = tempHome(t);
  const { delivery } = await openStore(t, home, { faults: counter.faults });
  const inline = writesAlwaysMoveCtime(home);
  const upload = async (built: BuiltManifest, begun: { stage_id: string; missing: readonly { digest: Digest }[] }): Promise<void> => {
    for (const m of begun.missing) {
      const bytes = built.blobs.get(m.digest)!;
      // Three bytes a piece for small files (the plugin manifests, SKILL.md, a 4-byte magic split
      // 3 + 1), larger pieces for the rest.
      await delivery.putChunk(begun.stage_id, m.digest, 0, inPieces(bytes, bytes.byteLength < 4096 ? 3 : 7_000));
    }
  };
  // The plugin manifests and SKILL.md are parsed whole; the data file only by its magic bytes.
  const ok = skillManifest("trust-pieces", "r1", [{ path: "data/payload.bin", content: bytesOf(51, 70_000) }]);
  const staged = await delivery.begin(ok.manifest);
  await upload(ok, staged);
  const before = counter.reads();
  assert.equal((await delivery.commit(staged.stage_id)).bundle_id, "trust-pieces");
  assert.equal(counter.reads() - before, inline ? 0 : staged.missing.length, inline ? "checked as the pieces arrived" : "read back at commit");
  await assertIntact(delivery, ok);

  const elf = new Uint8Array(64);
  elf.set([0x7f, 0x45, 0x4c, 0x46]);
  const bad = skillManifest("trust-pieces", "r2", [{ path: "data/tool.bin", content: elf }]);
  const begun = await delivery.begin(bad.manifest);
  await upload(bad, begun);
  await rejectsWith(delivery.commit(begun.stage_id), "contract-executable-content");
});

async function assertIntact(delivery: Delivery, built: BuiltManifest): Promise<void> {
  for (const c of built.manifest.components) {
    assert.deepEqual(new Uint8Array(await delivery.reads.openBlob(c.blob)), built.blobs.get(c.blob.digest));
  }
}
