import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { canonicalJson } from "../../src/core/canonical.js";
import { DEFAULT_LIMITS } from "../../src/core/limits.js";
import { generateSigningKey } from "../../src/journal/keys.js";
import { canonicalEntry } from "../../src/journal/line.js";
import { isJournalTimestamp, journalTimestamp, validateEvent } from "../../src/journal/schema.js";
import { verifyJournal } from "../../src/journal/verify.js";
import type { JournalEntry, JournalEvent } from "../../src/journal/types.js";
import { buildJournal, recordOf, started } from "./helpers.js";

describe("journal schema", () => {
  it("timestamps: RFC 3339 UTC with milliseconds, real calendar dates only", () => {
    for (const ok of ["2026-01-02T03:04:05.678Z", "2024-02-29T23:59:59.999Z", "2000-02-29T00:00:00.000Z", "0000-02-29T00:00:00.000Z", "9999-12-31T23:59:59.999Z"]) {
      assert.equal(isJournalTimestamp(ok), true, ok);
      assert.equal(new Date(ok).toISOString(), ok, "agrees with JavaScript's calendar");
    }
    for (const bad of [
      "2023-02-29T00:00:00.000Z",
      "1900-02-29T00:00:00.000Z",
      "2026-04-31T00:00:00.000Z",
      "2026-13-01T00:00:00.000Z",
      "2026-00-01T00:00:00.000Z",
      "2026-01-00T00:00:00.000Z",
      "2026-01-02T24:00:00.000Z",
      "2026-01-02T23:60:00.000Z",
      "2026-01-02T23:59:60.000Z",
      "2026-01-02T03:04:05.67Z",
      "2026-01-02T03:04:05.678",
      "2026-01-02t03:04:05.678Z",
      "2026-01-02T03:04:05.678+00:00",
      "+012026-01-02T03:04:05.678Z",
    ]) {
      assert.equal(isJournalTimestamp(bad), false, bad);
    }
    assert.equal(journalTimestamp(new Date(Date.UTC(2026, 0, 2, 3, 4, 5, 678))), "2026-01-02T03:04:05.678Z");
    assert.throws(() => journalTimestamp(new Date(Date.UTC(10000, 0, 1))), { code: "journal-bad-entry" });
    assert.throws(() => journalTimestamp(new Date(NaN)), { code: "journal-bad-entry" });
  });

  it("a note may be exactly noteBytes canonical, not one byte more — in the writer's and the verifier's count alike", () => {
    const key = generateSigningKey().key;
    const noteOf = (bytes: number): JournalEvent => {
      const shell = canonicalJson({ type: "note", t: "" }).length;
      return { type: "note", t: "é".repeat(Math.floor((bytes - shell) / 2)) + "x".repeat((bytes - shell) % 2) };
    };
    const atLimit = noteOf(DEFAULT_LIMITS.noteBytes);
    assert.equal(Buffer.byteLength(canonicalJson(atLimit)), DEFAULT_LIMITS.noteBytes);
    validateEvent(atLimit, DEFAULT_LIMITS);
    const over = noteOf(DEFAULT_LIMITS.noteBytes + 1);
    assert.throws(() => validateEvent(over, DEFAULT_LIMITS), { code: "journal-note-too-large" });
    assert.equal(verifyJournal(buildJournal([started(), atLimit], key), [recordOf(key)]).ok, true);
  });

  it("canonicalEntry equals RFC 8785 of the whole entry", () => {
    const entry: JournalEntry = {
      v: 1,
      run_id: "6f1c1a7e-3b7a-4c1e-9a55-0d8a1c2b3e4f",
      seq: 3,
      prev: "f".repeat(64),
      ts: "2026-01-02T03:04:05.678Z",
      key_id: "0123456789abcdef",
      event: { type: "note", "€": 1, a: [1e21, 0.1, "\u2028"], z: { b: null, a: true } },
    };
    assert.equal(canonicalEntry(entry), canonicalJson(entry));
    assert.equal(canonicalEntry(entry, canonicalJson(entry.event)), canonicalJson(entry));
  });
});
