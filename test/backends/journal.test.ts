/**
 * Journal and key behaviours on every backend: durable ordered appends (also pipelined), exact
 * reads, verification that names the first bad entry after tampering, the size bound on reads,
 * one key for concurrent first uses, rotation, and survival across a restart.
 */
import { describe, test } from "node:test";
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { isWardenError } from "../../src/core/errors.js";
import { verifyJournal } from "../../src/journal/verify.js";
import { JournalWriter } from "../../src/journal/writer.js";
import { backendsUnderTest, type StoreNode } from "./harness.js";

const INVOCATION = { scope: "suite", id: randomUUID(), request_hash: `sha256:${"a".repeat(64)}` as const };

/** A run of run.started, `notes` pipelined notes (none awaited before the next), run.terminated. */
async function writeRun(node: StoreNode, notes: number): Promise<{ runId: string; size: number; entries: number }> {
  const runId = randomUUID();
  const writer = await JournalWriter.create({ store: node.journals, key: await node.keys.active(), runId });
  const pending = [writer.append({ type: "run.started", invocation: INVOCATION, agent: "agent" })];
  for (let i = 0; i < notes; i++) pending.push(writer.append({ type: "note", n: i }));
  pending.push(writer.append({ type: "run.terminated", reason: "completed" }));
  const results = await Promise.all(pending);
  assert.deepEqual(results.map((r) => r.entry.seq), results.map((_, i) => i));
  await writer.close();
  return { runId, size: writer.size, entries: notes + 2 };
}

for (const backend of backendsUnderTest()) {
  describe(`journals and keys on ${backend.name}`, () => {
    backend.hooks();

    test("pipelined appends are durable in call order; a read returns exactly the bytes and they verify", async (t) => {
      const node = await (await backend.state(t)).open();
      const runs = await Promise.all([writeRun(node, 12), writeRun(node, 3), writeRun(node, 0)]);
      const keys = await node.keys.publicKeys();
      for (const run of runs) {
        assert.equal(await node.journals.exists(run.runId), true);
        const bytes = await node.journals.read(run.runId, 1 << 20);
        assert.ok(bytes !== undefined);
        assert.equal(bytes.byteLength, run.size);
        const report = verifyJournal(bytes, keys, { runId: run.runId });
        assert.equal(report.ok, true, JSON.stringify(report.first_error));
        assert.equal(report.entries, run.entries);
        assert.deepEqual(report.valid.map((e) => e.seq), [...Array(run.entries).keys()]);
      }
    });

    test("a run's journal is created once; an unknown run has none; a read past its bound is refused", async (t) => {
      const state = await backend.state(t);
      const node = await state.open();
      const { runId, size } = await writeRun(node, 2);
      await assert.rejects(node.journals.create(runId), (e: unknown) => isWardenError(e) && e.code === "journal-exists");
      const unknown = randomUUID();
      assert.equal(await node.journals.exists(unknown), false);
      assert.equal(await node.journals.read(unknown, 1 << 20), undefined);
      assert.equal((await node.journals.read(runId, size))?.byteLength, size);
      await assert.rejects(node.journals.read(runId, size - 1), (e: unknown) => isWardenError(e) && e.code === "journal-too-large");
      // A line added behind the writer's back, right at the bound, makes the journal too large for it.
      await state.appendJournalLine(runId, Buffer.from("{}\n"));
      await assert.rejects(node.journals.read(runId, size), (e: unknown) => isWardenError(e) && e.code === "journal-too-large");
      assert.equal((await node.journals.read(runId, size + 3))?.byteLength, size + 3);
      await assert.rejects(node.journals.read("not-a-uuid", 10), (e: unknown) => isWardenError(e) && e.code === "journal-bad-run-id");
      // An empty journal exists and reads as zero bytes.
      const empty = randomUUID();
      await (await node.journals.create(empty)).close();
      assert.equal(await node.journals.exists(empty), true);
      assert.equal((await node.journals.read(empty, 10))?.byteLength, 0);
    });

    test("a read from an offset answers exactly the journal's bytes from there, under the same bound", async (t) => {
      const state = await backend.state(t);
      const node = await state.open();
      const { runId, size } = await writeRun(node, 3);
      const whole = Buffer.from((await node.journals.read(runId, size))!);
      const firstLine = whole.indexOf(0x0a) + 1;
      for (const offset of [0, 1, firstLine - 1, firstLine, firstLine + 5, size - 1, size, size + 10]) {
        const part = await node.journals.readFrom(runId, offset, size);
        assert.ok(part !== undefined);
        assert.deepEqual(Buffer.from(part), whole.subarray(Math.min(offset, size)), `from ${offset}`);
      }
      assert.equal(await node.journals.readFrom(randomUUID(), 0, size), undefined);
      await assert.rejects(node.journals.readFrom(runId, -1, size), (e: unknown) => isWardenError(e) && e.code === "journal-bad-offset");
      await assert.rejects(node.journals.readFrom("not-a-uuid", 0, size), (e: unknown) => isWardenError(e) && e.code === "journal-bad-run-id");
      // Over its bound, the journal is refused from any offset, its end included.
      for (const offset of [0, firstLine, size]) {
        await assert.rejects(node.journals.readFrom(runId, offset, size - 1), (e: unknown) => isWardenError(e) && e.code === "journal-too-large", `from ${offset}`);
      }
      // A line added later is read from where the reader stood.
      await state.appendJournalLine(runId, Buffer.from("{}\n"));
      assert.equal(Buffer.from((await node.journals.readFrom(runId, size, size + 3))!).toString(), "{}\n");
    });

    test("verification names the first edited, deleted or reordered entry", async (t) => {
      const state = await backend.state(t);
      const node = await state.open();
      const verify = async (runId: string) => verifyJournal((await node.journals.read(runId, 1 << 20))!, await node.keys.publicKeys(), { runId });

      const edited = await writeRun(node, 4);
      await state.editJournalLine(edited.runId, 2, (line) => Buffer.from(line.toString("utf8").replace('"n":1', '"n":7')));
      const a = await verify(edited.runId);
      assert.equal(a.ok, false);
      assert.equal(a.first_error?.seq, 2);
      assert.equal(a.entries, 2);

      const deleted = await writeRun(node, 4);
      await state.editJournalLine(deleted.runId, 3, () => undefined);
      const b = await verify(deleted.runId);
      assert.equal(b.ok, false);
      assert.equal(b.first_error?.seq, 3);

      const reordered = await writeRun(node, 4);
      let first: Buffer | undefined;
      let second: Buffer | undefined;
      await state.editJournalLine(reordered.runId, 1, (line) => (first = line));
      await state.editJournalLine(reordered.runId, 2, (line) => {
        second = line;
        return first;
      });
      await state.editJournalLine(reordered.runId, 1, () => second);
      const c = await verify(reordered.runId);
      assert.equal(c.ok, false);
      assert.equal(c.first_error?.seq, 1);
    });

    test("concurrent first uses end with one key; rotation adds one and old journals still verify after a restart", async (t) => {
      const state = await backend.state(t, { isolated: true });
      const node = await state.open();
      const firsts = await Promise.all(Array.from({ length: 8 }, () => node.keys.active()));
      assert.equal(new Set(firsts.map((k) => k.key_id)).size, 1);
      assert.deepEqual((await node.keys.publicKeys()).map((k) => k.key_id), [firsts[0]!.key_id]);
      const old = await writeRun(node, 1);
      const rotated = await node.keys.rotate();
      assert.notEqual(rotated.key_id, firsts[0]!.key_id);
      assert.equal((await node.keys.active()).key_id, rotated.key_id);
      await node.close();

      const again = await state.open();
      assert.equal((await again.keys.active()).key_id, rotated.key_id);
      const keys = await again.keys.publicKeys();
      assert.deepEqual(keys.map((k) => k.key_id), [firsts[0]!.key_id, rotated.key_id]);
      const report = verifyJournal((await again.journals.read(old.runId, 1 << 20))!, keys, { runId: old.runId });
      assert.equal(report.ok, true);
      assert.equal(report.entries, old.entries);
    });
  });
}
