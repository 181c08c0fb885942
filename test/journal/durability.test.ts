/**
 * Which journal writes are durable when (embedded store): a synced append resolves only after an
 * fdatasync that began after it, and after the directory fsync that makes its new file's name
 * durable; an unsynced append resolves once written and becomes durable with the next synced one
 * or with close; runs created together share directory fsyncs. Syncs are counted and stalled
 * through the store's hooks, so a regression of any of these rules fails here.
 */
import { after, describe, it } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { randomUUID } from "node:crypto";
import { setImmediate as turn } from "node:timers/promises";
import { EmbeddedJournalStore, type JournalStoreHooks } from "../../src/backends/embedded/journal/journal-store.js";
import { generateSigningKey } from "../../src/journal/keys.js";
import { JournalWriter } from "../../src/journal/writer.js";
import { verifyJournal } from "../../src/journal/verify.js";
import { recordOf, started } from "./helpers.js";
import { tempDir } from "../support/temp.js";

const key = generateSigningKey().key;
const effect = { type: "effect.started", effect_id: "e1", kind: "tool", name: "bash", fingerprint: "f" } as const;
const finished = { type: "effect.finished", effect_id: "e1", outcome: "succeeded" } as const;
const NO_SYNC = { sync: false } as const;

/** A gate a hook can wait on; `open()` lets every waiter through. */
function gate(): { wait: Promise<void>; open(): void } {
  let open: () => void = () => undefined;
  const wait = new Promise<void>((resolve) => (open = resolve));
  return { wait, open };
}

async function turns(n: number): Promise<void> {
  for (let i = 0; i < n; i++) await turn();
}

describe("journal durability rules (embedded store)", () => {
  const dir = tempDir("journal-durability", (fn) => after(fn));
  let n = 0;
  const storeWith = (hooks: JournalStoreHooks = {}): EmbeddedJournalStore => new EmbeddedJournalStore(join(dir, `s${n++}`), { hooks });

  it("an unsynced append resolves once written, is not counted durable, and rides on the next synced append", async () => {
    const syncs: string[] = [];
    const store = storeWith({ beforeSync: (runId) => void syncs.push(runId) });
    const writer = await JournalWriter.create({ store, key, runId: randomUUID() });
    const first = await writer.append(started(), NO_SYNC);
    assert.equal(syncs.length, 0, "an unsynced append must not fdatasync");
    assert.equal(writer.nextSeq, 0, "an unsynced line is not durable yet");
    assert.equal(writer.writtenSeq, 1);
    assert.equal(writer.writtenHash, first.hash);
    assert.equal(readFileSync(store.pathOf(writer.runId)).byteLength, first.line.byteLength, "the line is written at once");
    await writer.append(effect);
    assert.equal(syncs.length, 1);
    assert.equal(writer.nextSeq, 2, "the synced append covers the line before it");
    await writer.append(finished, NO_SYNC);
    assert.equal(syncs.length, 1);
    assert.equal(writer.nextSeq, 2);
    await writer.close();
    assert.equal(syncs.length, 2, "close makes the unsynced line durable");
    assert.equal(writer.nextSeq, 3);
    const report = verifyJournal(readFileSync(store.pathOf(writer.runId)), [recordOf(key)]);
    assert.equal(report.ok, true);
    assert.equal(report.entries, 3);
  });

  it("a synced append does not resolve before its fdatasync, nor before the new file's directory fsync", async () => {
    const fileSync = gate();
    const dirSync = gate();
    const store = storeWith({ beforeSync: () => fileSync.wait, beforeDirSync: () => dirSync.wait });
    const writer = await JournalWriter.create({ store, key, runId: randomUUID() });
    await writer.append(started(), NO_SYNC);
    let durable = false;
    const pending = writer.append(effect).then(() => (durable = true));
    await turns(20);
    assert.equal(durable, false, "resolved before its fdatasync");
    fileSync.open();
    await turns(20);
    assert.equal(durable, false, "resolved before the directory fsync that makes the file's name durable");
    dirSync.open();
    await pending;
    assert.equal(writer.nextSeq, 2);
    await writer.close();
  });

  it("a failed directory fsync fails the first synced append and poisons the journal", async () => {
    const store = storeWith({
      beforeDirSync: () => {
        throw Object.assign(new Error("EIO: injected"), { code: "EIO" });
      },
    });
    const writer = await JournalWriter.create({ store, key, runId: randomUUID() });
    await writer.append(started(), NO_SYNC);
    await assert.rejects(writer.append(effect), { code: "journal-append-failed" });
    assert.equal(writer.nextSeq, 0);
    await assert.rejects(writer.append(finished), { code: "journal-writer-failed" });
    await writer.close();
  });

  it("a failed sync at close is reported and nothing written after it counts as durable", async () => {
    let fail = false;
    const store = storeWith({
      beforeSync: () => {
        if (fail) throw Object.assign(new Error("EIO: injected"), { code: "EIO" });
      },
    });
    const writer = await JournalWriter.create({ store, key, runId: randomUUID() });
    await writer.append(started());
    await writer.append(effect);
    await writer.append(finished, NO_SYNC);
    fail = true;
    await assert.rejects(writer.close(), { code: "journal-append-failed" });
    assert.equal(writer.nextSeq, 2, "the unsynced line was never confirmed durable");
    assert.equal(writer.failed, true);
  });

  it("runs created together share directory fsyncs, and each waits for one that began after its create", async () => {
    const store = storeWith();
    const writers = await Promise.all(Array.from({ length: 24 }, () => JournalWriter.create({ store, key, runId: randomUUID() })));
    await Promise.all(writers.map(async (w) => {
      await w.append(started(), NO_SYNC);
      await w.append(effect);
    }));
    assert.ok(store.dirSyncs >= 1 && store.dirSyncs <= 12, `${store.dirSyncs} directory fsyncs for 24 new journals`);
    await Promise.all(writers.map((w) => w.close()));

    // A create made while a directory fsync is in flight waits for the next one.
    const stall = gate();
    let stalls = 0;
    const slow = storeWith({ beforeDirSync: () => (stalls++ === 0 ? stall.wait : undefined) });
    const early = await JournalWriter.create({ store: slow, key, runId: randomUUID() });
    await early.append(started(), NO_SYNC);
    const earlyDurable = early.append(effect);
    await turns(5);
    const late = await JournalWriter.create({ store: slow, key, runId: randomUUID() });
    await late.append(started(), NO_SYNC);
    let lateDurable = false;
    const latePending = late.append(effect).then(() => (lateDurable = true));
    await turns(20);
    assert.equal(lateDurable, false);
    assert.equal(slow.dirSyncs, 0);
    stall.open();
    await Promise.all([earlyDurable, latePending]);
    assert.equal(slow.dirSyncs, 2, "the late create needed a directory fsync of its own, begun after it");
    await Promise.all([early.close(), late.close()]);
  });
});
