import { after, describe, it } from "node:test";
import assert from "node:assert/strict";
import { readFileSync, statSync, symlinkSync, writeFileSync, chmodSync } from "node:fs";
import { join } from "node:path";
import { randomUUID } from "node:crypto";
import { resolveLimits } from "../../src/core/limits.js";
import { EmbeddedJournalStore, type JournalStoreHooks } from "../../src/backends/embedded/journal/journal-store.js";
import { generateSigningKey } from "../../src/journal/keys.js";
import { encodeLine, lineHash } from "../../src/journal/line.js";
import { JournalWriter } from "../../src/journal/writer.js";
import { verifyJournal } from "../../src/journal/verify.js";
import { inspectRun } from "../../src/journal/inspect.js";
import { ZERO_HASH, type JournalEvent } from "../../src/journal/types.js";
import { cleanRunEvents, recordOf, started } from "./helpers.js";
import { tempDir } from "../support/temp.js";
import fc from "fast-check";

const key = generateSigningKey().key;
const trusted = [recordOf(key)];
const effect = (id: string): JournalEvent => ({ type: "effect.started", effect_id: id, kind: "network", name: "fetch", fingerprint: "f" });

describe("JournalWriter with the embedded store", () => {
  const dir = tempDir("journal-writer", (fn) => after(fn));
  let n = 0;
  function freshStore(hooks?: JournalStoreHooks): EmbeddedJournalStore {
    return new EmbeddedJournalStore(join(dir, `j${n++}`), hooks ? { hooks } : {});
  }

  it("writes a run that verifies; getters follow the durable tail; file and directory are private", async () => {
    const store = freshStore();
    const runId = randomUUID();
    const ticks = [Date.UTC(2026, 0, 2, 3, 4, 5, 678)];
    const writer = await JournalWriter.create({ store, key, runId, now: () => new Date(ticks[0]!++) });
    assert.equal(writer.nextSeq, 0);
    assert.equal(writer.tailHash, ZERO_HASH);
    let size = 0;
    for (const event of cleanRunEvents()) {
      const { entry, line, hash } = await writer.append(event);
      size += line.byteLength;
      assert.equal(hash, lineHash(line));
      assert.equal(writer.tailHash, hash);
      assert.equal(writer.nextSeq, entry.seq + 1);
      assert.equal(writer.size, size);
      assert.equal(statSync(store.pathOf(runId)).size, size, "on disk when append resolves");
    }
    assert.equal(writer.terminated, true);
    await writer.close();
    const bytes = readFileSync(store.pathOf(runId));
    const report = verifyJournal(bytes, trusted, { runId, expect: { entries: writer.nextSeq, tail_hash: writer.tailHash } });
    assert.equal(report.ok, true);
    assert.equal(report.valid[0]!.ts, "2026-01-02T03:04:05.678Z");
    assert.equal(inspectRun(report).clean, true);
    assert.deepEqual(await store.read(runId, 1 << 20), bytes);
    assert.equal(statSync(store.pathOf(runId)).mode & 0o777, 0o600);
    assert.equal(statSync(store.dir).mode & 0o777, 0o700);
    assert.equal(await store.exists(runId), true);
    assert.equal(await store.exists(randomUUID()), false);
    assert.equal(await store.read(randomUUID(), 100), undefined);
  });

  it("writes each line exactly as encodeLine signs its entry, whatever a note's text (the canonical form is built once, prev spliced in)", async () => {
    // Text a note could carry to look like the envelope's own prev field, or shift it.
    const piece = fc.constantFrom(',"prev":"', ZERO_HASH, '"', "\\", '{"event":', "é", "😀", "\u2028", '","key_id":"', "a");
    const text = fc.array(piece, { maxLength: 6 }).map((parts) => parts.join(""));
    const note = fc.dictionary(fc.oneof(text, fc.constantFrom("prev", "key_id", "seq")), fc.oneof(text, fc.integer(), fc.constant(null)), { maxKeys: 3 });
    await fc.assert(
      fc.asyncProperty(fc.array(note, { minLength: 1, maxLength: 3 }), async (notes) => {
        const writer = await JournalWriter.create({ store: freshStore(), key, runId: randomUUID() });
        const events: JournalEvent[] = [started(), ...notes.map((n): JournalEvent => ({ ...n, type: "note" }))];
        for (const event of events) {
          const { entry, line } = await writer.append(event);
          assert.deepEqual(line, encodeLine(entry, key));
        }
        await writer.close();
      }),
      { numRuns: 40 },
    );
  });

  it("appends issued without awaiting keep call order in the chain", async () => {
    const store = freshStore();
    const writer = await JournalWriter.create({ store, key, runId: randomUUID() });
    const events: JournalEvent[] = [started(), ...Array.from({ length: 30 }, (_, i) => ({ type: "note", i }) as JournalEvent), { type: "run.terminated", reason: "completed" }];
    const results = await Promise.all(events.map((e) => writer.append(e)));
    assert.deepEqual(results.map((r) => r.entry.seq), events.map((_, i) => i));
    await writer.close();
    const report = verifyJournal((await store.read(writer.runId, 1 << 20))!, trusted);
    assert.equal(report.ok, true);
    assert.deepEqual(report.valid.map((e) => (e.event as { i?: number }).i), [undefined, ...events.slice(1, -1).map((_, i) => i), undefined]);
  });

  it("refuses out-of-order events with typed errors and writes nothing", async () => {
    const store = freshStore();
    const writer = await JournalWriter.create({ store, key, runId: randomUUID() });
    const path = store.pathOf(writer.runId);
    const refuse = async (event: JournalEvent, code: string): Promise<void> => {
      const before = readFileSync(path);
      await assert.rejects(writer.append(event), { code });
      assert.deepEqual(readFileSync(path), before, `${code}: nothing written`);
      assert.equal(writer.failed, false, "a refusal does not poison the writer");
    };
    await refuse({ type: "note", early: true }, "journal-not-started");
    await refuse(effect("a"), "journal-not-started");
    await writer.append(started());
    await refuse(started(), "journal-duplicate-run-started");
    await refuse({ type: "effect.finished", effect_id: "a", outcome: "succeeded" }, "journal-finish-without-start");
    await writer.append(effect("a"));
    await refuse(effect("a"), "journal-duplicate-effect-start");
    await writer.append({ type: "effect.finished", effect_id: "a", outcome: "succeeded" });
    await refuse({ type: "effect.finished", effect_id: "a", outcome: "failed" }, "journal-duplicate-finish");
    await refuse(effect("a"), "journal-duplicate-effect-start");
    await refuse({ type: "effect.started", effect_id: "b", kind: "teleport", name: "n", fingerprint: "f" } as unknown as JournalEvent, "journal-bad-event");
    await refuse({ type: "run.started", invocation: { scope: "s", id: "i", request_hash: "sha256:nope" }, agent: "a" } as unknown as JournalEvent, "journal-bad-event");
    await refuse({ type: "note", big: "x".repeat(64 * 1024) }, "journal-note-too-large");
    await writer.append({ type: "run.terminated", reason: "failed" });
    await refuse({ type: "note", late: true }, "journal-after-terminated");
    await refuse({ type: "run.terminated", reason: "failed" }, "journal-after-terminated");
    await writer.close();
    await assert.rejects(writer.append({ type: "note" }), { code: "journal-writer-closed" });
    const report = verifyJournal(readFileSync(path), trusted);
    assert.equal(report.ok, true);
    assert.equal(report.entries, 4);
    assert.equal(inspectRun(report).clean, true);
  });

  it("drops optional fields given as undefined instead of refusing the event", async () => {
    const writer = await JournalWriter.create({ store: freshStore(), key, runId: randomUUID() });
    const { entry } = await writer.append({ ...started(), provider: undefined } as JournalEvent);
    assert.equal(Object.hasOwn(entry.event, "provider"), false);
    await writer.close();
  });

  it("enforces the entry and journal limits, keeping room for run.terminated", async () => {
    const limits = resolveLimits({ journalEntryBytes: 700, journalBytes: 4096 });
    const store = freshStore();
    const writer = await JournalWriter.create({ store, key, runId: randomUUID(), limits });
    await writer.append(started());
    await assert.rejects(writer.append({ type: "note", text: "y".repeat(600) }), { code: "journal-entry-too-large", name: "LimitError" });
    let accepted = 1;
    for (;;) {
      try {
        await writer.append({ type: "note", text: "z".repeat(100) });
        accepted++;
      } catch (error) {
        assert.equal((error as { code?: string }).code, "journal-too-large");
        break;
      }
    }
    assert.ok(accepted >= 2 && writer.size <= 4096 - 2048, `stopped at ${writer.size} bytes`);
    const { line } = await writer.append({ type: "run.terminated", reason: "completed" });
    assert.ok(line.byteLength < 700);
    await writer.close();
    const bytes = (await store.read(writer.runId, 4096))!;
    assert.ok(bytes.byteLength <= 4096);
    assert.equal(verifyJournal(bytes, trusted, { maxBytes: 4096 }).ok, true);
    await assert.rejects(store.read(writer.runId, 100), { code: "journal-too-large" });
  });

  it("a failed append poisons the writer; the journal keeps a verifiable prefix", async () => {
    let failNext = false;
    const store = freshStore({
      beforeSync: () => {
        if (failNext) throw Object.assign(new Error("EIO: injected"), { code: "EIO" });
      },
    });
    const writer = await JournalWriter.create({ store, key, runId: randomUUID() });
    await writer.append(started());
    await writer.append(effect("a"));
    failNext = true;
    const pending = [writer.append({ type: "note", n: 1 }), writer.append({ type: "note", n: 2 })];
    await assert.rejects(pending[0]!, { code: "journal-append-failed" });
    await assert.rejects(pending[1]!, { code: "journal-writer-failed" }, "the line chained onto the failed one is never written");
    failNext = false;
    assert.equal(writer.failed, true);
    assert.equal(writer.nextSeq, 2, "durable state stops at the last good line");
    await assert.rejects(writer.append({ type: "run.terminated", reason: "crashed" }), { code: "journal-writer-failed" });
    await writer.close();
    // The failed line reached the file but its sync failed; either way the prefix verifies and
    // the run requires reconciliation.
    const report = verifyJournal((await store.read(writer.runId, 1 << 20))!, trusted);
    assert.ok(report.entries >= 2);
    assert.equal(report.valid.filter((e) => e.event.type === "note" && (e.event as { n?: number }).n === 2).length, 0);
    assert.equal(inspectRun(report).requires_reconciliation, true);
  });

  it("appends to different journals proceed concurrently: one stalled journal does not block another", async () => {
    let release: () => void = () => undefined;
    const stall = new Promise<void>((resolve) => (release = resolve));
    const stalledRun = randomUUID();
    const store = freshStore({ beforeSync: (runId) => (runId === stalledRun ? stall : undefined) });
    const stalled = await JournalWriter.create({ store, key, runId: stalledRun });
    const other = await JournalWriter.create({ store, key, runId: randomUUID() });
    let stalledDone = false;
    const stalledAppend = stalled.append(started()).then(() => (stalledDone = true));
    for (const event of cleanRunEvents()) await other.append(event);
    assert.equal(stalledDone, false, "the first journal is still waiting for its sync");
    assert.equal(other.terminated, true);
    release();
    await stalledAppend;
    assert.equal(stalled.nextSeq, 1);
    await Promise.all([stalled.close(), other.close()]);
  });

  it("the store refuses a second journal for a run, non-UUID run ids and planted links", async () => {
    const store = freshStore();
    const runId = randomUUID();
    const writer = await JournalWriter.create({ store, key, runId });
    await assert.rejects(JournalWriter.create({ store, key, runId }), { code: "journal-exists" });
    await assert.rejects(JournalWriter.create({ store, key, runId: "../../etc/passwd" }), { code: "journal-bad-run-id" });
    await assert.rejects(store.create("not-a-uuid"), { code: "journal-bad-run-id" });
    await writer.close();

    const victim = join(dir, "victim");
    writeFileSync(victim, "do not touch\n", { mode: 0o600 });
    const planted = randomUUID();
    symlinkSync(victim, store.pathOf(planted));
    await assert.rejects(store.create(planted), { code: "unsafe-storage-symlink" });
    await assert.rejects(store.read(planted, 100), { code: "unsafe-storage-symlink" });
    await assert.rejects(store.exists(planted), { code: "unsafe-storage-symlink" });
    assert.equal(readFileSync(victim, "utf8"), "do not touch\n");

    const loose = randomUUID();
    writeFileSync(store.pathOf(loose), "", { mode: 0o600 });
    chmodSync(store.pathOf(loose), 0o644);
    await assert.rejects(store.read(loose, 100), { code: "unsafe-storage-mode" });
    assert.equal(statSync(store.pathOf(loose)).mode & 0o777, 0o644, "left untouched");
  });

  it("the store refuses a directory with loose permissions", () => {
    const loose = join(dir, "loose");
    new EmbeddedJournalStore(loose);
    chmodSync(loose, 0o755);
    assert.throws(() => new EmbeddedJournalStore(loose), { code: "unsafe-storage-mode" });
  });
});
