import { after, describe, it } from "node:test";
import assert from "node:assert/strict";
import { join } from "node:path";
import { randomUUID } from "node:crypto";
import fc from "fast-check";
import { canonicalJson } from "../../src/core/canonical.js";
import { EmbeddedJournalStore } from "../../src/backends/embedded/journal/journal-store.js";
import { generateSigningKey } from "../../src/journal/keys.js";
import { JournalWriter } from "../../src/journal/writer.js";
import { verifyJournal } from "../../src/journal/verify.js";
import { inspectRun, type ReconciliationReason } from "../../src/journal/inspect.js";
import { EFFECT_KINDS, EFFECT_OUTCOMES, TERMINATION_REASONS, type EffectOutcome, type JournalEvent, type TerminationReason } from "../../src/journal/types.js";
import { buildLines, lineNumberAt, recordOf, started } from "./helpers.js";
import { tempDir } from "../support/temp.js";

const key = generateSigningKey().key;
const trusted = [recordOf(key)];

type Step =
  | { op: "start"; kind: (typeof EFFECT_KINDS)[number] }
  | { op: "finish"; pick: number; outcome: EffectOutcome }
  | { op: "note"; body: unknown };

const stepArb: fc.Arbitrary<Step> = fc.oneof(
  fc.record({ op: fc.constant("start" as const), kind: fc.constantFrom(...EFFECT_KINDS) }),
  fc.record({ op: fc.constant("finish" as const), pick: fc.nat(), outcome: fc.constantFrom(...EFFECT_OUTCOMES) }),
  fc.record({ op: fc.constant("note" as const), body: fc.jsonValue({ maxDepth: 2 }) }),
);

interface Scenario {
  events: JournalEvent[];
  /** what the rules in DESIGN.md say about this run, computed independently of the inspector */
  expected: Set<ReconciliationReason>;
  termination?: TerminationReason;
}

/** Turns random steps into a valid event sequence and the reasons a run like it requires. */
function scenario(steps: Step[], end: TerminationReason | null): Scenario {
  const events: JournalEvent[] = [started()];
  const open: string[] = [];
  let unknown = false;
  let next = 0;
  for (const step of steps) {
    if (step.op === "start") {
      const id = `effect-${next++}`;
      open.push(id);
      events.push({ type: "effect.started", effect_id: id, kind: step.kind, name: `name ${id}`, fingerprint: `fp-${id}` });
    } else if (step.op === "finish" && open.length > 0) {
      const [id] = open.splice(step.pick % open.length, 1);
      unknown ||= step.outcome === "unknown";
      events.push({ type: "effect.finished", effect_id: id!, outcome: step.outcome });
    } else if (step.op === "note") {
      events.push({ type: "note", body: step.body as never });
    }
  }
  const expected = new Set<ReconciliationReason>();
  if (end === null) expected.add("not-terminated");
  else events.push({ type: "run.terminated", reason: end });
  if (open.length > 0) expected.add("effect-not-finished");
  if (unknown) expected.add("effect-outcome-unknown");
  if (open.length > 0 && (end === "cancelled" || end === "timeout" || end === "crashed")) expected.add("terminated-with-open-effect");
  return { events, expected, ...(end !== null ? { termination: end } : {}) };
}

const scenarioArb = fc
  .tuple(fc.array(stepArb, { maxLength: 12 }), fc.option(fc.constantFrom(...TERMINATION_REASONS), { nil: null }))
  .map(([steps, end]) => scenario(steps, end));

describe("journal properties (fast-check)", () => {
  const dir = tempDir("journal-prop", (fn) => after(fn));
  const store = new EmbeddedJournalStore(join(dir, "journals"));

  it("any valid event sequence written by the writer verifies, and the inspector agrees with the rules", async () => {
    await fc.assert(
      fc.asyncProperty(scenarioArb, async ({ events, expected, termination }) => {
        const writer = await JournalWriter.create({ store, key, runId: randomUUID() });
        for (const event of events) await writer.append(event);
        await writer.close();
        const bytes = await store.read(writer.runId, 1 << 20);
        assert.ok(bytes);
        const report = verifyJournal(bytes, trusted, { runId: writer.runId, expect: { entries: writer.nextSeq, tail_hash: writer.tailHash } });
        assert.equal(report.ok, true, report.first_error?.reason);
        assert.equal(report.entries, events.length);
        assert.deepEqual(report.valid.map((e) => canonicalJson(e.event)), events.map((e) => canonicalJson(e)));
        const inspection = inspectRun(report);
        assert.deepEqual(new Set(inspection.reasons.map((r) => r.reason)), expected);
        assert.equal(inspection.clean, expected.size === 0);
        assert.equal(inspection.termination, termination);
      }),
      { numRuns: 40, seed: 20260102 },
    );
  });

  it("any single-byte corruption of any valid journal is detected at the corrupted line (or, for newline damage, the next)", () => {
    fc.assert(
      fc.property(scenarioArb, fc.nat(), fc.integer({ min: 1, max: 255 }), ({ events }, where, xor) => {
        const lines = buildLines(events, key);
        const journal = Buffer.concat(lines);
        const offset = where % journal.byteLength;
        const damaged = Buffer.from(journal);
        damaged[offset] = damaged[offset]! ^ xor;
        const report = verifyJournal(damaged, trusted);
        assert.equal(report.ok, false, `flip at ${offset} went unnoticed`);
        const line = lineNumberAt(lines, offset);
        const allowed = journal[offset] === 0x0a ? [line, line + 1] : [line];
        assert.ok(allowed.includes(report.first_error!.line), `named line ${report.first_error!.line}, corrupted ${line}`);
        assert.equal(report.first_error!.seq, report.first_error!.line - 1);
        assert.equal(report.entries, report.first_error!.line - 1);
      }),
      { numRuns: 400, seed: 8785 },
    );
  });
});
