/**
 * Commit (G7, G8, G9): verification of every blob and of the bundle digest, the bundle contract
 * on the bytes, a durable atomic record, idempotent receipts (also after a restart), and the
 * reference's failure scenarios at each durable step.
 */
import { test, type TestContext } from "node:test";
import assert from "node:assert/strict";
import * as fs from "node:fs";
import { sha256Digest } from "../../src/core/digest.js";
import { manifestDigestOf } from "../../src/delivery/manifest-types.js";
import type { DeliveryFaultPoint } from "../../src/backends/embedded/delivery/delivery-faults.js";
import {
  PLUGIN_JSON,
  ROOT_PLUGIN_JSON,
  buildManifest,
  bytesOf,
  dataFilesOf,
  failOnceAt,
  openStore,
  rejectsWith,
  skillManifest,
  assertBundleIntact,
  tempHome,
  treeOf,
  uploadMissing,
} from "./store-harness.js";

/** Uploads the sample bundle with a fault armed at `point`, then checks that commit fails there. */
async function failedCommit(t: TestContext, point: DeliveryFaultPoint) {
  const home = tempHome(t);
  const fault = failOnceAt(point);
  const first = await openStore(t, home, { faults: fault.faults });
  const { manifest, blobs } = skillManifest();
  const begun = await first.delivery.begin(manifest);
  await uploadMissing(first.delivery, begun, blobs);
  fault.arm();
  await rejectsWith(first.delivery.commit(begun.stage_id), "delivery-storage-failed");
  assert.ok(fault.fired());
  return { home, first, manifest, begun };
}

test("commit verifies and records; replay, begin and status answer the same receipt", async (t) => {
  const opened = await openStore(t, tempHome(t));
  const { delivery } = opened;
  const { manifest, blobs } = skillManifest();
  const begun = await delivery.begin(manifest);
  await uploadMissing(delivery, begun, blobs, 16);
  const receipt = await delivery.commit(begun.stage_id);
  assert.deepEqual(receipt, {
    bundle_id: "review-tools",
    revision: "r1",
    bundle_digest: manifest.bundle_digest,
    manifest_digest: manifest.manifest_digest,
    blobs: [...blobs.entries()].map(([digest, b]) => ({ digest, byte_len: b.byteLength })).sort((x, y) => (x.digest < y.digest ? -1 : 1)),
  });
  assert.deepEqual(await delivery.commit(begun.stage_id), receipt);
  const again = await delivery.begin(manifest);
  assert.deepEqual(again, { stage_id: begun.stage_id, manifest_digest: manifest.manifest_digest, committed: true, receipt, missing: [] });
  const status = await delivery.status(begun.stage_id);
  assert.equal(status.committed, true);
  assert.deepEqual(status.receipt, receipt);
  await rejectsWith(delivery.putChunk(begun.stage_id, begun.missing[0]!.digest, 0, new Uint8Array(1)), "stage-committed");
  assert.deepEqual(dataFilesOf(opened).filter((p) => p.startsWith("stages/")), [], "the stage's files are gone");
  for (const p of dataFilesOf(opened)) assert.equal(fs.statSync(`${opened.layout.root}/${p}`).mode & 0o777, 0o600);
});

test("an incomplete stage is refused (409) and stays open", async (t) => {
  const { delivery } = await openStore(t, tempHome(t));
  const { manifest, blobs } = skillManifest();
  const begun = await delivery.begin(manifest);
  const { digest } = begun.missing[0]!;
  await delivery.putChunk(begun.stage_id, digest, 0, blobs.get(digest)!.subarray(0, 4));
  const error = await rejectsWith(delivery.commit(begun.stage_id), "stage-incomplete");
  assert.equal(error.status, 409);
  assert.equal(error.details.missing_blobs, begun.missing.length);
  assert.deepEqual(await delivery.catalog.list(), []);
  await uploadMissing(delivery, await delivery.begin(manifest), blobs);
  await delivery.commit(begun.stage_id);
});

test("tampered bytes and a tampered bundle digest are refused (422) and nothing is committed", async (t) => {
  const { delivery } = await openStore(t, tempHome(t));
  const { manifest, blobs } = skillManifest();
  const begun = await delivery.begin(manifest);
  const { digest } = begun.missing[0]!;
  const tampered = new Uint8Array(blobs.get(digest)!);
  tampered[0]! ^= 1;
  await rejectsWith(delivery.putChunk(begun.stage_id, digest, 0, tampered), "blob-digest-mismatch");

  const wrong = skillManifest("wrong-bundle");
  const body = { ...wrong.manifest, bundle_digest: sha256Digest("not the bundle") };
  const wrongManifest = { ...body, manifest_digest: manifestDigestOf(body) };
  const stage = await delivery.begin(wrongManifest);
  await uploadMissing(delivery, stage, wrong.blobs);
  const error = await rejectsWith(delivery.commit(stage.stage_id), "bundle-digest-mismatch");
  assert.equal(error.status, 422);
  assert.equal(error.details.expected, body.bundle_digest);
  assert.equal(error.details.actual, wrong.manifest.bundle_digest);
  assert.deepEqual(await delivery.catalog.list(), []);
});

test("a stored blob found tampered at commit is refused, dropped, and asked for again", async (t) => {
  const opened = await openStore(t, tempHome(t));
  const { delivery } = opened;
  const { manifest, blobs } = skillManifest();
  const victim = manifest.components[1]!.blob;
  const first = buildManifest([{ path: "docs/copy.json", content: blobs.get(victim.digest)! }], "first");
  await uploadMissing(delivery, await delivery.begin(first.manifest), first.blobs);
  await delivery.commit((await delivery.begin(first.manifest)).stage_id);
  const begun = await delivery.begin(manifest);
  assert.ok(!begun.missing.some((m) => m.digest === victim.digest), "stored already: not asked for");
  await uploadMissing(delivery, begun, blobs);
  const blobPath = opened.layout.blobPath(victim.digest);
  const bytes = fs.readFileSync(blobPath);
  bytes[bytes.length - 1]! ^= 0x20;
  fs.writeFileSync(blobPath, bytes);
  await rejectsWith(delivery.commit(begun.stage_id), "blob-tampered");
  assert.equal(fs.existsSync(blobPath), false, "bytes that do not match their address are dropped");
  assert.deepEqual((await delivery.status(begun.stage_id)).missing, [{ digest: victim.digest, byte_len: victim.byte_len, offset: 0 }]);
  await uploadMissing(delivery, await delivery.begin(manifest), blobs);
  await delivery.commit(begun.stage_id);
});

test("a received partial changed between its last chunk and commit is refused, dropped, and asked for again", async (t) => {
  const opened = await openStore(t, tempHome(t));
  const { delivery } = opened;
  const { manifest, blobs } = skillManifest();
  const begun = await delivery.begin(manifest);
  await uploadMissing(delivery, begun, blobs);
  // A change that leaves the file valid for the contract's rules: only the digests can tell.
  const skill = manifest.components.find((c) => c.relative_path === "skills/review/SKILL.md")!.blob;
  const victim = begun.missing.find((m) => m.digest === skill.digest)!;
  const partial = opened.layout.partialPath(begun.stage_id, victim.digest);
  const bytes = fs.readFileSync(partial);
  bytes[bytes.length - 1]! ^= 0x20;
  fs.writeFileSync(partial, bytes);
  await rejectsWith(delivery.commit(begun.stage_id), "blob-tampered");
  assert.equal(fs.existsSync(opened.layout.blobPath(victim.digest)), false, "the changed bytes are not left published");
  assert.deepEqual(await delivery.catalog.list(), []);
  assert.deepEqual((await delivery.status(begun.stage_id)).missing, [{ digest: victim.digest, byte_len: victim.byte_len, offset: 0 }]);
  await uploadMissing(delivery, await delivery.begin(manifest), blobs);
  await delivery.commit(begun.stage_id);
});

test("the bundle contract is checked on the bytes at commit", async (t) => {
  const { delivery } = await openStore(t, tempHome(t));
  const { manifest, blobs } = buildManifest([
    { path: ".claude-plugin/plugin.json", content: PLUGIN_JSON },
    { path: "plugin.json", content: ROOT_PLUGIN_JSON },
    { path: "skills/review/SKILL.md", content: "---\nname: other\ndescription: review changes\n---\n" },
  ]);
  const begun = await delivery.begin(manifest);
  await uploadMissing(delivery, begun, blobs);
  await rejectsWith(delivery.commit(begun.stage_id), "contract-skill-name-mismatch");
  const elf = buildManifest([{ path: "docs/tool.md", content: new Uint8Array([0x7f, 0x45, 0x4c, 0x46, 1, 2, 3]) }], "elf");
  const stage = await delivery.begin(elf.manifest);
  await uploadMissing(delivery, stage, elf.blobs);
  await rejectsWith(delivery.commit(stage.stage_id), "contract-executable-content");
  assert.deepEqual(await delivery.catalog.list(), []);
});

test("bad manifests are refused at begin with their own codes and nothing is stored", async (t) => {
  const opened = await openStore(t, tempHome(t));
  const { delivery } = opened;
  const before = treeOf(opened.layout.root).filter((p) => !p.startsWith("catalog.sqlite"));
  // The reference's overflow: 33 files of 1 MiB under a 32 MiB bundle limit.
  const digest = sha256Digest("x");
  const components = Array.from({ length: 33 }, (_, i) => ({
    kind: "file" as const,
    scope: "session" as const,
    relative_path: `files/${String(i).padStart(3, "0")}`,
    blob: { digest, byte_len: 1024 * 1024 },
  }));
  const body = { bundle_id: "overflow", revision: "r1", bundle_digest: sha256Digest("b"), components };
  const overflow = await rejectsWith(delivery.begin({ ...body, manifest_digest: manifestDigestOf(body) }), "manifest-bundle-too-large");
  assert.equal(overflow.status, 413);
  const { manifest } = skillManifest();
  await rejectsWith(delivery.begin({ ...manifest, manifest_digest: sha256Digest("wrong") }), "manifest-digest-mismatch");
  await rejectsWith(delivery.begin({ ...manifest, extra: 1 }), "manifest-unknown-field");
  const script = buildManifest([{ path: "tools/run.sh", content: "echo hi\n" }], "script");
  await rejectsWith(delivery.begin(script.manifest), "contract-executable-extension");
  assert.deepEqual(treeOf(opened.layout.root).filter((p) => !p.startsWith("catalog.sqlite")), before);
  assert.deepEqual(await delivery.catalog.list(), []);
});

test("an empty file needs no upload and commits", async (t) => {
  const { delivery } = await openStore(t, tempHome(t));
  const { manifest, blobs } = skillManifest("with-empty", "r1", [{ path: "docs/empty.md", content: "" }]);
  const begun = await delivery.begin(manifest);
  assert.equal(begun.missing.length, 3);
  await uploadMissing(delivery, begun, blobs);
  const receipt = await delivery.commit(begun.stage_id);
  assert.ok(receipt.blobs.some((b) => b.byte_len === 0));
  assert.equal((await delivery.reads.openBlob({ digest: sha256Digest(""), byte_len: 0 })).byteLength, 0);
});

for (const [point, what] of [
  ["commit-record", "the commit record"],
  ["blob-dir-sync", "the blobs' directories"],
] as const) {
  test(`a failed fsync of ${what} before commit leaves no commit, also after reopen; the retry commits`, async (t) => {
    const { home, first, manifest, begun } = await failedCommit(t, point);
    assert.deepEqual(await first.delivery.catalog.list(), []);
    assert.equal((await first.delivery.begin(manifest)).committed, false);
    await first.delivery.close();

    const second = await openStore(t, home);
    assert.deepEqual(await second.delivery.catalog.list(), []);
    const resumed = await second.delivery.begin(manifest);
    assert.equal(resumed.stage_id, begun.stage_id);
    assert.deepEqual(resumed.missing, [], "the blobs stayed stored for the stage");
    const receipt = await second.delivery.commit(begun.stage_id);
    assert.equal(receipt.manifest_digest, manifest.manifest_digest);
  });
}

test("a failure right after linking a blob at commit undoes that link; the retry publishes it", async (t) => {
  const fault = failOnceAt("blob-linked");
  const opened = await openStore(t, tempHome(t), { faults: fault.faults });
  const { delivery } = opened;
  const { manifest, blobs } = skillManifest();
  const begun = await delivery.begin(manifest);
  await uploadMissing(delivery, begun, blobs);
  fault.arm();
  await rejectsWith(delivery.commit(begun.stage_id), "delivery-storage-failed");
  assert.deepEqual(await delivery.catalog.list(), []);
  const unlinked = begun.missing.filter((m) => !fs.existsSync(opened.layout.blobPath(m.digest)));
  assert.equal(unlinked.length, 1, "exactly the blob whose link failed is not published");
  const partial = opened.layout.partialPath(begun.stage_id, unlinked[0]!.digest);
  assert.equal(fs.statSync(partial).nlink, 1, "the partial is again the blob's only name");
  assert.deepEqual((await delivery.status(begun.stage_id)).missing, [], "its verified bytes are kept: nothing to send again");
  assert.equal((await delivery.commit(begun.stage_id)).manifest_digest, manifest.manifest_digest);
  assert.equal(fs.existsSync(partial), false);
  for (const m of begun.missing) assert.deepEqual(new Uint8Array(fs.readFileSync(opened.layout.blobPath(m.digest))), blobs.get(m.digest));
});

test("a failure after the commit record is durable: the retry and a restart answer the same receipt", async (t) => {
  const { home, first, manifest, begun } = await failedCommit(t, "commit-recorded");
  const receipt = await first.delivery.commit(begun.stage_id);
  assert.equal(receipt.manifest_digest, manifest.manifest_digest);
  await first.delivery.close();

  const second = await openStore(t, home);
  assert.equal((await second.delivery.catalog.list()).length, 1);
  assert.deepEqual(await second.delivery.commit(begun.stage_id), receipt);
});

test("the receipt is replayed exactly after a restart, by stage id and by manifest", async (t) => {
  const home = tempHome(t);
  const { manifest, blobs } = skillManifest();
  const first = await openStore(t, home);
  const begun = await first.delivery.begin(manifest);
  await uploadMissing(first.delivery, begun, blobs);
  const receipt = await first.delivery.commit(begun.stage_id);
  await first.delivery.close();

  const second = await openStore(t, home);
  assert.deepEqual(await second.delivery.commit(begun.stage_id), receipt);
  const replayed = await second.delivery.begin(manifest);
  assert.equal(replayed.stage_id, begun.stage_id);
  assert.equal(replayed.committed, true);
  assert.deepEqual(replayed.missing, []);
});

test("a failure removing the stage's files after commit still returns the receipt; reopen cleans up", async (t) => {
  const home = tempHome(t);
  const fault = failOnceAt("stage-remove");
  const first = await openStore(t, home, { faults: fault.faults });
  const data = bytesOf(20, 5000);
  const { manifest, blobs } = buildManifest([{ path: "data/a.bin", content: data }]);
  const begun = await first.delivery.begin(manifest);
  await uploadMissing(first.delivery, begun, blobs, 1000);
  fault.arm();
  const receipt = await first.delivery.commit(begun.stage_id);
  assert.deepEqual(await first.delivery.commit(begun.stage_id), receipt);
  // The removal follows the answer; close waits for it.
  await first.delivery.close();
  assert.ok(fault.fired());
  assert.ok(fs.existsSync(first.layout.stageDir(begun.stage_id)), "left behind by the injected failure");

  const second = await openStore(t, home);
  assert.equal(second.repairs.removedStageDirs, 1);
  assert.equal(fs.existsSync(second.layout.stageDir(begun.stage_id)), false);
  assert.deepEqual(await second.delivery.commit(begun.stage_id), receipt);
});

test("a new store is laid out with its 256 shards; a store without them (older layout) creates them as blobs are published", async (t) => {
  const home = tempHome(t);
  const first = await openStore(t, home);
  const shards = fs.readdirSync(first.layout.blobsDir).sort();
  assert.equal(shards.length, 256);
  assert.equal(shards[0], "00");
  assert.equal(shards[255], "ff");
  for (const shard of shards) assert.equal(fs.lstatSync(`${first.layout.blobsDir}/${shard}`).mode & 0o777, 0o700);
  await first.delivery.close();

  // An older store had only the shards it used: none here. Reopening does not lay them out again.
  for (const shard of shards) fs.rmdirSync(`${first.layout.blobsDir}/${shard}`);
  const second = await openStore(t, home);
  assert.deepEqual(fs.readdirSync(second.layout.blobsDir), []);
  const { manifest, blobs } = skillManifest();
  const begun = await second.delivery.begin(manifest);
  await uploadMissing(second.delivery, begun, blobs);
  await second.delivery.commit(begun.stage_id);
  const used = new Set([...blobs.keys()].map((d) => d.slice("sha256:".length, "sha256:".length + 2)));
  assert.ok(used.size > 0);
  assert.deepEqual(fs.readdirSync(second.layout.blobsDir).sort(), [...used].sort());

  // Shards this process already checked, removed by hand, are made again for the blobs put in them.
  await second.delivery.catalog.retire("review-tools", "r1");
  assert.equal(await second.delivery.gc(), blobs.size);
  for (const shard of used) fs.rmdirSync(`${second.layout.blobsDir}/${shard}`);
  const next = await second.delivery.begin(skillManifest("review-tools", "r2").manifest);
  assert.equal(next.missing.length, blobs.size);
  await uploadMissing(second.delivery, next, blobs);
  await second.delivery.commit(next.stage_id);
  assert.deepEqual(fs.readdirSync(second.layout.blobsDir).sort(), [...used].sort());
  await assertBundleIntact(second.delivery, skillManifest("review-tools", "r2").manifest, blobs);
});
