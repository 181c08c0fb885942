import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { generateSigningKey } from "../../src/journal/keys.js";
import { verifyJournal } from "../../src/journal/verify.js";
import { inspectRun, type RunInspection } from "../../src/journal/inspect.js";
import type { EffectOutcome, JournalEvent, TerminationReason } from "../../src/journal/types.js";
import { buildJournal, cleanRunEvents, recordOf, started } from "./helpers.js";

const key = generateSigningKey().key;
const trusted = [recordOf(key)];

const effect = (id: string): JournalEvent => ({ type: "effect.started", effect_id: id, kind: "file", name: "write", fingerprint: "f" });
const finish = (id: string, outcome: EffectOutcome): JournalEvent => ({ type: "effect.finished", effect_id: id, outcome });
const end = (reason: TerminationReason): JournalEvent => ({ type: "run.terminated", reason });

function inspect(events: JournalEvent[] | Buffer): RunInspection {
  const bytes = Buffer.isBuffer(events) ? events : buildJournal(events, key);
  return inspectRun(verifyJournal(bytes, trusted));
}

function reasons(inspection: RunInspection): string[] {
  return inspection.reasons.map((r) => r.reason);
}

function assertClean(inspection: RunInspection): void {
  assert.deepEqual(inspection.reasons, []);
  assert.equal(inspection.clean, true);
  assert.equal(inspection.requires_reconciliation, false);
}

describe("inspectRun", () => {
  it("a completed run whose effects all finished known is clean, with its result hash", () => {
    const inspection = inspect(cleanRunEvents());
    assertClean(inspection);
    assert.equal(inspection.termination, "completed");
    assert.equal(inspection.result_hash, `sha256:${"cd".repeat(32)}`);
    assert.equal(inspection.effects, 1);
    assert.deepEqual(inspection.open_effects, []);
  });

  it("a run terminated `failed` with all effects known (succeeded or failed) is clean", () => {
    const inspection = inspect([started(), effect("a"), finish("a", "failed"), effect("b"), finish("b", "succeeded"), end("failed")]);
    assertClean(inspection);
    assert.equal(inspection.termination, "failed");
    assert.equal(inspection.effects, 2);
  });

  it("a run with no effects that was cancelled is clean: nothing was left uncertain", () => {
    assertClean(inspect([started(), end("cancelled")]));
  });

  it("names the agent's process (pid and host) from the first note that records it, and nothing when none does", () => {
    const noted = inspect([
      started(),
      { type: "note", process: "not an object" },
      { type: "note", process: { pid: "12", host: "h" } },
      { type: "note", process: { pid: 4242, host: "agent-box-1" } },
      { type: "note", process: { pid: 7, host: "later" } },
      end("timeout"),
    ]);
    assert.deepEqual(noted.agent_process, { pid: 4242, host: "agent-box-1" });
    assert.equal(inspect(cleanRunEvents()).agent_process, undefined);
  });

  it("rule: seq 0 is not run.started", () => {
    const empty = inspect(Buffer.alloc(0));
    assert.equal(empty.clean, false);
    assert.deepEqual(reasons(empty), ["no-run-started", "not-terminated"]);
    const noteFirst = inspect([{ type: "note", x: 1 }, end("completed")]);
    assert.equal(noteFirst.clean, false);
    assert.ok(reasons(noteFirst).includes("no-run-started"));
    assert.ok(reasons(noteFirst).includes("verification-failed"), "an entry before run.started is a verification error too");
  });

  it("rule: no run.terminated", () => {
    const inspection = inspect([started(), effect("a"), finish("a", "succeeded")]);
    assert.equal(inspection.requires_reconciliation, true);
    assert.equal(inspection.clean, false);
    assert.deepEqual(reasons(inspection), ["not-terminated"]);
    assert.equal(inspection.termination, undefined);
  });

  it("rule: the last line is incomplete (a crash mid-append) — judged on the verified prefix, not as tampering", () => {
    const whole = buildJournal([started(), effect("a"), finish("a", "succeeded"), end("completed")], key);
    const cut = whole.subarray(0, whole.byteLength - 7);
    const inspection = inspect(cut);
    assert.equal(inspection.clean, false);
    assert.deepEqual(reasons(inspection), ["not-terminated", "incomplete-last-line"]);
    const finding = inspection.reasons.find((r) => r.reason === "incomplete-last-line");
    assert.equal(finding?.seq, 3, "names the seq of the partial entry");
  });

  it("rule: an effect with no finish", () => {
    const inspection = inspect([started(), effect("a"), effect("b"), finish("b", "succeeded"), end("completed")]);
    assert.equal(inspection.clean, false);
    assert.deepEqual(inspection.reasons, [{ reason: "effect-not-finished", effect_id: "a", seq: 1 }]);
    assert.deepEqual(inspection.open_effects, ["a"]);
    assert.equal(inspection.effects, 2);
  });

  it("rule: an effect finished `unknown`", () => {
    const inspection = inspect([started(), effect("a"), finish("a", "unknown"), end("failed")]);
    assert.equal(inspection.clean, false);
    assert.deepEqual(inspection.reasons, [{ reason: "effect-outcome-unknown", effect_id: "a", seq: 2 }]);
    assert.deepEqual(inspection.open_effects, []);
  });

  for (const reason of ["cancelled", "timeout", "crashed"] as const) {
    it(`rule: terminated ${reason} while an effect was open`, () => {
      const inspection = inspect([started(), effect("a"), end(reason)]);
      assert.equal(inspection.clean, false);
      assert.deepEqual(reasons(inspection), ["effect-not-finished", "terminated-with-open-effect"]);
      assert.equal(inspection.reasons[1]!.seq, 2, "names the terminating entry");
      assert.equal(inspection.termination, reason);
    });
  }

  it("an open effect at a `completed` or `failed` end still requires reconciliation, but is not an abrupt end", () => {
    for (const reason of ["completed", "failed"] as const) {
      assert.deepEqual(reasons(inspect([started(), effect("a"), end(reason)])), ["effect-not-finished"]);
    }
  });

  it("any verification failure other than an incomplete tail is `verification-failed`, never clean", () => {
    const journal = buildJournal(cleanRunEvents(), key);
    const damaged = Buffer.from(journal);
    damaged[40] = damaged[40]! ^ 0x01;
    const inspection = inspect(damaged);
    assert.equal(inspection.clean, false);
    assert.equal(inspection.requires_reconciliation, true);
    assert.deepEqual(inspection.reasons[0], { reason: "verification-failed", seq: 0 });
    const foreignKey = generateSigningKey().key;
    const foreign = inspectRun(verifyJournal(buildJournal(cleanRunEvents(), foreignKey), trusted));
    assert.equal(foreign.clean, false);
    assert.ok(reasons(foreign).includes("verification-failed"));
    // A journal that verifies only up to a failed checkpoint is not clean even if its prefix looks complete.
    const truncated = inspectRun(verifyJournal(journal, trusted, { expect: { entries: 9, tail_hash: "0".repeat(64) } }));
    assert.equal(truncated.clean, false);
    assert.ok(reasons(truncated).includes("verification-failed"));
  });
});
