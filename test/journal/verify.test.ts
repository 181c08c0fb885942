import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { createHash, randomUUID } from "node:crypto";
import { generateSigningKey } from "../../src/journal/keys.js";
import { lineHash } from "../../src/journal/line.js";
import { verifyJournal, type VerifyReport } from "../../src/journal/verify.js";
import { inspectRun } from "../../src/journal/inspect.js";
import { ZERO_HASH, type JournalEvent } from "../../src/journal/types.js";
import { buildJournal, buildLines, cleanRunEvents, entryOf, lineNumberAt, recordOf, signRaw, started } from "./helpers.js";

const node = generateSigningKey().key;
const foreign = generateSigningKey().key;
const trusted = [recordOf(node)];
const runId = randomUUID();
const lines = buildLines(cleanRunEvents(), node, { runId });
const journal = Buffer.concat(lines);

function assertFailsAt(report: VerifyReport, line: number, code?: string): void {
  assert.equal(report.ok, false, "verification must fail");
  assert.ok(report.first_error, "first_error is set");
  assert.equal(report.first_error.line, line, `first bad line (${report.first_error.code}: ${report.first_error.reason})`);
  assert.equal(report.first_error.seq, line - 1, "first bad seq");
  assert.equal(report.entries, line - 1, "entries before the bad line");
  assert.equal(report.valid.length, line - 1);
  if (code !== undefined) assert.equal(report.first_error.code, code, report.first_error.reason);
}

function tail(i: number): string {
  return i === 0 ? ZERO_HASH : lineHash(lines[i - 1]!);
}

describe("verifyJournal: a clean run", () => {
  it("verifies, returns the parsed prefix and the tail hash", () => {
    const report = verifyJournal(journal, trusted);
    assert.equal(report.ok, true);
    assert.equal(report.first_error, undefined);
    assert.equal(report.entries, 5);
    assert.equal(report.incomplete_tail, false);
    assert.equal(report.tail_hash, createHash("sha256").update(lines[4]!).digest("hex"));
    assert.deepEqual(report.valid.map((e) => e.seq), [0, 1, 2, 3, 4]);
    assert.deepEqual(report.valid.map((e) => e.event), cleanRunEvents());
    assert.equal(inspectRun(report).clean, true);
  });

  it("verifies against its own checkpoint, and with the run id given", () => {
    const report = verifyJournal(journal, trusted, { runId, expect: { entries: 5, tail_hash: tail(5) } });
    assert.equal(report.ok, true);
    assert.equal(verifyJournal(journal, trusted, { expect: { entries: 2, tail_hash: tail(2) } }).ok, true);
    assert.equal(verifyJournal(journal, trusted, { expect: { entries: 0, tail_hash: ZERO_HASH } }).ok, true);
  });

  it("an empty journal verifies with no entries", () => {
    const report = verifyJournal(Buffer.alloc(0), trusted);
    assert.equal(report.ok, true);
    assert.equal(report.entries, 0);
    assert.equal(report.tail_hash, ZERO_HASH);
  });

  it("verifies with several trusted keys, in any order", () => {
    assert.equal(verifyJournal(journal, [recordOf(foreign), recordOf(node)]).ok, true);
  });
});

describe("verifyJournal: tampering is detected at the first bad line", () => {
  it("flipping any single byte (every offset, three kinds of flip) names the line holding it", () => {
    let cases = 0;
    for (let offset = 0; offset < journal.byteLength; offset++) {
      const original = journal[offset]!;
      for (const replacement of [original ^ 0x01, original ^ 0x80, original === 0x0a ? 0x20 : 0x0a]) {
        const damaged = Buffer.from(journal);
        damaged[offset] = replacement;
        const report = verifyJournal(damaged, trusted);
        const line = lineNumberAt(lines, offset);
        assertFailsAt(report, line);
        // Damage to the very last newline leaves a partial last line; nothing else may look like one.
        const lastNewline = offset === journal.byteLength - 1;
        assert.equal(report.incomplete_tail, lastNewline, `offset ${offset}`);
        cases++;
      }
    }
    assert.equal(cases, journal.byteLength * 3);
  });

  it("deleting any line is named (the last one needs a checkpoint)", () => {
    for (let i = 0; i < lines.length - 1; i++) {
      const damaged = Buffer.concat(lines.filter((_, j) => j !== i));
      assertFailsAt(verifyJournal(damaged, trusted), i + 1);
    }
    const withoutLast = Buffer.concat(lines.slice(0, -1));
    const unchecked = verifyJournal(withoutLast, trusted);
    assert.equal(unchecked.ok, true, "a clean cut at a line boundary is only visible against a checkpoint…");
    assert.equal(inspectRun(unchecked).requires_reconciliation, true, "…but the run then is not terminated");
    assertFailsAt(verifyJournal(withoutLast, trusted, { expect: { entries: 5, tail_hash: tail(5) } }), 5, "journal-truncated");
  });

  it("duplicating any line is named at the copy", () => {
    for (let i = 0; i < lines.length; i++) {
      const damaged = Buffer.concat([...lines.slice(0, i + 1), lines[i]!, ...lines.slice(i + 1)]);
      assertFailsAt(verifyJournal(damaged, trusted), i + 2);
    }
  });

  it("swapping any two lines is named at the earlier position", () => {
    for (let i = 0; i < lines.length; i++) {
      for (let j = i + 1; j < lines.length; j++) {
        const order = lines.map((_, k) => (k === i ? j : k === j ? i : k));
        assertFailsAt(verifyJournal(Buffer.concat(order.map((k) => lines[k]!)), trusted), i + 1);
      }
    }
  });

  it("truncating mid-line at every offset leaves an incomplete tail at that line", () => {
    const boundaries = new Set<number>();
    let end = 0;
    for (const l of lines) boundaries.add((end += l.byteLength));
    for (let cut = 1; cut < journal.byteLength; cut++) {
      const report = verifyJournal(journal.subarray(0, cut), trusted);
      if (boundaries.has(cut)) {
        assert.equal(report.ok, true);
        continue;
      }
      const line = lineNumberAt(lines, cut);
      assertFailsAt(report, line, "journal-incomplete-line");
      assert.equal(report.incomplete_tail, true);
      const checked = verifyJournal(journal.subarray(0, cut), trusted, { expect: { entries: 5, tail_hash: tail(5) } });
      assertFailsAt(checked, line, "journal-truncated");
      assert.equal(checked.incomplete_tail, true);
    }
  });

  it("re-signing any line with a foreign key is named, whatever key_id it claims", () => {
    for (let i = 0; i < lines.length; i++) {
      const asForeign = signRaw({ ...entryOf(lines[i]!), key_id: foreign.key_id }, foreign);
      assertFailsAt(verifyJournal(Buffer.concat([...lines.slice(0, i), asForeign, ...lines.slice(i + 1)]), trusted), i + 1, "journal-unknown-key");
      const posingAsNode = signRaw(entryOf(lines[i]!), foreign);
      assertFailsAt(verifyJournal(Buffer.concat([...lines.slice(0, i), posingAsNode, ...lines.slice(i + 1)]), trusted), i + 1, "journal-bad-signature");
    }
    const wholeForeign = buildJournal(cleanRunEvents(), foreign);
    assertFailsAt(verifyJournal(wholeForeign, trusted), 1, "journal-unknown-key");
    assert.equal(verifyJournal(wholeForeign, [recordOf(foreign)]).ok, true);
  });

  it("an entry appended after run.terminated is named", () => {
    const extra = buildLines([...cleanRunEvents(), { type: "note", late: true }], node, { runId });
    assert.deepEqual(extra.slice(0, 5), lines, "same run, same bytes up to the end");
    assertFailsAt(verifyJournal(Buffer.concat(extra), trusted), 6, "journal-after-terminated");
  });

  it("a validly signed but non-canonical line is refused", () => {
    const entry = entryOf(lines[2]!);
    const good = lines[2]!.toString("utf8");
    const sig = (JSON.parse(good) as { sig: string }).sig;
    const canonicalEntry = good.slice('{"entry":'.length, good.indexOf(',"sig":"'));
    const variants = [
      `{"entry": ${canonicalEntry},"sig":"${sig}"}`, // whitespace
      `{"sig":"${sig}","entry":${canonicalEntry}}`, // key order
      `{"entry":${canonicalEntry.replace('"v":1', '"v":1.0')},"sig":"${sig}"}`, // number form
      `{"entry":${canonicalEntry.replace('"note"', '"no\\u0074e"')},"sig":"${sig}"}`, // escaping
      `{"entry":${JSON.stringify(entry, null, 1).replace(/\n/g, "")},"sig":"${sig}"}`, // spacing inside
      `{"entry":${canonicalEntry},"sig":"${sig}","x":1}`, // extra field
    ];
    for (const text of variants) {
      assert.notEqual(text, good);
      const damaged = Buffer.concat([...lines.slice(0, 2), Buffer.from(text + "\n"), ...lines.slice(3)]);
      const report = verifyJournal(damaged, trusted);
      assertFailsAt(report, 3);
      assert.ok(["journal-non-canonical", "journal-bad-line"].includes(report.first_error!.code), report.first_error!.code);
    }
  });

  it("a signature in non-canonical base64 (same bytes, different text) is refused", () => {
    const good = lines[1]!.toString("utf8");
    const sig = (JSON.parse(good) as { sig: string }).sig;
    // 64 bytes → 86 data characters + "=="; the last data character carries 4 unused bits.
    const last = sig[85]!;
    const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    const twin = alphabet[alphabet.indexOf(last) ^ 0x01]!;
    const sameBytes = sig.slice(0, 85) + twin + "==";
    assert.deepEqual(Buffer.from(sameBytes, "base64"), Buffer.from(sig, "base64"), "Node decodes both to the same bytes");
    const damaged = Buffer.concat([lines[0]!, Buffer.from(good.replace(sig, sameBytes)), ...lines.slice(2)]);
    assertFailsAt(verifyJournal(damaged, trusted), 2, "journal-bad-signature");
  });

  it("chain fields are checked even when each line is validly signed", () => {
    const cases: Array<[string, Parameters<typeof buildLines>[2], number]> = [
      ["journal-wrong-run-id", { runId, override: (i) => (i === 3 ? { run_id: randomUUID() } : undefined) }, 4],
      ["journal-wrong-seq", { runId, override: (i) => (i === 2 ? { seq: 7 } : undefined) }, 3],
      ["journal-wrong-prev", { runId, override: (i) => (i === 1 ? { prev: "1".repeat(64) } : undefined) }, 2],
      ["journal-wrong-prev", { runId, override: (i) => (i === 0 ? { prev: "1".repeat(64) } : undefined) }, 1],
    ];
    for (const [code, options, line] of cases) {
      assertFailsAt(verifyJournal(buildJournal(cleanRunEvents(), node, options), trusted), line, code);
    }
    assertFailsAt(verifyJournal(journal, trusted, { runId: randomUUID() }), 1, "journal-wrong-run-id");
  });

  it("event order rules are checked", () => {
    const effect = (id: string): JournalEvent => ({ type: "effect.started", effect_id: id, kind: "process", name: "n", fingerprint: "f" });
    const finish = (id: string): JournalEvent => ({ type: "effect.finished", effect_id: id, outcome: "failed" });
    const cases: Array<[string, JournalEvent[], number]> = [
      ["journal-not-started", [{ type: "note", x: 1 }, started()], 1],
      ["journal-not-started", [effect("a")], 1],
      ["journal-duplicate-run-started", [started(), started()], 2],
      ["journal-duplicate-effect-start", [started(), effect("a"), effect("a")], 3],
      ["journal-duplicate-effect-start", [started(), effect("a"), finish("a"), effect("a")], 4],
      ["journal-finish-without-start", [started(), finish("a")], 2],
      ["journal-duplicate-finish", [started(), effect("a"), finish("a"), finish("a")], 4],
      ["journal-after-terminated", [started(), { type: "run.terminated", reason: "failed" }, { type: "run.terminated", reason: "failed" }], 3],
    ];
    for (const [code, events, line] of cases) {
      assertFailsAt(verifyJournal(buildJournal(events, node), trusted), line, code);
    }
  });

  it("entry and event shapes are checked strictly, even when signed", () => {
    const base = entryOf(lines[2]!);
    const startedEntry = entryOf(lines[0]!);
    const cases: Array<[string, Record<string, unknown>]> = [
      ["journal-bad-entry", { ...base, extra: 1 }],
      ["journal-bad-entry", { ...base, v: 2 }],
      ["journal-bad-entry", { ...base, ts: "2026-01-02T03:04:05Z" }],
      ["journal-bad-entry", { ...base, ts: "2026-02-30T03:04:05.678Z" }],
      ["journal-bad-entry", { ...base, ts: "2026-01-02T03:04:05.678+00:00" }],
      ["journal-bad-entry", { ...base, key_id: node.key_id.toUpperCase() }],
      ["journal-bad-entry", { ...base, prev: base.prev.toUpperCase() }],
      ["journal-bad-entry", { ...base, run_id: "not-a-uuid" }],
      ["journal-bad-entry", { ...base, seq: -1 }],
      ["journal-bad-event", { ...base, event: { type: "effect.started", effect_id: "x", kind: "teleport", name: "n", fingerprint: "f" } }],
      ["journal-bad-event", { ...base, event: { type: "effect.finished", effect_id: "e1", outcome: "succeeded", extra: true } }],
      ["journal-bad-event", { ...base, event: { type: "run.terminated", reason: "completed", result_hash: "sha256:xyz" } }],
      ["journal-bad-event", { ...base, event: { type: "something.else" } }],
      ["journal-bad-event", { ...startedEntry, event: { ...startedEntry.event, provider: null } }],
      ["journal-bad-event", { ...startedEntry, event: { ...startedEntry.event, invocation: { scope: "s", id: "i" } } }],
      ["journal-note-too-large", { ...base, event: { type: "note", blob: "x".repeat(64 * 1024) } }],
    ];
    for (const [code, entry] of cases) {
      const damaged = Buffer.concat([lines[0]!, lines[1]!, signRaw(entry, node), ...lines.slice(3)]);
      assertFailsAt(verifyJournal(damaged, trusted), 3, code);
    }
    // Notes are free JSON: unknown fields are fine there.
    assert.equal(verifyJournal(buildJournal([started(), { type: "note", anything: { nested: [1, "two", null] } }], node), trusted).ok, true);
  });

  it("malformed bytes are named: invalid UTF-8, an empty line, a line that is not {entry, sig}", () => {
    const badUtf8 = Buffer.from(lines[1]!);
    badUtf8[badUtf8.indexOf("bash")] = 0xff; // a byte that never occurs in UTF-8
    assertFailsAt(verifyJournal(Buffer.concat([lines[0]!, badUtf8]), trusted), 2, "journal-bad-json");
    const noteLine = lines.findIndex((l) => l.includes("✓"));
    const utf8Damaged = Buffer.from(lines[noteLine]!);
    utf8Damaged[utf8Damaged.indexOf("✓") + 1] = 0x41; // breaks the multi-byte sequence
    assertFailsAt(verifyJournal(Buffer.concat([...lines.slice(0, noteLine), utf8Damaged]), trusted), noteLine + 1, "journal-bad-json");
    assertFailsAt(verifyJournal(Buffer.concat([lines[0]!, Buffer.from("\n")]), trusted), 2, "journal-bad-json");
    assertFailsAt(verifyJournal(Buffer.concat([lines[0]!, Buffer.from('{"entry":{}}\n')]), trusted), 2, "journal-bad-line");
    assertFailsAt(verifyJournal(Buffer.from("[1,2]\n"), trusted), 1, "journal-bad-line");
  });

  it("size bounds are enforced with the line that crosses them named", () => {
    const upToThree = lines[0]!.byteLength + lines[1]!.byteLength + lines[2]!.byteLength;
    assertFailsAt(verifyJournal(journal, trusted, { maxBytes: upToThree + 10 }), 4, "journal-too-large");
    assert.equal(verifyJournal(journal, trusted, { maxBytes: journal.byteLength }).ok, true);
    const longest = Math.max(...lines.map((l) => l.byteLength));
    const at = lines.findIndex((l) => l.byteLength === longest);
    assertFailsAt(verifyJournal(journal, trusted, { limits: { journalEntryBytes: longest - 1 } }), at + 1, "journal-entry-too-large");
  });

  it("a checkpoint catches truncation and rewritten history", () => {
    const three = Buffer.concat(lines.slice(0, 3));
    assertFailsAt(verifyJournal(three, trusted, { expect: { entries: 4, tail_hash: tail(4) } }), 4, "journal-truncated");
    const rewritten = buildJournal(cleanRunEvents(), node, { runId, start: new Date("2027-01-01T00:00:00.000Z") });
    assertFailsAt(verifyJournal(rewritten, trusted, { expect: { entries: 3, tail_hash: tail(3) } }), 3, "journal-checkpoint-mismatch");
    assert.throws(() => verifyJournal(journal, trusted, { expect: { entries: -1, tail_hash: ZERO_HASH } }), { code: "invalid-checkpoint" });
  });

  it("a checkpoint at 0 entries holds only with the zero hash, for an empty journal and a longer one", () => {
    assert.equal(verifyJournal(new Uint8Array(), trusted, { expect: { entries: 0, tail_hash: ZERO_HASH } }).ok, true);
    for (const bytes of [new Uint8Array(), journal]) {
      const report = verifyJournal(bytes, trusted, { expect: { entries: 0, tail_hash: tail(1) } });
      assert.equal(report.ok, false);
      assert.equal(report.first_error?.code, "journal-checkpoint-mismatch");
    }
  });

  it("refuses a trusted-key record whose key_id does not derive from its key", () => {
    assert.throws(() => verifyJournal(journal, [{ key_id: foreign.key_id, public_key: node.public_key }]), { code: "invalid-public-key" });
    assert.throws(() => verifyJournal(journal, [{ key_id: node.key_id, public_key: "not base64" }]), { code: "invalid-public-key" });
  });
});
