/**
 * Start-up recovery of the embedded delivery store (G7, G10): one opener at a time; leftovers of
 * interrupted work are cleaned; anything unsafe or foreign refuses start-up, naming the path,
 * and changes nothing — the audit of the whole tree comes before any repair.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as path from "node:path";
import Database from "better-sqlite3";
import { sha256Digest } from "../../src/core/digest.js";
import { UnsafeStorageError } from "../../src/core/errors.js";
import { openEmbeddedDelivery } from "../../src/backends/embedded/delivery/delivery-backend.js";
import { EmbeddedBlobStore } from "../../src/backends/embedded/delivery/delivery-blob-store.js";
import { DeliveryLayout } from "../../src/backends/embedded/delivery/delivery-layout.js";
import { buildManifest, bytesOf, openStore, rejectsWith, skillManifest, tempHome, treeOf, uploadMissing } from "./store-harness.js";

/** A store with one committed bundle and one half-uploaded stage, closed again. */
async function populatedHome(t: Parameters<typeof tempHome>[0]): Promise<{ home: string; layout: DeliveryLayout; stageId: string }> {
  const home = tempHome(t, "recovery");
  const opened = await openEmbeddedDelivery(home);
  const done = skillManifest();
  const begun = await opened.delivery.begin(done.manifest);
  await uploadMissing(opened.delivery, begun, done.blobs);
  await opened.delivery.commit(begun.stage_id);
  const data = bytesOf(40, 20_000);
  const half = buildManifest([{ path: "data/half.bin", content: data }], "half");
  const staged = await opened.delivery.begin(half.manifest);
  await opened.delivery.putChunk(staged.stage_id, staged.missing[0]!.digest, 0, data.subarray(0, 5000));
  await opened.delivery.close();
  return { home, layout: opened.layout, stageId: staged.stage_id };
}

/** Asserts that opening refuses with `code` naming `offender`, and that the tree did not change. */
async function assertRefused(home: string, layout: DeliveryLayout, code: string, offender: string): Promise<void> {
  const before = snapshot(layout.root);
  const error = await rejectsWith(openEmbeddedDelivery(home), code);
  assert.ok(error instanceof UnsafeStorageError);
  assert.equal(error.path, offender);
  assert.ok(error.message.includes(offender), "the message names the offending path");
  assert.deepEqual(snapshot(layout.root), before, "nothing was changed");
}

/** Names, kinds, sizes and modes of everything under root (except the lock file's content). */
function snapshot(root: string): string[] {
  return treeOf(root).map((rel) => {
    const st = fs.lstatSync(path.join(root, rel));
    return `${rel} ${st.isSymbolicLink() ? "link" : st.size} ${(st.mode & 0o777).toString(8)} ${st.nlink}`;
  });
}

test("one opener at a time: a second instance on the same home is refused until the first closes", async (t) => {
  const home = tempHome(t, "lock");
  const first = await openStore(t, home);
  const second = await rejectsWith(openEmbeddedDelivery(home), "delivery-store-locked");
  assert.equal(second.status, 503);
  const elsewhere = await openStore(t, tempHome(t, "lock-other"));
  assert.deepEqual(await elsewhere.delivery.catalog.list(), []);
  await first.delivery.close();
  const third = await openStore(t, home);
  assert.deepEqual(await third.delivery.catalog.list(), []);
});

test("a temp file left by an interrupted publish is removed on reopen", async (t) => {
  const home = tempHome(t, "temp");
  let crash = true;
  const first = await openEmbeddedDelivery(home, {
    faults: {
      at: (p) => {
        if (p === "blob-temp-written" && crash) {
          crash = false;
          throw new Error("injected crash before publish");
        }
      },
    },
  });
  const { manifest, blobs } = skillManifest("with-empty", "r1", [{ path: "docs/empty.md", content: "" }]);
  await rejectsWith(first.delivery.begin(manifest), "delivery-storage-failed");
  const shard = first.layout.shardDir(sha256Digest(""));
  const temps = fs.readdirSync(shard);
  assert.equal(temps.length, 1);
  assert.match(temps[0]!, /^\.tmp-[0-9a-f]{64}\.[0-9a-f]{16}$/);
  await first.delivery.close();

  const second = await openStore(t, home);
  assert.equal(second.repairs.removedTemps, 1);
  assert.deepEqual(fs.readdirSync(shard), []);
  const begun = await second.delivery.begin(manifest);
  await uploadMissing(second.delivery, begun, blobs);
  await second.delivery.commit(begun.stage_id);
});

test("a malformed temp name fails closed and is left in place", async (t) => {
  const { home, layout } = await populatedHome(t);
  const shard = path.join(layout.blobsDir, "00");
  fs.mkdirSync(shard, { mode: 0o700, recursive: true }); // a new store is laid out with its shards
  const malformed = path.join(shard, `.tmp-${"0".repeat(63)}.${"1".repeat(16)}`);
  fs.writeFileSync(malformed, "not a blob", { mode: 0o600 });
  await assertRefused(home, layout, "unsafe-storage-name", malformed);
  assert.ok(fs.existsSync(malformed));
});

test("a symlink with a well-formed temp name fails closed and is left in place", async (t) => {
  const { home, layout } = await populatedHome(t);
  const target = path.join(home, "symlink-target");
  fs.writeFileSync(target, "not a blob", { mode: 0o600 });
  const shard = path.join(layout.blobsDir, "00");
  fs.mkdirSync(shard, { mode: 0o700, recursive: true }); // a new store is laid out with its shards
  const temp = path.join(shard, `.tmp-${"0".repeat(64)}.${"1".repeat(16)}`);
  fs.symlinkSync(target, temp);
  await assertRefused(home, layout, "unsafe-storage-symlink", temp);
  assert.ok(fs.lstatSync(temp).isSymbolicLink());
});

test("the audit covers the whole tree before any repair: a legit temp survives a refusal elsewhere", async (t) => {
  const { home, layout, stageId } = await populatedHome(t);
  const shard = path.join(layout.blobsDir, "00");
  fs.mkdirSync(shard, { mode: 0o700, recursive: true }); // a new store is laid out with its shards
  const temp = path.join(shard, `.tmp-${"0".repeat(64)}.${"2".repeat(16)}`);
  fs.writeFileSync(temp, "interrupted", { mode: 0o600 });
  const stray = path.join(layout.stageDir(stageId), "notes.txt");
  fs.writeFileSync(stray, "foreign", { mode: 0o600 });
  await assertRefused(home, layout, "unsafe-storage-name", stray);
  assert.ok(fs.existsSync(temp), "the temp a successful start would remove is still there");
  fs.rmSync(stray);
  const opened = await openStore(t, home);
  assert.equal(opened.repairs.removedTemps, 1);
  assert.equal(fs.existsSync(temp), false);
  assert.equal((await opened.delivery.status(stageId)).missing[0]!.offset, 5000);
});

test("foreign files, loose modes, foreign owners and hard links anywhere refuse start-up", async (t) => {
  const { home, layout, stageId } = await populatedHome(t);
  const blobFile = (): string => {
    const shard = fs.readdirSync(layout.blobsDir).find((s) => fs.readdirSync(path.join(layout.blobsDir, s)).length > 0)!;
    return path.join(layout.blobsDir, shard, fs.readdirSync(path.join(layout.blobsDir, shard))[0]!);
  };

  const foreign = path.join(layout.root, "backup.sqlite");
  fs.writeFileSync(foreign, "", { mode: 0o600 });
  await assertRefused(home, layout, "unsafe-storage-name", foreign);
  fs.rmSync(foreign);

  const victim = blobFile();
  fs.chmodSync(victim, 0o644);
  await assertRefused(home, layout, "unsafe-storage-mode", victim);
  fs.chmodSync(victim, 0o600);

  fs.chmodSync(layout.stageDir(stageId), 0o750);
  await assertRefused(home, layout, "unsafe-storage-mode", layout.stageDir(stageId));
  fs.chmodSync(layout.stageDir(stageId), 0o700);

  const outsideLink = path.join(home, "second-name");
  fs.linkSync(victim, outsideLink);
  await assertRefused(home, layout, "unsafe-storage-hard-link", victim);
  fs.rmSync(outsideLink);

  const badStage = path.join(layout.stagesDir, "not-a-stage");
  fs.mkdirSync(badStage, { mode: 0o700 });
  await assertRefused(home, layout, "unsafe-storage-name", badStage);
  fs.rmdirSync(badStage);

  if (process.geteuid?.() === 0) {
    fs.chownSync(victim, 65534, 65534);
    await assertRefused(home, layout, "unsafe-storage-owner", victim);
    fs.chownSync(victim, 0, 0);
  }

  const opened = await openStore(t, home);
  assert.equal((await opened.delivery.catalog.list()).length, 1);
});

test("a temp or partial hard-linked to a file other than its own blob refuses start-up, and nothing changes", async (t) => {
  for (const where of ["blob temp", "partial"] as const) {
    const { home, layout, stageId } = await populatedHome(t);
    // A stored blob, and a second file (not that blob) linked from outside the store and planted
    // under a name recovery would take for that blob's interrupted publication.
    const stored = skillManifest().manifest.components[0]!.blob.digest;
    const hex = stored.slice("sha256:".length);
    const outside = path.join(home, "outside-file");
    fs.writeFileSync(outside, "someone else's bytes", { mode: 0o600 });
    const planted = where === "blob temp" ? path.join(layout.shardDir(stored), `.tmp-${hex}.${"3".repeat(16)}`) : path.join(layout.stageDir(stageId), `${hex}.partial`);
    fs.linkSync(outside, planted);
    assert.equal(fs.lstatSync(layout.blobPath(stored)).nlink, 1, "the blob is another inode");
    await assertRefused(home, layout, "unsafe-storage-hard-link", planted);
    assert.equal(fs.readFileSync(outside, "utf8"), "someone else's bytes");
  }
});

test("an unreferenced blob is collected on reopen; referenced ones stay", async (t) => {
  const { home, layout } = await populatedHome(t);
  const orphan = new TextEncoder().encode("orphaned before commit authority");
  const ref = { digest: sha256Digest(orphan), byte_len: orphan.byteLength };
  assert.equal(await new EmbeddedBlobStore(layout).put(ref, orphan), true);
  const before = treeOf(layout.blobsDir).filter((p) => !p.endsWith("/")).length;
  const opened = await openStore(t, home);
  assert.equal(opened.delivery.recovery?.collectedBlobs, 1);
  assert.equal(fs.existsSync(layout.blobPath(ref.digest)), false);
  assert.equal(treeOf(layout.blobsDir).filter((p) => !p.endsWith("/")).length, before - 1);
  const { manifest, blobs } = skillManifest();
  for (const c of manifest.components) assert.deepEqual(new Uint8Array(await opened.delivery.reads.openBlob(c.blob)), blobs.get(c.blob.digest));
});

test("an oversized stage directory is refused before any stage in it is read", async (t) => {
  const { home, layout } = await populatedHome(t);
  // Each extra directory holds a file that would fail the audit by name if it were read.
  for (let i = 0; i < 2 * 16; i++) {
    const dir = path.join(layout.stagesDir, i.toString(16).padStart(32, "f"));
    fs.mkdirSync(dir, { mode: 0o700 });
    fs.writeFileSync(path.join(dir, "not-read-before-bound"), "", { mode: 0o600 });
  }
  await assertRefused(home, layout, "delivery-stage-dir-oversized", layout.stagesDir);
});

test("a database written by a newer schema is refused, not migrated", async (t) => {
  const { home, layout } = await populatedHome(t);
  const db = new Database(layout.dbPath);
  db.pragma("user_version = 99");
  db.close();
  const error = await rejectsWith(openEmbeddedDelivery(home), "database-schema-too-new");
  assert.equal(error.status, 503);
  // The lock was released with the failed open.
  const again = await rejectsWith(openEmbeddedDelivery(home), "database-schema-too-new");
  assert.ok(again);
});
