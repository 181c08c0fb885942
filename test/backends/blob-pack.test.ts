/**
 * Blob packs through the Delivery service, on every backend (DESIGN.md "Blob packs"): each frame
 * applied as the chunk it carries would be; a failure at frame k keeps the frames before it,
 * applies none after it and names the frame; framing cut short is `blob-pack-invalid`; a whole
 * pack replayed after a lost reply doubles nothing.
 */
import { describe, test } from "node:test";
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { encodePack, type PackChunk } from "../../src/delivery/blob-pack-frame.js";
import type { Delivery } from "../../src/delivery/service.js";
import { sha256Digest } from "../../src/core/digest.js";
import { rejectsWith } from "../delivery/store-harness.js";
import { backendsUnderTest, uniqueBundle } from "./harness.js";

/** The stage's offsets by digest (absent: the blob is whole). */
async function offsets(delivery: Delivery, stageId: string): Promise<Map<string, number>> {
  return new Map((await delivery.status(stageId)).missing.map((m) => [m.digest, m.offset]));
}

/** The bundle's own data files (uniqueBundle's sizes, in order) with their bytes. */
function dataBlobs(built: ReturnType<typeof uniqueBundle>): { digest: string; bytes: Uint8Array }[] {
  return built.manifest.components.filter((c) => c.relative_path.startsWith("data/")).map((c) => ({ digest: c.blob.digest, bytes: built.blobs.get(c.blob.digest)! }));
}

/** A body handed over in pieces of `size` bytes, as a socket hands it. */
async function* inPieces(bytes: Uint8Array, size: number): AsyncIterable<Uint8Array> {
  for (let at = 0; at < bytes.byteLength; at += size) yield bytes.subarray(at, Math.min(at + size, bytes.byteLength));
}

/** Every blob still missing, whole, in one pack. */
async function uploadRest(delivery: Delivery, stageId: string, built: ReturnType<typeof uniqueBundle>): Promise<void> {
  const frames = (await delivery.status(stageId)).missing.map((m) => ({ digest: m.digest, offset: m.offset, bytes: built.blobs.get(m.digest)!.subarray(m.offset) }));
  await delivery.putPack(stageId, encodePack(frames));
}

for (const backend of backendsUnderTest()) {
  describe(`blob packs on ${backend.name}`, () => {
    backend.hooks();

    test("a pack of whole blobs, split across pieces anywhere, commits; a replay of it doubles nothing", async (t) => {
      const { delivery } = await (await backend.state(t)).open();
      const built = uniqueBundle([3_000, 70_000, 1, 5_000]);
      const begun = await delivery.begin(built.manifest);
      const frames: PackChunk[] = begun.missing.map((m) => ({ digest: m.digest, offset: 0, bytes: built.blobs.get(m.digest)! }));
      const body = encodePack(frames);
      // Pieces of 1 009 bytes cut headers and data at every place a socket could.
      assert.deepEqual(await delivery.putPack(begun.stage_id, inPieces(body, 1_009)), { frames: frames.length });
      assert.deepEqual([...(await offsets(delivery, begun.stage_id))], []);
      // The reply was lost: the same pack again is accepted whole, nothing is written twice.
      assert.deepEqual(await delivery.putPack(begun.stage_id, body, { declaredBytes: body.byteLength }), { frames: frames.length });
      const receipt = await delivery.commit(begun.stage_id);
      assert.equal(receipt.manifest_digest, built.manifest.manifest_digest);
      for (const c of built.manifest.components) assert.deepEqual(new Uint8Array(await delivery.reads.openBlob(c.blob)), new Uint8Array(built.blobs.get(c.blob.digest)!));
      // An empty pack is a pack of no frames.
      const other = await delivery.begin(uniqueBundle([10]).manifest);
      assert.deepEqual(await delivery.putPack(other.stage_id, new Uint8Array(0)), { frames: 0 });
    });

    test("frames continue blobs from their offsets; a zero-length frame is an empty chunk; an empty blob is never asked for", async (t) => {
      const { delivery } = await (await backend.state(t)).open();
      const built = uniqueBundle([40_000, 0, 2_000]);
      const begun = await delivery.begin(built.manifest);
      const [big, none, small] = dataBlobs(built);
      // The empty file's blob is stored at begin: it is never asked for.
      assert.equal(begun.missing.some((m) => m.digest === none!.digest), false);
      assert.equal(none!.digest, sha256Digest(new Uint8Array(0)));
      await delivery.putChunk(begun.stage_id, big!.digest, 0, big!.bytes.subarray(0, 10_000));
      const pack = encodePack([
        { digest: big!.digest, offset: 10_000, bytes: big!.bytes.subarray(10_000, 25_000) },
        { digest: small!.digest, offset: 0, bytes: new Uint8Array(0) },
        { digest: big!.digest, offset: 25_000, bytes: big!.bytes.subarray(25_000) },
        { digest: small!.digest, offset: 0, bytes: small!.bytes },
      ]);
      assert.deepEqual(await delivery.putPack(begun.stage_id, pack), { frames: 4 });
      const now = await offsets(delivery, begun.stage_id);
      assert.deepEqual([now.has(big!.digest), now.has(small!.digest)], [false, false]);
      const empty = none!.digest;
      // A frame naming the empty blob is refused as its chunk would be: the stage does not expect it.
      const refused = await rejectsWith(delivery.putPack(begun.stage_id, encodePack([{ digest: empty, offset: 0, bytes: new Uint8Array(0) }])), "stage-blob-not-found");
      assert.equal(refused.details.frame, 0);
      await uploadRest(delivery, begun.stage_id, built);
      await delivery.commit(begun.stage_id);
    });

    test("an empty chunk where a blob stands, then the chunk that starts there (per blob, no pack)", async (t) => {
      const { delivery } = await (await backend.state(t)).open();
      const built = uniqueBundle([3_000]);
      const begun = await delivery.begin(built.manifest);
      const [blob] = dataBlobs(built);
      assert.equal((await delivery.putChunk(begun.stage_id, blob!.digest, 0, new Uint8Array(0))).next_offset, 0);
      assert.equal((await delivery.putChunk(begun.stage_id, blob!.digest, 0, blob!.bytes)).next_offset, 3_000);
      await uploadRest(delivery, begun.stage_id, built);
      await delivery.commit(begun.stage_id);
    });

    test("a failure at frame k keeps the frames before it, applies none after, and names the frame", async (t) => {
      const { delivery } = await (await backend.state(t)).open();
      const built = uniqueBundle([4_000, 5_000, 6_000, 7_000]);
      const begun = await delivery.begin(built.manifest);
      const [a, b, c, d] = dataBlobs(built);
      const whole = (x: typeof a): PackChunk => ({ digest: x!.digest, offset: 0, bytes: x!.bytes });

      // Out of order at frame 1 (b at 100 while it stands at 0): a kept, c not applied.
      const early = await rejectsWith(
        delivery.putPack(begun.stage_id, encodePack([whole(a), { digest: b!.digest, offset: 100, bytes: b!.bytes.subarray(100) }, whole(c)])),
        "chunk-out-of-order",
      );
      assert.equal(early.status, 409);
      assert.deepEqual([early.details.frame, early.details.digest, early.details.expected_offset], [1, b!.digest, 0]);
      let now = await offsets(delivery, begun.stage_id);
      assert.equal(now.has(a!.digest), false, "frame 0 applied");
      assert.equal(now.get(c!.digest), 0, "frame 2 not applied");

      // Overflow at frame 1: past the blob's length.
      const over = await rejectsWith(
        delivery.putPack(begun.stage_id, encodePack([{ digest: b!.digest, offset: 0, bytes: b!.bytes.subarray(0, 1_000) }, { digest: b!.digest, offset: 1_000, bytes: new Uint8Array(b!.bytes.byteLength) }, whole(c)])),
        "chunk-overflow",
      );
      assert.deepEqual([over.status, over.details.frame, over.details.digest], [413, 1, b!.digest]);
      now = await offsets(delivery, begun.stage_id);
      assert.equal(now.get(b!.digest), 1_000, "frame 0 kept");
      assert.equal(now.get(c!.digest), 0);

      // A bad digest at frame 1: c restarts at 0, d (frame 2) is not applied.
      const tampered = Uint8Array.from(c!.bytes);
      tampered[10] = tampered[10]! ^ 1;
      const mismatch = await rejectsWith(
        delivery.putPack(begun.stage_id, encodePack([{ digest: b!.digest, offset: 1_000, bytes: b!.bytes.subarray(1_000) }, { digest: c!.digest, offset: 0, bytes: tampered }, whole(d)])),
        "blob-digest-mismatch",
      );
      assert.deepEqual([mismatch.status, mismatch.details.frame, mismatch.details.digest, mismatch.details.expected_offset], [422, 1, c!.digest, 0]);
      now = await offsets(delivery, begun.stage_id);
      assert.equal(now.has(b!.digest), false);
      assert.deepEqual([now.get(c!.digest), now.get(d!.digest)], [0, 0]);

      // A blob the stage does not expect, at frame 1.
      const stranger = { digest: sha256Digest(randomBytes(8)), offset: 0, bytes: new Uint8Array(8) };
      const unknown = await rejectsWith(delivery.putPack(begun.stage_id, encodePack([whole(c), stranger, whole(d)])), "stage-blob-not-found");
      assert.deepEqual([unknown.status, unknown.details.frame, unknown.details.digest], [404, 1, stranger.digest]);
      now = await offsets(delivery, begun.stage_id);
      assert.deepEqual([now.has(c!.digest), now.get(d!.digest)], [false, 0]);

      await delivery.putPack(begun.stage_id, encodePack([whole(d)]));
      await uploadRest(delivery, begun.stage_id, built);
      await delivery.commit(begun.stage_id);
    });

    test("framing cut short is blob-pack-invalid at that frame; a pack over the chunk limit is chunk-too-large", async (t) => {
      const { delivery } = await (await backend.state(t)).open({ limits: { chunkBytes: 16 * 1024 } });
      const built = uniqueBundle([3_000, 4_000]);
      const begun = await delivery.begin(built.manifest);
      const [a, b] = dataBlobs(built).map((x) => ({ ...x, offset: 0 }));
      const body = encodePack([a!, b!]);
      const firstEnd = 44 + a!.bytes.byteLength;
      for (const cut of [firstEnd + 10, firstEnd + 44 + 100]) {
        // Ended inside frame 1's header, then inside its data; with and without a declared length.
        for (const declared of [cut, undefined]) {
          const error = await rejectsWith(delivery.putPack(begun.stage_id, inPieces(body.subarray(0, cut), 700), { declaredBytes: declared }), "blob-pack-invalid");
          assert.deepEqual([error.status, error.details.frame], [400, 1]);
        }
        const now = await offsets(delivery, begun.stage_id);
        assert.equal(now.has(a!.digest), false, "frame 0 kept");
        assert.equal(now.get(b!.digest), 0, "nothing of the cut frame kept");
      }
      // The sender went away inside frame 1's data, and inside frame 1's header: what a chunk cut off is.
      for (const cut of [firstEnd + 44 + 100, firstEnd + 20]) {
        const aborted = async function* (): AsyncIterable<Uint8Array> {
          yield* inPieces(body.subarray(0, cut), 900);
          throw Object.assign(new Error("aborted"), { code: "ECONNRESET" });
        };
        const error = await rejectsWith(delivery.putPack(begun.stage_id, aborted(), { declaredBytes: body.byteLength }), "chunk-body-aborted");
        assert.deepEqual([error.status, error.details.frame], [400, 1]);
        assert.equal((await offsets(delivery, begun.stage_id)).get(b!.digest), 0, "nothing of the cut frame kept");
      }
      const tooLarge = await rejectsWith(delivery.putPack(begun.stage_id, new Uint8Array(16 * 1024 + 1)), "chunk-too-large");
      assert.equal(tooLarge.status, 413);
      // A declared length over the limit is refused before a byte is read.
      await rejectsWith(delivery.putPack(begun.stage_id, inPieces(new Uint8Array(16 * 1024 + 1), 4096), { declaredBytes: 16 * 1024 + 1 }), "chunk-too-large");
      await delivery.putPack(begun.stage_id, encodePack([b!]));
      await uploadRest(delivery, begun.stage_id, built);
      await delivery.commit(begun.stage_id);
    });
  });
}
