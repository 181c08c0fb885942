/**
 * finish judges an untouched journal on its writer's own record and verifies any other in full:
 * a journal changed on disk while its run is open is never recorded.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { appendFileSync, closeSync, openSync, readFileSync, readSync, renameSync, writeFileSync, writeSync } from "node:fs";
import { join } from "node:path";
import { sha256Digest } from "../../src/core/digest.js";
import type { PublicKeyRecord } from "../../src/journal/types.js";
import { verifyJournal, type VerifyOptions } from "../../src/journal/verify.js";
import { Invocations, RunChecker, type FinishOutcome, type RunCheck } from "../../src/invocations/index.js";
import { SCOPE, freshHandle, setup, type Env } from "./fixtures/env.js";

const request = { task: "sum" };

/** An inline checker that counts full verifications: finish must skip them for untouched journals. */
class CountingChecker extends RunChecker {
  calls = 0;
  constructor() {
    super({ workers: 0 });
  }
  override check(bytes: Uint8Array, keys: readonly PublicKeyRecord[], options: VerifyOptions): Promise<RunCheck> {
    this.calls++;
    return super.check(bytes, keys, options);
  }
}

function counted(env: Env): { invocations: Invocations; checker: CountingChecker } {
  const checker = new CountingChecker();
  const { backend } = env;
  const invocations = new Invocations({ claims: backend.claims, journals: backend.journals, keys: backend.keys, limits: backend.limits, checker });
  return { invocations, checker };
}

function journalPath(env: Env, runId: string): string {
  return join(env.home, "journals", `${runId}.ndjson`);
}

/** Runs open → effect (during which `tamper` may touch the journal file) → finish. */
async function runWith(env: Env, invocations: Invocations, id: string, tamper: (journal: string) => void): Promise<{ runId: string; outcome: FinishOutcome }> {
  const handle = freshHandle(await invocations.open(SCOPE, id, request, "agent"));
  const journal = journalPath(env, handle.run_id);
  await handle.effect({ kind: "tool", name: "sum", fingerprint: "1..4" }, () => tamper(journal));
  return { runId: handle.run_id, outcome: await handle.finish({ sum: 10 }) };
}

async function assertNeverRecorded(env: Env, invocations: Invocations, id: string, outcome: FinishOutcome, code: string): Promise<void> {
  assert.equal(outcome.status, "unresolved");
  if (outcome.status !== "unresolved") return;
  assert.deepEqual(outcome.audit.reasons, ["journal-not-clean", "released"]);
  assert.ok(
    outcome.audit.findings?.some((f) => f.reason === "verification-failed"),
    `findings: ${JSON.stringify(outcome.audit.findings)}`,
  );
  assert.equal((await invocations.lookup(SCOPE, id, request))?.status, "unresolved");
  const reopened = await invocations.open(SCOPE, id, request, "agent");
  assert.equal(reopened.status, "unresolved");
  // The full verification ran and names the damage.
  const report = verifyJournal(readFileSync(journalPath(env, outcome.audit.run_id)), await invocations.publicKeys());
  assert.equal(report.ok, false);
  assert.equal(report.first_error?.code, code);
}

test("an untouched run is recorded without a second verification, and its journal verifies in full", async (t) => {
  const env = await setup(t);
  const { invocations, checker } = counted(env);
  const id = randomUUID();
  const { runId, outcome } = await runWith(env, invocations, id, () => undefined);
  assert.equal(outcome.status, "recorded");
  if (outcome.status !== "recorded") return;
  assert.equal(checker.calls, 0, "finish re-verified a journal it wrote itself");

  const bytes = readFileSync(journalPath(env, runId));
  const report = verifyJournal(bytes, await invocations.publicKeys(), { runId });
  assert.equal(report.ok, true);
  assert.deepEqual(
    report.valid.map((e) => e.event.type),
    ["run.started", "effect.started", "effect.finished", "run.terminated"],
  );
  const seal = outcome.audit.journal;
  assert.deepEqual(seal, { entries: 4, tail_hash: report.tail_hash, bytes: bytes.byteLength, sha256: sha256Digest(bytes) });

  const replay = await invocations.lookup(SCOPE, id, request);
  assert.equal(replay?.status, "recorded");
  assert.deepEqual(replay?.status === "recorded" && replay.result, { sum: 10 });
});

test("a byte appended to the journal during the run: the full verification runs and the result is never recorded", async (t) => {
  const env = await setup(t);
  const { invocations, checker } = counted(env);
  const id = randomUUID();
  const { outcome } = await runWith(env, invocations, id, (journal) => appendFileSync(journal, "x"));
  assert.equal(checker.calls, 1);
  // The store's next line lands after the stray byte, so that line no longer parses.
  await assertNeverRecorded(env, invocations, id, outcome, "journal-bad-json");
});

test("a byte of an earlier line flipped during the run (same length): the result is never recorded", async (t) => {
  const env = await setup(t);
  const { invocations, checker } = counted(env);
  const id = randomUUID();
  const { outcome } = await runWith(env, invocations, id, (journal) => {
    // Flip one character of run.started's signature in place: the length stays what the writer wrote.
    const fd = openSync(journal, "r+");
    try {
      const head = Buffer.alloc(4096);
      const n = readSync(fd, head, 0, head.length, 0);
      const at = head.subarray(0, n).indexOf('"sig":"') + '"sig":"'.length + 4;
      assert.ok(at > 10 && at < head.subarray(0, n).indexOf(0x0a));
      writeSync(fd, Buffer.from(head[at] === 0x41 ? "B" : "A"), 0, 1, at);
    } finally {
      closeSync(fd);
    }
  });
  assert.equal(checker.calls, 1);
  await assertNeverRecorded(env, invocations, id, outcome, "journal-bad-signature");
});

test("the journal replaced under its writer (a tampered copy renamed over it): the result is never recorded", async (t) => {
  const env = await setup(t);
  const { invocations, checker } = counted(env);
  const id = randomUUID();
  const { outcome } = await runWith(env, invocations, id, (journal) => {
    // The writer's own descriptor still reads the intact file; the path now names another one.
    const bytes = readFileSync(journal);
    const at = bytes.indexOf('"sig":"') + '"sig":"'.length + 4;
    bytes[at] = bytes[at] === 0x41 ? 0x42 : 0x41;
    writeFileSync(`${journal}.forged`, bytes, { mode: 0o600 });
    renameSync(`${journal}.forged`, journal);
  });
  assert.equal(checker.calls, 1);
  // The writer's later lines went to the replaced file, so the path holds only the forged line.
  await assertNeverRecorded(env, invocations, id, outcome, "journal-bad-signature");
});
