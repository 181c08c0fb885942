/**
 * The write-ahead rules an invocation relies on, now that run.started and effect finishes are not
 * synced on their own: an effect's function never runs before its start (and everything before
 * it, the journal's name included) is durable; nothing is recorded unless the sync that covers
 * the effect finishes and run.terminated succeeded; an untouched run costs exactly two journal
 * fdatasyncs. Syncs are stalled, failed and counted through the embedded store's hooks.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { setImmediate as turn } from "node:timers/promises";
import { verifyJournal } from "../../src/journal/verify.js";
import { SCOPE, freshHandle, setup } from "./fixtures/env.js";

const request = { task: "durability" };

function gate(): { wait: Promise<void>; open(): void } {
  let open: () => void = () => undefined;
  const wait = new Promise<void>((resolve) => (open = resolve));
  return { wait, open };
}

test("an effect runs only once its start, run.started and the journal's name are durable", async (t) => {
  const fileSync = gate();
  const dirSync = gate();
  let stalling = true;
  const env = await setup(t, {
    journalHooks: {
      beforeSync: () => (stalling ? fileSync.wait : undefined),
      beforeDirSync: () => (stalling ? dirSync.wait : undefined),
    },
  });
  await env.invocations.publicKeys(); // key creation stays out of the stalled window
  const handle = freshHandle(await env.invocations.open(SCOPE, randomUUID(), request, "agent"));
  let ran = false;
  const effect = handle.effect({ kind: "tool", name: "write", fingerprint: "x" }, () => (ran = true));
  for (let i = 0; i < 20; i++) await turn();
  assert.equal(ran, false, "the effect ran before its start was fdatasynced");
  fileSync.open();
  for (let i = 0; i < 20; i++) await turn();
  assert.equal(ran, false, "the effect ran before the journal's directory entry was durable");
  dirSync.open();
  stalling = false;
  await effect;
  assert.equal(ran, true);
  assert.equal((await handle.finish({ ok: true })).status, "recorded");
});

test("a failed sync of the last lines records nothing: the run reads unresolved", async (t) => {
  let syncs = 0;
  let failAt = 0;
  const env = await setup(t, {
    journalHooks: {
      beforeSync: () => {
        syncs++;
        if (syncs === failAt) throw Object.assign(new Error("EIO: injected"), { code: "EIO" });
      },
    },
  });
  const id = randomUUID();
  const handle = freshHandle(await env.invocations.open(SCOPE, id, request, "agent"));
  await handle.effect({ kind: "tool", name: "t", fingerprint: "f" }, () => 1);
  // The next sync is the one that covers effect.finished and run.terminated.
  failAt = syncs + 1;
  const outcome = await handle.finish({ ok: true });
  assert.equal(outcome.status, "unresolved");
  assert.deepEqual(outcome.status === "unresolved" && outcome.audit.reasons, ["journal-write-failed", "released"]);
  assert.equal((await env.invocations.lookup(SCOPE, id, request))?.status, "unresolved");
  assert.equal((await env.invocations.open(SCOPE, id, request, "agent")).status, "unresolved");
});

test("an untouched run costs two journal fdatasyncs, and its journal is whole and verifies", async (t) => {
  let syncs = 0;
  const env = await setup(t, { journalHooks: { beforeSync: () => void syncs++ } });
  const id = randomUUID();
  let runId = "";
  const outcome = await env.invocations.run(SCOPE, id, request, "agent", async (h) => {
    runId = h.run_id;
    await h.effect({ kind: "tool", name: "t", fingerprint: "f" }, () => 1);
    assert.equal(h.journal.entries, 3, "effect.finished is written when effect() returns");
    return { ok: true };
  });
  assert.equal(outcome.status, "recorded");
  assert.equal(syncs, 2, "one sync before the effect (write-ahead), one covering the finish and termination");
  const report = verifyJournal(readFileSync(join(env.home, "journals", `${runId}.ndjson`)), await env.invocations.publicKeys(), { runId });
  assert.equal(report.ok, true);
  assert.deepEqual(report.valid.map((e) => e.event.type), ["run.started", "effect.started", "effect.finished", "run.terminated"]);
});

test("a run released after an effect still leaves every line it wrote durable", async (t) => {
  let syncs = 0;
  const env = await setup(t, { journalHooks: { beforeSync: () => void syncs++ } });
  const id = randomUUID();
  const handle = freshHandle(await env.invocations.open(SCOPE, id, request, "agent"));
  await handle.effect({ kind: "tool", name: "t", fingerprint: "f" }, () => 1);
  const before = syncs;
  await handle.release();
  assert.equal(syncs, before + 1, "closing the journal synced the effect's finish");
  const inspection = await env.invocations.inspect(SCOPE, id);
  assert.equal(inspection.report.journal.entries, 3);
  assert.equal(inspection.report.status, "unresolved");
});
