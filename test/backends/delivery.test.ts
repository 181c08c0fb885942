/**
 * Delivery behaviours through the Delivery service, identical on every backend: begin, chunked
 * upload, commit and receipt replay, chunk ordering rules, resume across a restart, dedupe of
 * stored bytes, tamper detection, conflicts and capacity.
 */
import { describe, test } from "node:test";
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import type { Digest } from "../../src/core/digest.js";
import { buildManifest, bytesOf, rejectsWith, skillManifest, uploadMissing } from "../delivery/store-harness.js";
import { backendsUnderTest, commitWhole, uniqueBundle } from "./harness.js";

const enc = (s: string): Uint8Array => new TextEncoder().encode(s);

for (const backend of backendsUnderTest()) {
  describe(`delivery on ${backend.name}`, () => {
    backend.hooks();

    test("begin, chunked upload and commit; commit, begin and status replay the same receipt", async (t) => {
      const { delivery } = await (await backend.state(t)).open();
      const built = uniqueBundle();
      const begun = await delivery.begin(built.manifest);
      assert.equal(begun.committed, false);
      // Asked for in the order the manifest lists the files (a file's blob where it first appears).
      assert.deepEqual(
        begun.missing.map((m) => [m.digest, m.offset]),
        [...new Set(built.manifest.components.map((c) => c.blob.digest))].map((d) => [d, 0]),
      );
      assert.equal((await delivery.begin(built.manifest)).stage_id, begun.stage_id, "the same manifest resumes the same stage");
      await rejectsWith(delivery.commit(begun.stage_id), "stage-incomplete");
      await uploadMissing(delivery, begun, built.blobs, 7_000);
      const receipt = await delivery.commit(begun.stage_id);
      assert.equal(receipt.manifest_digest, built.manifest.manifest_digest);
      assert.deepEqual(await delivery.commit(begun.stage_id), receipt);
      const again = await delivery.begin(built.manifest);
      assert.equal(again.committed, true);
      assert.deepEqual(again.committed && again.receipt, receipt);
      assert.equal(again.stage_id, begun.stage_id);
      assert.deepEqual((await delivery.status(begun.stage_id)).receipt, receipt);
      assert.deepEqual(await delivery.reads.getManifest(built.manifest.bundle_id, "r1"), built.manifest);
      for (const c of built.manifest.components) {
        assert.deepEqual(new Uint8Array(await delivery.reads.openBlob(c.blob)), new Uint8Array(built.blobs.get(c.blob.digest)!));
      }
      const shown = await delivery.catalog.show(built.manifest.bundle_id);
      assert.deepEqual(shown.revisions.map((r) => [r.revision, r.receipt]), [["r1", receipt]]);
    });

    test("chunks: out of order refused with the expected offset, exact replays accepted, overflow and digest mismatch", async (t) => {
      const { delivery } = await (await backend.state(t)).open();
      const data = bytesOf(Date.now() % 100_000, 30_000);
      const built = buildManifest([{ path: "data/a.bin", content: data }], `chunks-${randomBytes(4).toString("hex")}`);
      const begun = await delivery.begin(built.manifest);
      const digest = begun.missing[0]!.digest;
      const early = await rejectsWith(delivery.putChunk(begun.stage_id, digest, 5, data.subarray(5, 10)), "chunk-out-of-order");
      assert.equal(early.details.expected_offset, 0);
      assert.equal((await delivery.putChunk(begun.stage_id, digest, 0, data.subarray(0, 10_000))).next_offset, 10_000);
      assert.equal((await delivery.putChunk(begun.stage_id, digest, 10_000, data.subarray(10_000, 20_000))).next_offset, 20_000);
      // An exact replay of an earlier chunk answers that chunk's end and writes nothing.
      assert.equal((await delivery.putChunk(begun.stage_id, digest, 10_000, data.subarray(10_000, 20_000))).next_offset, 20_000);
      assert.equal((await delivery.putChunk(begun.stage_id, digest, 0, data.subarray(0, 10_000))).next_offset, 10_000);
      const wrong = await rejectsWith(delivery.putChunk(begun.stage_id, digest, 0, enc("wrong")), "chunk-out-of-order");
      assert.equal(wrong.details.expected_offset, 20_000);
      await rejectsWith(delivery.putChunk(begun.stage_id, digest, 20_000, new Uint8Array(10_001)), "chunk-overflow");
      assert.equal((await delivery.status(begun.stage_id)).missing[0]!.offset, 20_000);
      // The last chunk with one byte flipped: refused 422, and the blob restarts at 0.
      const flipped = new Uint8Array(data.subarray(20_000));
      flipped[0]! ^= 1;
      const mismatch = await rejectsWith(delivery.putChunk(begun.stage_id, digest, 20_000, flipped), "blob-digest-mismatch");
      assert.equal(mismatch.status, 422);
      assert.equal((await delivery.status(begun.stage_id)).missing[0]!.offset, 0);
      await uploadMissing(delivery, await delivery.begin(built.manifest), built.blobs, 12_000);
      assert.equal((await delivery.commit(begun.stage_id)).bundle_digest, built.manifest.bundle_digest);
    });

    test("an upload resumes after a restart from its durable offset", async (t) => {
      const state = await backend.state(t);
      const first = await state.open();
      const built = uniqueBundle([40_000]);
      const begun = await first.delivery.begin(built.manifest);
      const big = begun.missing.find((m) => m.byte_len === 40_000)!;
      await first.delivery.putChunk(begun.stage_id, big.digest, 0, built.blobs.get(big.digest)!.subarray(0, 15_000));
      await first.close();

      const second = await state.open();
      const resumed = await second.delivery.begin(built.manifest);
      assert.equal(resumed.stage_id, begun.stage_id);
      assert.equal(resumed.missing.find((m) => m.digest === big.digest)?.offset, 15_000);
      const sent = await uploadMissing(second.delivery, resumed, built.blobs, 10_000);
      const others = begun.missing.filter((m) => m.digest !== big.digest).reduce((n, m) => n + m.byte_len, 0);
      assert.equal(sent, 25_000 + others, "only the bytes not yet received travelled");
      assert.equal((await second.delivery.commit(begun.stage_id)).manifest_digest, built.manifest.manifest_digest);
    });

    test("bytes already stored are never asked for again", async (t) => {
      const { delivery } = await (await backend.state(t)).open();
      const shared = bytesOf(Date.now() % 99_991, 25_000);
      const tag = randomBytes(4).toString("hex");
      const a = buildManifest([{ path: "data/shared.bin", content: shared }], `dedupe-a-${tag}`);
      const b = buildManifest(
        [
          { path: "data/shared.bin", content: shared },
          { path: "data/new.bin", content: bytesOf(7 + (Date.now() % 1000), 5_000) },
        ],
        `dedupe-b-${tag}`,
      );
      await commitWhole(delivery, a);
      const begun = await delivery.begin(b.manifest);
      assert.deepEqual(begun.missing.map((m) => m.byte_len), [5_000]);
      assert.equal(await uploadMissing(delivery, begun, b.blobs), 5_000);
      await delivery.commit(begun.stage_id);
    });

    test("a stored blob with edited bytes is never served and is asked for again", async (t) => {
      const state = await backend.state(t);
      const { delivery } = await state.open();
      const built = uniqueBundle([20_000]);
      await commitWhole(delivery, built);
      const target = built.manifest.components.find((c) => c.blob.byte_len === 20_000)!.blob;
      await state.editBlob(target.digest, (bytes) => {
        const copy = Buffer.from(bytes);
        copy[100]! ^= 0xff;
        return copy;
      });
      await rejectsWith(delivery.reads.openBlob(target), "blob-tampered");
      // The next bundle that needs the blob finds it damaged and asks for it.
      const next = skillManifest(`${built.manifest.bundle_id}-next`, "r1", [{ path: "data/again.bin", content: built.blobs.get(target.digest)! }]);
      const begun = await delivery.begin(next.manifest);
      assert.ok(begun.missing.some((m) => m.digest === target.digest && m.offset === 0));
      await uploadMissing(delivery, begun, next.blobs);
      await delivery.commit(begun.stage_id);
      assert.deepEqual(new Uint8Array(await delivery.reads.openBlob(target)), new Uint8Array(built.blobs.get(target.digest)!));
    });

    for (const [what, edit] of [
      ["a byte appended", (bytes: Buffer) => Buffer.concat([bytes, Buffer.from("x")])],
      ["a byte changed", (bytes: Buffer) => Buffer.from(bytes.map((b, i) => (i === 100 ? b ^ 0xff : b)))],
    ] as const) {
      test(`received bytes tampered between upload and commit (${what}) fail the commit, and the stage asks for them again`, async (t) => {
        const state = await backend.state(t);
        const { delivery } = await state.open();
        const built = uniqueBundle([12_000]);
        const begun = await delivery.begin(built.manifest);
        await uploadMissing(delivery, begun, built.blobs);
        const target = begun.missing.find((m) => m.byte_len === 12_000)!;
        await state.editPartial(begun.stage_id, target.digest as Digest, edit);
        await rejectsWith(delivery.commit(begun.stage_id), "blob-tampered");
        assert.deepEqual(await delivery.catalog.list().then((l) => l.filter((b) => b.bundle_id === built.manifest.bundle_id)), []);
        assert.deepEqual((await delivery.status(begun.stage_id)).missing.map((m) => [m.digest, m.offset]), [[target.digest, 0]]);
        await rejectsWith(delivery.reads.openBlob(target), "blob-not-found");
        await uploadMissing(delivery, await delivery.begin(built.manifest), built.blobs);
        assert.equal((await delivery.commit(begun.stage_id)).bundle_id, built.manifest.bundle_id);
        assert.deepEqual(new Uint8Array(await delivery.reads.openBlob(target)), new Uint8Array(built.blobs.get(target.digest)!));
      });
    }

    test("a stored blob tampered before a commit that reuses it fails that commit, and the stage asks for it again", async (t) => {
      const state = await backend.state(t);
      const { delivery } = await state.open();
      const built = uniqueBundle([12_000]);
      const target = built.manifest.components.find((c) => c.blob.byte_len === 12_000)!.blob;
      const first = skillManifest(`${built.manifest.bundle_id}-first`, "r1", [{ path: "data/shared.bin", content: built.blobs.get(target.digest)! }]);
      await commitWhole(delivery, first);
      const begun = await delivery.begin(built.manifest);
      assert.ok(!begun.missing.some((m) => m.digest === target.digest), "the stored blob is not asked for");
      await uploadMissing(delivery, begun, built.blobs);
      await state.editBlob(target.digest, (bytes) => Buffer.concat([bytes, Buffer.from("x")]));
      await rejectsWith(delivery.commit(begun.stage_id), "blob-tampered");
      assert.deepEqual((await delivery.status(begun.stage_id)).missing.map((m) => [m.digest, m.offset]), [[target.digest, 0]]);
      await uploadMissing(delivery, await delivery.begin(built.manifest), built.blobs);
      assert.equal((await delivery.commit(begun.stage_id)).bundle_id, built.manifest.bundle_id);
    });

    test("the same revision with other content is a conflict; abort removes a stage", async (t) => {
      const { delivery } = await (await backend.state(t)).open();
      const built = uniqueBundle([3_000]);
      await commitWhole(delivery, built);
      const other = skillManifest(built.manifest.bundle_id, "r1", [{ path: "data/other.bin", content: bytesOf(99, 100) }]);
      await rejectsWith(delivery.begin(other.manifest), "revision-conflict");
      const r2 = skillManifest(built.manifest.bundle_id, "r2", [{ path: "data/other.bin", content: bytesOf(98, 100) }]);
      const staged = await delivery.begin(r2.manifest);
      await delivery.abort(staged.stage_id);
      await rejectsWith(delivery.status(staged.stage_id), "stage-not-found");
    });

    // Two stages of one revision with other content can both be begun (neither is committed yet);
    // the second commit must then be refused at the record, where only the store can see the race.
    test("the same (bundle_id, revision) with other content is a conflict at commit (both begun first) and at begin; the first stays", async (t) => {
      const { delivery } = await (await backend.state(t)).open();
      const bundleId = `race-${randomBytes(4).toString("hex")}`;
      const one = skillManifest(bundleId, "r1", [{ path: "docs/a.md", content: "one\n" }]);
      const two = skillManifest(bundleId, "r1", [{ path: "docs/a.md", content: "two\n" }]);
      const stageOne = await delivery.begin(one.manifest);
      const stageTwo = await delivery.begin(two.manifest);
      await uploadMissing(delivery, stageOne, one.blobs);
      await uploadMissing(delivery, stageTwo, two.blobs);
      await delivery.commit(stageOne.stage_id);
      const atCommit = await rejectsWith(delivery.commit(stageTwo.stage_id), "revision-conflict");
      assert.equal(atCommit.status, 409);
      assert.equal(atCommit.details.committed_manifest_digest, one.manifest.manifest_digest);
      await rejectsWith(delivery.begin(two.manifest), "revision-conflict");
      const listed = (await delivery.catalog.list()).filter((b) => b.bundle_id === bundleId);
      assert.deepEqual(listed.map((b) => b.revisions.map((r) => r.manifest_digest)), [[one.manifest.manifest_digest]]);
      assert.equal((await delivery.begin(one.manifest)).committed, true, "the first commit still answers its receipt");
    });

    // The manifest text stored with a commit or a stage is trusted only once its digest matches the
    // one it is stored under: edited, cut short or replaced, it is a damaged record (500,
    // delivery-record-corrupt) wherever a node reads it, never parsed into something else. A
    // damaged stage is found at start-up (the node looks at every stage it holds) and refuses it.
    for (const [what, edit] of [
      ["a field changed", (text: string) => text.replace(/"revision":"r1"/, '"revision":"r9"')],
      ["cut short", (text: string) => text.slice(0, text.length >> 1)],
      ["replaced by null", () => "null"],
    ] as const) {
      test(`a stored manifest ${what} is a damaged record, on a commit and on a stage`, async (t) => {
        const state = await backend.state(t, { isolated: true });
        const first = await state.open();
        const committed = uniqueBundle([3_000]);
        const stageId = await commitWhole(first.delivery, committed);
        const staged = uniqueBundle([4_000]);
        const begun = await first.delivery.begin(staged.manifest);
        await first.close();
        const changed = (text: string): string => {
          assert.notEqual(edit(text), text, "the edit changes the stored text");
          return edit(text);
        };
        await state.editStoredManifest("commit", stageId, changed);
        // A node started afterwards has nothing cached: it reads what is stored now.
        const second = await state.open();
        for (const read of [
          () => second.delivery.catalog.show(committed.manifest.bundle_id),
          () => second.delivery.reads.getManifest(committed.manifest.bundle_id, "r1"),
          () => second.delivery.status(stageId),
          () => second.delivery.begin(committed.manifest),
        ]) {
          assert.equal((await rejectsWith(read(), "delivery-record-corrupt")).status, 500);
        }
        assert.equal((await second.delivery.status(begun.stage_id)).missing.length, 1, "the intact stage still answers");
        await second.close();
        await state.editStoredManifest("stage", begun.stage_id, changed);
        const refused = await rejectsWith(state.open(), "delivery-record-corrupt");
        assert.match(refused.message, new RegExp(begun.stage_id));
      });
    }

    test("capacity: active stages and staged bytes refuse with their own codes and delete nothing", async (t) => {
      const { delivery } = await (await backend.state(t, { isolated: true })).open({ limits: { activeStages: 2, stagedBytes: 100_000 } });
      const a = buildManifest([{ path: "data/a.bin", content: bytesOf(11, 40_000) }], "bundle-a");
      const b = buildManifest([{ path: "data/b.bin", content: bytesOf(12, 40_000) }], "bundle-b");
      const c = buildManifest([{ path: "data/c.bin", content: bytesOf(13, 30_000) }], "bundle-c");
      const big = buildManifest([{ path: "data/big.bin", content: bytesOf(14, 70_000) }], "bundle-big");
      const stageA = await delivery.begin(a.manifest);
      await delivery.putChunk(stageA.stage_id, stageA.missing[0]!.digest, 0, a.blobs.get(stageA.missing[0]!.digest)!.subarray(0, 1000));
      const bytes = await rejectsWith(delivery.begin(big.manifest), "staged-bytes-exhausted");
      assert.equal(bytes.status, 429);
      const stageB = await delivery.begin(b.manifest);
      const stages = await rejectsWith(delivery.begin(c.manifest), "stage-capacity-exhausted");
      assert.equal(stages.status, 429);
      assert.notEqual(stages.code, bytes.code);
      // Nothing was deleted: both stages are intact, and resuming them is not new work.
      assert.equal((await delivery.status(stageA.stage_id)).missing[0]!.offset, 1000);
      assert.equal((await delivery.begin(b.manifest)).stage_id, stageB.stage_id);
      await uploadMissing(delivery, await delivery.begin(a.manifest), a.blobs);
      await delivery.commit(stageA.stage_id);
      // A committed stage frees its capacity.
      assert.equal((await delivery.begin(c.manifest)).committed, false);
    });
  });
}
