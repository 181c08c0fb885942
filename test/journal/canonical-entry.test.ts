/**
 * The hand-built canonical forms of the fixed-shape events and of the entry envelope are
 * canonicalJson's, byte for byte, for any field values (quotes, escapes, control characters,
 * astral characters, lone surrogates); any other shape falls back to canonicalJson.
 */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import { canonicalJson } from "../../src/core/canonical.js";
import { canonicalEvent, fixedShapeEnvelope, fixedShapeEvent } from "../../src/journal/canonical-entry.js";
import { canonicalEntry } from "../../src/journal/line.js";
import type { JournalEntry } from "../../src/journal/types.js";

const unit = fc.oneof(
  fc.integer({ min: 0, max: 0xffff }).map((c) => String.fromCharCode(c)),
  fc.constantFrom('"', "\\", "/", "\u0000", "\u001f", "\u007f", "\u2028", "é", "😀", "\ud800", "\udfff"),
  fc.string({ unit: "binary", minLength: 1, maxLength: 1 }),
);
const str = fc.string({ unit, maxLength: 12 });
/** Sometimes a non-string, to check the fallback on wrong types. */
const field = fc.oneof({ weight: 8, arbitrary: str }, { weight: 1, arbitrary: fc.jsonValue({ maxDepth: 1 }) });

const fixedEvents = fc.oneof(
  fc.record(
    { type: fc.constant("run.started"), invocation: fc.record({ scope: field, id: field, request_hash: field }), agent: field, provider: field },
    { requiredKeys: ["type", "invocation", "agent"] },
  ),
  fc.record({ type: fc.constant("effect.started"), effect_id: field, kind: field, name: field, fingerprint: field }),
  fc.record({ type: fc.constant("effect.finished"), effect_id: field, outcome: field, detail: fc.jsonValue({ maxDepth: 1 }) }, { requiredKeys: ["type", "effect_id", "outcome"] }),
  fc.record({ type: fc.constant("run.terminated"), reason: field, result_hash: field }, { requiredKeys: ["type", "reason"] }),
);
/** Fixed shapes with a field dropped or an extra one added. */
const oddEvents = fc
  .tuple(fixedEvents, fc.option(fc.string({ maxLength: 8 })), fc.jsonValue({ maxDepth: 1 }))
  .map(([event, extra, value]) => {
    const copy: Record<string, unknown> = { ...event };
    if (extra === null) delete copy[Object.keys(copy).at(-1)!];
    else copy[extra] = value;
    return copy;
  });

function sameAsCanonicalJson(event: unknown): void {
  const fast = fixedShapeEvent(event);
  let expected: string | undefined;
  try {
    expected = canonicalJson(event);
  } catch {
    expected = undefined;
  }
  if (fast !== undefined) assert.equal(fast, expected);
  // canonicalEvent is canonicalJson, refusals included.
  if (expected === undefined) assert.throws(() => canonicalEvent(event));
  else assert.equal(canonicalEvent(event), expected);
}

describe("hand-built canonical journal entries", () => {
  it("equal canonicalJson for fixed-shape events, and take the fast path whenever every field is a surrogate-free string", () => {
    fc.assert(
      fc.property(fixedEvents, (event) => {
        sameAsCanonicalJson(event);
        const e = event as Record<string, unknown>;
        const clean = (v: unknown): boolean => typeof v === "string" && !/[\ud800-\udfff]/.test(v);
        const fixed = Object.entries(e).every(([k, v]) =>
          k === "invocation" ? typeof v === "object" && v !== null && !Array.isArray(v) && Object.values(v).every(clean) : clean(v),
        );
        if (!("detail" in e) && fixed) assert.notEqual(fixedShapeEvent(event), undefined, JSON.stringify(event));
      }),
      { numRuns: 2000 },
    );
  });

  it("fall back for any other shape and still equal canonicalJson", () => {
    fc.assert(fc.property(oddEvents, sameAsCanonicalJson), { numRuns: 1000 });
    for (const other of [{ type: "note", text: "x" }, null, "run.started", [], Object.create(null), { type: "effect.finished" }]) {
      assert.equal(fixedShapeEvent(other), undefined);
    }
  });

  it("whole entries equal canonicalJson of the entry", () => {
    const entries = fc.record({
      v: fc.constant(1 as const),
      run_id: str,
      seq: fc.nat(),
      prev: str,
      ts: str,
      key_id: str,
      event: fc.oneof(fixedEvents, fc.record({ type: fc.constant("note"), body: fc.jsonValue({ maxDepth: 2 }) })),
    });
    fc.assert(
      fc.property(entries, (value) => {
        const entry = value as unknown as JournalEntry;
        let expected: string | undefined;
        try {
          expected = canonicalJson(entry);
        } catch {
          expected = undefined;
        }
        if (expected === undefined) assert.throws(() => canonicalEntry(entry));
        else assert.equal(canonicalEntry(entry), expected);
      }),
      { numRuns: 2000 },
    );
    const entry = { v: 1, run_id: "r", seq: 1.5, prev: "p", ts: "t", key_id: "k", event: { type: "note" } } as unknown as JournalEntry;
    assert.equal(fixedShapeEnvelope(entry), undefined, "a non-integer seq takes the general path");
    assert.equal(canonicalEntry(entry), canonicalJson(entry));
  });
});
