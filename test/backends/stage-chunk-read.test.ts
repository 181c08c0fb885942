/**
 * A chunk reads one blob of its stage, not all of them (issue #34), on every backend: a push of N
 * blobs must not read the whole stage record per chunk (O(N²) in all), and the narrow read keeps
 * every refusal the whole read made (stage gone, committed, expired, blob not in the stage).
 */
import { describe, test, type TestContext } from "node:test";
import assert from "node:assert/strict";
import { sha256Digest } from "../../src/core/digest.js";
import { EmbeddedStageStore } from "../../src/backends/embedded/delivery/delivery-stage-store.js";
import { PostgresStageStore } from "../../src/backends/postgres/stage-store.js";
import { encodePack } from "../../src/delivery/blob-pack-frame.js";
import type { StageRecord } from "../../src/delivery/stage.js";
import { rejectsWith } from "../delivery/store-harness.js";
import { backendsUnderTest, uniqueBundle } from "./harness.js";

/** Blobs of the pushed bundle: enough that a whole read per chunk shows, few enough to take seconds. */
const BLOBS = Number(process.env.WARDEN_TEST_STAGE_READ_BLOBS ?? 200);

/** Counts whole-stage reads (`StageStore.get`) on both backends' stores until the test ends. */
function countWholeReads(t: TestContext): () => number {
  let reads = 0;
  const wrap = (proto: { get(stageId: string): Promise<StageRecord | undefined> }): void => {
    const get = proto.get;
    proto.get = async function (this: unknown, stageId: string) {
      reads++;
      return get.call(this, stageId);
    };
    t.after(() => {
      proto.get = get;
    });
  };
  wrap(EmbeddedStageStore.prototype);
  wrap(PostgresStageStore.prototype);
  return () => reads;
}

for (const backend of backendsUnderTest()) {
  describe(`chunk reads on ${backend.name}`, () => {
    backend.hooks();

    test(`a push of ${BLOBS} blobs, by chunks and by packs, reads no whole stage per chunk`, async (t) => {
      const { delivery } = await (await backend.state(t)).open({ limits: { bundleComponents: BLOBS + 3 } });
      const built = uniqueBundle(Array.from({ length: BLOBS }, (_, i) => 200 + i));
      const begun = await delivery.begin(built.manifest);
      assert.ok(begun.missing.length > BLOBS, "every file of the bundle is missing");
      const reads = countWholeReads(t);
      let chunks = 0;
      const half = Math.floor(begun.missing.length / 2);
      // The first half one chunk at a time, each blob in two chunks...
      for (const missing of begun.missing.slice(0, half)) {
        const bytes = built.blobs.get(missing.digest)!;
        const cut = Math.floor(bytes.byteLength / 2);
        assert.equal((await delivery.putChunk(begun.stage_id, missing.digest, 0, bytes.subarray(0, cut))).next_offset, cut);
        assert.equal((await delivery.putChunk(begun.stage_id, missing.digest, cut, bytes.subarray(cut))).next_offset, bytes.byteLength);
        chunks += 2;
      }
      // ...and the rest in packs of 20 frames.
      const rest = begun.missing.slice(half);
      for (let at = 0; at < rest.length; at += 20) {
        const frames = rest.slice(at, at + 20).map((m) => ({ digest: m.digest, offset: 0, bytes: built.blobs.get(m.digest)! }));
        assert.equal((await delivery.putPack(begun.stage_id, encodePack(frames))).frames, frames.length);
        chunks += frames.length;
      }
      // The embedded store's inline commit check reads the stage once, at its first chunk; a read
      // per chunk would be `chunks` reads.
      assert.ok(reads() <= 1, `${reads()} whole-stage reads for ${chunks} chunks (want at most 1)`);
      assert.deepEqual((await delivery.status(begun.stage_id)).missing, []);
      const receipt = await delivery.commit(begun.stage_id);
      assert.equal(receipt.manifest_digest, built.manifest.manifest_digest);
    });

    test(`a stage resumed by another process (no inline check can run for it) reads no whole stage per chunk either`, async (t) => {
      const state = await backend.state(t);
      const limits = { bundleComponents: BLOBS + 3 };
      const built = uniqueBundle(Array.from({ length: BLOBS }, (_, i) => 200 + i));
      const first = await state.open({ limits });
      const begun = await first.delivery.begin(built.manifest);
      const opening = begun.missing[0]!;
      await first.delivery.putChunk(begun.stage_id, opening.digest, 0, built.blobs.get(opening.digest)!.subarray(0, 100));
      await first.close();
      // A stage with bytes already received gets no inline check in a process that did not see
      // them; its chunks must not then look for one, whole stage and all, each time.
      const { delivery } = await state.open({ limits });
      const resumed = await delivery.begin(built.manifest);
      const reads = countWholeReads(t);
      let chunks = 0;
      for (const m of resumed.missing) {
        const bytes = built.blobs.get(m.digest)!;
        assert.equal((await delivery.putChunk(resumed.stage_id, m.digest, m.offset, bytes.subarray(m.offset))).next_offset, bytes.byteLength);
        chunks++;
      }
      assert.ok(reads() <= 1, `${reads()} whole-stage reads for ${chunks} chunks (want at most 1)`);
      const receipt = await delivery.commit(resumed.stage_id);
      assert.equal(receipt.manifest_digest, built.manifest.manifest_digest);
    });

    test("a chunk is refused as before: blob not in the stage, expired, aborted, committed", async (t) => {
      const expiry = 60_000;
      let ahead = 0;
      const { delivery } = await (await backend.state(t)).open({ limits: { stageExpiryMs: expiry }, now: () => new Date(Date.now() + ahead) });
      const built = uniqueBundle([3_000, 2_000]);
      const begun = await delivery.begin(built.manifest);
      const first = begun.missing.find((m) => m.byte_len === 3_000);
      const second = begun.missing.find((m) => m.byte_len === 2_000);
      const bytes = built.blobs.get(first!.digest)!;

      const stranger = sha256Digest("not a blob of this stage");
      const unknown = await rejectsWith(delivery.putChunk(begun.stage_id, stranger, 0, new Uint8Array(4)), "stage-blob-not-found");
      assert.equal(unknown.details.digest, stranger);
      const packed = await rejectsWith(delivery.putPack(begun.stage_id, encodePack([{ digest: stranger, offset: 0, bytes: new Uint8Array(4) }])), "stage-blob-not-found");
      assert.equal(packed.details.frame, 0);
      // A stage id nobody began.
      await rejectsWith(delivery.putChunk("0".repeat(32), first!.digest, 0, bytes), "stage-not-found");

      assert.equal((await delivery.putChunk(begun.stage_id, first!.digest, 0, bytes.subarray(0, 1_000))).next_offset, 1_000);
      // Activity moves expiry on: just short of it the stage still takes chunks...
      ahead = expiry - 1_000;
      assert.equal((await delivery.putChunk(begun.stage_id, first!.digest, 1_000, bytes.subarray(1_000, 2_000))).next_offset, 2_000);
      // ...and a full period after the last one it is expired, for chunks as for status.
      ahead += expiry;
      await rejectsWith(delivery.putChunk(begun.stage_id, first!.digest, 2_000, bytes.subarray(2_000)), "stage-expired");
      await rejectsWith(delivery.putChunk(begun.stage_id, stranger, 0, new Uint8Array(4)), "stage-expired");
      await rejectsWith(delivery.status(begun.stage_id), "stage-expired");

      ahead = 0;
      const again = await delivery.begin(built.manifest);
      await delivery.abort(again.stage_id);
      await rejectsWith(delivery.putChunk(again.stage_id, first!.digest, 0, bytes), "stage-not-found");

      const third = await delivery.begin(built.manifest);
      for (const m of third.missing) await delivery.putChunk(third.stage_id, m.digest, 0, built.blobs.get(m.digest)!);
      await delivery.commit(third.stage_id);
      await rejectsWith(delivery.putChunk(third.stage_id, second!.digest, 0, built.blobs.get(second!.digest)!), "stage-committed");
      await rejectsWith(delivery.putPack(third.stage_id, encodePack([{ digest: second!.digest, offset: 0, bytes: built.blobs.get(second!.digest)! }])), "stage-committed");
    });
  });
}
