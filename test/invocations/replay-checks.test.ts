/**
 * The replay-check memory keeps only runs replayed twice within its reach: ids that cycle through
 * more runs than it holds are checked in full every time without being copied into it, hot ids
 * are answered from it, and a remembered journal changed by one byte is checked in full again.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { RecentSightings } from "../../src/core/bounded-map.js";
import { sha256Digest, sha256Hex } from "../../src/core/digest.js";
import { ReplayChecks } from "../../src/invocations/replay-checks.js";
import { sealOf } from "../../src/invocations/seal.js";

function sealedJournal(runId: string): { bytes: Buffer; seal: ReturnType<typeof sealOf>; resultHash: ReturnType<typeof sha256Digest> } {
  const resultHash = sha256Digest(`result of ${runId}`);
  const first = `${JSON.stringify({ entry: { run_id: runId, event: { type: "run.started" } } })}\n`;
  const last = `${JSON.stringify({ entry: { run_id: runId, event: { type: "run.terminated", result_hash: resultHash } } })}\n`;
  const bytes = Buffer.from(first + last);
  return { bytes, seal: sealOf(bytes, { entries: 2, tail_hash: sha256Hex(last) }), resultHash };
}

test("a key counts as seen recently only when it came back within the window", () => {
  const sightings = new RecentSightings(8);
  assert.equal(sightings.seenRecently("a"), false);
  assert.equal(sightings.seenRecently("a"), true);
  // 7 other keys since: a map of 8 entries would still hold "a".
  for (let i = 0; i < 7; i++) sightings.seenRecently(`other-${i}`);
  assert.equal(sightings.seenRecently("a"), true);
  // 8 other keys since: such a map would have forgotten it.
  for (let i = 0; i < 8; i++) sightings.seenRecently(`more-${i}`);
  assert.equal(sightings.seenRecently("a"), false);
});

test("runs that cycle through more than the memory holds are checked but never remembered", () => {
  const checks = new ReplayChecks({ entries: 16, bytes: 1024 * 1024 });
  const runs = Array.from({ length: 40 }, () => {
    const runId = randomUUID();
    return { runId, ...sealedJournal(runId) };
  });
  for (let round = 0; round < 3; round++) {
    for (const r of runs) assert.equal(checks.journalMatches(r.bytes, r.seal, r.runId, r.resultHash), true);
  }
  assert.equal(checks.remembered.journals, 0);
  // A damaged journal is still refused on this path.
  const damaged = Buffer.from(runs[0]!.bytes);
  damaged.writeUInt8(damaged.readUInt8(5) ^ 1, 5);
  assert.equal(checks.journalMatches(damaged, runs[0]!.seal, runs[0]!.runId, runs[0]!.resultHash), false);
});

test("a run replayed twice is remembered, and a byte changed after that is checked in full again", () => {
  const checks = new ReplayChecks({ entries: 16, bytes: 1024 * 1024 });
  const runId = randomUUID();
  const { bytes, seal, resultHash } = sealedJournal(runId);
  assert.equal(checks.journalMatches(bytes, seal, runId, resultHash), true);
  assert.equal(checks.remembered.journals, 0);
  assert.equal(checks.journalMatches(bytes, seal, runId, resultHash), true);
  assert.equal(checks.remembered.journals, 1);
  // The memory holds its own copy: the caller's buffer changing later does not touch it.
  const reused = Buffer.from(bytes);
  assert.equal(checks.journalMatches(reused, seal, runId, resultHash), true);
  reused.writeUInt8(reused.readUInt8(reused.length - 3) ^ 1, reused.length - 3);
  assert.equal(checks.journalMatches(reused, seal, runId, resultHash), false);
  assert.equal(checks.remembered.journals, 0);
  assert.equal(checks.journalMatches(bytes, seal, runId, resultHash), true);
});

test("a digest from the store is judged like the bytes: length, sha256 and the run's termination as last line", () => {
  const checks = new ReplayChecks({ entries: 16, bytes: 1024 * 1024 });
  const runId = randomUUID();
  const { bytes, seal, resultHash } = sealedJournal(runId);
  const lastStart = bytes.lastIndexOf(0x0a, bytes.length - 2) + 1;
  const digest = { bytes: bytes.byteLength, sha256: sha256Digest(bytes), tail: bytes.subarray(lastStart) };
  // Twice: the second answer may come from memory, and both must be the full check's.
  for (let i = 0; i < 2; i++) assert.equal(checks.digestMatches(digest, seal, runId, resultHash), true);
  assert.equal(checks.remembered.journals, 1);
  // The whole journal as tail (a store that cut no lines) is judged the same.
  assert.equal(checks.digestMatches({ ...digest, tail: bytes }, seal, runId, resultHash), true);

  // Remembered or not, each of these fails: another length or sha256, a tail that is not the
  // termination of this run with this result, a tail cut mid-line, a tail longer than the journal.
  const flipped = Buffer.from(digest.tail);
  flipped.writeUInt8(flipped.readUInt8(10) ^ 1, 10);
  const refused = [
    { ...digest, bytes: digest.bytes + 1 },
    { ...digest, sha256: sha256Digest("another journal") },
    { ...digest, tail: flipped },
    { ...digest, tail: digest.tail.subarray(5) },
    { ...digest, tail: Buffer.concat([Buffer.alloc(digest.bytes), digest.tail]) },
  ];
  for (const bad of refused) assert.equal(checks.digestMatches(bad, seal, runId, resultHash), false);
  assert.equal(checks.digestMatches(digest, seal, randomUUID(), resultHash), false, "another run's seal");
  assert.equal(checks.digestMatches(digest, seal, runId, sha256Digest("another result")), false, "another result");
  assert.equal(checks.digestMatches(digest, seal, runId, resultHash), true);
});
