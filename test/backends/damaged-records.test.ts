/**
 * Stored records damaged behind the node's back (an edit by hand, a bad disk, an attacker with
 * access to the storage), on every backend: each is refused as a damaged record with its own
 * code wherever it is read (or refuses start-up, naming it, where start-up reads it), is never
 * used as if it were intact, and leaves every other record answering and unchanged.
 */
import { describe, test } from "node:test";
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { CLAIMS_DATABASE, openEmbeddedBackend } from "../../src/backends/embedded/index.js";
import { openEmbeddedDelivery } from "../../src/backends/embedded/delivery/delivery-backend.js";
import { DB_FILE, DELIVERY_DIR } from "../../src/backends/embedded/delivery/delivery-layout.js";
import { isWardenError } from "../../src/core/errors.js";
import type { ClaimSummary } from "../../src/invocations/types.js";
import { NODE_FILE, removeNodeFile } from "../../src/server/node-file.js";
import { rejectsWith, uploadMissing } from "../delivery/store-harness.js";
import { backendsUnderTest, commitWhole, uniqueBundle } from "./harness.js";

for (const backend of backendsUnderTest()) {
  describe(`damaged records on ${backend.name}`, () => {
    backend.hooks();

    // A stage's blob rows drive the upload (what is missing, offsets, lengths, partial paths): a
    // row that does not fit the stage's manifest is a damaged record, not a length or a path to
    // use. Start-up reads every stage, so a node refuses to start on one, naming it.
    const stageDamages: [string, "stages" | "stage_blobs", (blob: { digest: string; byte_len: number }) => Record<string, unknown>][] = [
      ["a blob row with a length one byte longer", "stage_blobs", (b) => ({ byte_len: b.byte_len + 1 })],
      ["a blob row with a negative length", "stage_blobs", () => ({ byte_len: -5 })],
      ["a blob row with a digest that is a path", "stage_blobs", () => ({ digest: "sha256:../../../../escape" })],
      ["a blob row with a digest not in its manifest", "stage_blobs", () => ({ digest: `sha256:${"ab".repeat(32)}` })],
      ["negative reserved bytes (capacity it never counted)", "stages", () => ({ reserved_bytes: -1_000_000 })],
    ];
    for (const [what, table, set] of stageDamages) {
      test(`a stage with ${what} is a damaged record`, async (t) => {
        const state = await backend.state(t, { isolated: true });
        let clockAhead = 0;
        const first = await state.open({ limits: { activeStages: 3 }, now: () => new Date(Date.now() + clockAhead) });
        const damaged = uniqueBundle([12_000]);
        const begun = await first.delivery.begin(damaged.manifest);
        const blob = begun.missing.find((m) => m.byte_len === 12_000)!;
        const intact = uniqueBundle([4_000]);
        const other = await first.delivery.begin(intact.manifest);
        const where = table === "stages" ? { stage_id: begun.stage_id } : { stage_id: begun.stage_id, digest: blob.digest };
        assert.equal(await state.editRows(table, where, set(blob)), 1);
        if (backend.name === "postgres") {
          // Rows are read on every request here: the running node meets the damage at once.
          for (const read of [
            () => first.delivery.status(begun.stage_id),
            () => first.delivery.begin(damaged.manifest),
            () => first.delivery.putChunk(begun.stage_id, blob.digest, 0, damaged.blobs.get(blob.digest)!.subarray(0, 1000)),
            () => first.delivery.commit(begun.stage_id),
          ]) {
            const refused = await rejectsWith(read(), "delivery-record-corrupt");
            assert.equal(refused.status, 500);
            assert.equal(refused.details.stage_id, begun.stage_id);
          }
          assert.deepEqual((await first.delivery.status(other.stage_id)).missing, other.missing, "the intact stage still answers");
          // Capacity and expiry read each stage's activity, not its whole record: uploads of other
          // bundles go on beside the damaged stage (it still counts as one active stage)...
          const fresh = await first.delivery.begin(uniqueBundle([1_000]).manifest);
          assert.equal(fresh.committed, false);
          await rejectsWith(first.delivery.begin(uniqueBundle([1_000]).manifest), "stage-capacity-exhausted");
          // ...and the expiry sweep removes the others once they expire, leaving the damaged one for
          // an operator to see; aborting it, by its id alone, clears it.
          clockAhead = 20 * 60_000;
          assert.equal(await first.delivery.expire(), 2);
          for (const gone of [other.stage_id, fresh.stage_id]) await rejectsWith(first.delivery.status(gone), "stage-not-found");
          await rejectsWith(first.delivery.status(begun.stage_id), "delivery-record-corrupt");
          await first.delivery.abort(begun.stage_id);
          await rejectsWith(first.delivery.status(begun.stage_id), "stage-not-found");
          await first.close();
          await state.open();
          return;
        }
        await first.close();
        const refused = await rejectsWith(state.open(), "delivery-record-corrupt");
        assert.match(refused.message, new RegExp(begun.stage_id));
      });
    }

    if (backend.name === "postgres") {
      test("received chunk rows that claim more bytes than they hold restart the blob instead of refusing it for good", async (t) => {
        const state = await backend.state(t, { isolated: true });
        const node = await state.open();
        const built = uniqueBundle([12_000]);
        const begun = await node.delivery.begin(built.manifest);
        const blob = begun.missing.find((m) => m.byte_len === 12_000)!;
        const bytes = built.blobs.get(blob.digest)!;
        await node.delivery.putChunk(begun.stage_id, blob.digest, 0, bytes.subarray(0, 6_000));
        assert.equal(await state.editRows("stage_chunks", { stage_id: begun.stage_id, digest: blob.digest }, { len: 6_100 }), 1);
        const offsetOf = async (): Promise<number | undefined> =>
          (await node.delivery.status(begun.stage_id)).missing.find((m) => m.digest === blob.digest)?.offset;
        assert.equal(await offsetOf(), 6_100);
        const lost = await rejectsWith(node.delivery.putChunk(begun.stage_id, blob.digest, 6_100, bytes.subarray(6_100)), "stage-partial-lost");
        assert.equal(lost.details.expected_offset, 0);
        assert.equal(await offsetOf(), 0);
        await uploadMissing(node.delivery, await node.delivery.begin(built.manifest), built.blobs);
        assert.equal((await node.delivery.commit(begun.stage_id)).manifest_digest, built.manifest.manifest_digest);
      });
    }

    test("a commit row edited to another revision or bundle never answers with the manifest it holds", async (t) => {
      const state = await backend.state(t, { isolated: true });
      const first = await state.open();
      const edited = uniqueBundle([3_000]);
      const editedStage = await commitWhole(first.delivery, edited);
      const moved = uniqueBundle([3_000]);
      const movedStage = await commitWhole(first.delivery, moved);
      const intact = uniqueBundle([2_000]);
      await commitWhole(first.delivery, intact);
      await first.close();
      await state.editRows("commits", { stage_id: editedStage }, { revision: "r9" });
      await state.editRows("commits", { stage_id: movedStage }, { bundle_id: `${moved.manifest.bundle_id}-x` });
      const second = await state.open();
      for (const read of [
        () => second.delivery.reads.getManifest(edited.manifest.bundle_id, "r9"),
        () => second.delivery.catalog.show(edited.manifest.bundle_id),
        () => second.delivery.begin(edited.manifest),
        () => second.delivery.status(editedStage),
        () => second.delivery.reads.getManifest(`${moved.manifest.bundle_id}-x`, "r1"),
        () => second.delivery.begin(moved.manifest),
      ]) {
        assert.equal((await rejectsWith(read(), "delivery-record-corrupt")).status, 500);
      }
      assert.deepEqual(await second.delivery.reads.getManifest(intact.manifest.bundle_id, "r1"), intact.manifest);
    });

    // 9e15 ms is past what a Date holds; 2^60 is past what a JavaScript number holds exactly.
    for (const time of [9e15, 2 ** 60]) {
      test(`a commit row whose time is ${time} is a damaged record naming it, not a RangeError or an outage`, async (t) => {
        const state = await backend.state(t, { isolated: true });
        const node = await state.open();
        const edited = uniqueBundle([3_000]);
        const stageId = await commitWhole(node.delivery, edited);
        const intact = uniqueBundle([2_000]);
        await commitWhole(node.delivery, intact);
        await state.editRows("commits", { stage_id: stageId }, { committed_at: time });
        for (const read of [() => node.delivery.catalog.show(edited.manifest.bundle_id), () => node.delivery.catalog.list(), () => node.delivery.status(stageId)]) {
          const refused = await rejectsWith(read(), "delivery-record-corrupt");
          assert.equal(refused.status, 500);
          assert.equal(refused.details.bundle_id, edited.manifest.bundle_id);
        }
        assert.equal((await node.delivery.catalog.show(intact.manifest.bundle_id)).revisions.length, 1);
      });
    }

    test("a stage row whose time is past what a number holds exactly is a damaged record naming it", async (t) => {
      const state = await backend.state(t, { isolated: true });
      const node = await state.open();
      const built = uniqueBundle([3_000]);
      const begun = await node.delivery.begin(built.manifest);
      await state.editRows("stages", { stage_id: begun.stage_id }, { created_at: 2 ** 60 });
      if (backend.name === "postgres") {
        const refused = await rejectsWith(node.delivery.status(begun.stage_id), "delivery-record-corrupt");
        assert.equal(refused.status, 500);
        assert.equal(refused.details.stage_id, begun.stage_id);
      }
      await node.close();
      const refused = await rejectsWith(state.open(), "delivery-record-corrupt");
      assert.match(refused.message, new RegExp(begun.stage_id));
    });

    test("a lost row of the catalog's blob index never lets gc delete a blob a live revision uses", async (t) => {
      const state = await backend.state(t, { isolated: true });
      const first = await state.open();
      const built = uniqueBundle([3_000, 5_000]);
      await commitWhole(first.delivery, built);
      const ref = built.manifest.components.find((c) => c.blob.byte_len === 3_000)!.blob;
      assert.equal(await state.editRows("commit_blobs", { manifest_digest: built.manifest.manifest_digest, digest: ref.digest }), 1);
      const refused = await rejectsWith(first.delivery.gc(), "delivery-record-corrupt");
      assert.equal(refused.details.revision, "r1");
      assert.equal(refused.details.digest, ref.digest);
      assert.deepEqual(new Uint8Array(await first.delivery.reads.openBlob(ref)), new Uint8Array(built.blobs.get(ref.digest)!));
      await first.close();
      // Start-up collects unreferenced blobs too: it refuses, naming the revision, and deletes nothing.
      const atStart = await rejectsWith(state.open(), "delivery-record-corrupt");
      assert.match(atStart.message, new RegExp(`${built.manifest.bundle_id}/r1`));
    });

    if (backend.name === "postgres") {
      test("a signing key row whose private key is not one refuses signing and verifying with key-record-corrupt", async (t) => {
        const state = await backend.state(t, { isolated: true });
        const first = await state.open();
        const id = randomUUID();
        assert.equal((await first.invocations.run("s", id, { task: 1 }, "agent", () => ({ n: 1 }))).status, "recorded");
        await first.close();
        assert.equal(await state.editRows("signing_keys", { n: 1 }, { private_pkcs8: Buffer.from("not a key") }), 1);
        const second = await state.open();
        for (const read of [() => second.invocations.publicKeys(), () => second.invocations.run("s", randomUUID(), { task: 2 }, "agent", () => ({ n: 2 }))]) {
          const refused = await rejectsWith(read(), "key-record-corrupt");
          assert.equal(refused.status, 500);
        }
      });
    }

    test("claim rows damaged in a column answer their own callers with a damaged record; others read at once are unaffected", async (t) => {
      const state = await backend.state(t, { isolated: true });
      const node = await state.open();
      const ids = Array.from({ length: 4 }, () => randomUUID());
      for (const [i, id] of ids.entries()) {
        assert.equal((await node.invocations.run("s", id, { task: i }, "agent", () => ({ n: i }))).status, "recorded");
      }
      await state.editRows("claims", { scope: "s", id: ids[0] }, { journal_bytes: 2 ** 60 });
      await state.editRows("claims", { scope: "s", id: ids[1] }, { result: '{"n":9}' });
      // Read together: on postgres one statement carries them all.
      const answers = await Promise.allSettled(ids.map((id, i) => node.invocations.lookup("s", id, { task: i })));
      const codes = answers.map((a) => (a.status === "fulfilled" ? a.value?.status : isWardenError(a.reason) ? `${a.reason.code} ${a.reason.status}` : String(a.reason)));
      assert.deepEqual(codes, ["claim-record-malformed 500", "claim-record-corrupt 500", "recorded", "recorded"]);
    });

    test("a claim row whose time no Date holds is malformed; a listing shows it as such, beside the intact rows", async (t) => {
      const state = await backend.state(t, { isolated: true });
      const node = await state.open();
      const ids = [randomUUID(), randomUUID(), randomUUID()].sort();
      for (const id of ids) assert.equal((await node.invocations.run("s", id, { task: 1 }, "agent", () => ({ n: 1 }))).status, "recorded");
      const damaged = ids[1]!;
      await state.editRows("claims", { scope: "s", id: damaged }, { created_at: 9e15 });
      await assert.rejects(node.invocations.lookup("s", damaged, { task: 1 }), (e: unknown) => isWardenError(e) && e.code === "claim-record-malformed" && e.status === 500);
      const expected = ids.map((id) => (id === damaged ? `${id} unresolved claim-record-malformed` : `${id} recorded -`));
      const show = (items: readonly ClaimSummary[]): string[] => items.map((i) => `${i.id} ${i.status} ${i.problem ?? "-"}`);
      assert.deepEqual(show((await node.invocations.list()).items), expected);
      // A listing of recorded claims reads the same rows: the damaged one is not filtered out of it.
      assert.deepEqual(show((await node.invocations.list({ status: "recorded" })).items), expected);
      // Paged one row at a time, the cursor steps over it like any other row.
      const paged: ClaimSummary[] = [];
      let cursor: string | undefined;
      do {
        const page = await node.invocations.list({ limit: 1, ...(cursor === undefined ? {} : { cursor }) });
        paged.push(...page.items);
        cursor = page.cursor;
      } while (cursor !== undefined);
      assert.deepEqual(show(paged), expected);
      const listed = (await node.invocations.list()).items[1]!;
      assert.deepEqual(Object.keys(listed).sort(), ["id", "problem", "scope", "status"], "nothing unreadable is shown as a value");
    });
  });
}

test("an embedded database file that is not one (overwritten, cut short) refuses start-up naming it", async (t) => {
  const root = mkdtempSync(join(tmpdir(), "warden-damaged-db-"));
  t.after(() => rmSync(root, { recursive: true, force: true }));
  for (const [i, file] of [CLAIMS_DATABASE, join(DELIVERY_DIR, DB_FILE)].entries()) {
    const home = join(root, `home-${i}`);
    const backend = await openEmbeddedBackend({ home });
    await (await openEmbeddedDelivery(home, { limits: backend.limits })).delivery.close();
    await backend.close();
    const path = join(home, file);
    const stored = readFileSync(path);
    for (const damaged of [Buffer.concat([Buffer.alloc(32, "x"), stored.subarray(32)]), stored.subarray(0, 100)]) {
      writeFileSync(path, damaged);
      const opening = file === CLAIMS_DATABASE ? openEmbeddedBackend({ home }) : openEmbeddedDelivery(home, {});
      const refused = await rejectsWith(opening, "database-corrupt");
      assert.equal(refused.status, 500);
      assert.ok(refused.message.includes(path), refused.message);
      assert.deepEqual(readFileSync(path), damaged, "the file is left as it was found");
    }
  }
});

describe("node.json damaged by hand", () => {
  for (const [what, text] of [
    ["not JSON", "{\"url\":\"http://127.0"],
    ["null", "null"],
  ] as const) {
    test(`${what}: the shutdown leaves it in place and goes on`, (t) => {
      const home = mkdtempSync(join(tmpdir(), "warden-node-file-"));
      t.after(() => rmSync(home, { recursive: true, force: true }));
      const path = join(home, NODE_FILE);
      writeFileSync(path, text, { mode: 0o600 });
      removeNodeFile(home);
      assert.equal(readFileSync(path, "utf8"), text);
      writeFileSync(path, JSON.stringify({ url: "http://127.0.0.1:1", pid: process.pid }));
      removeNodeFile(home);
      assert.throws(() => readFileSync(path), /ENOENT/);
    });
  }
});
