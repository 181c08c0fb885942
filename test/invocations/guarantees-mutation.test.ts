/**
 * Rules of G1 and G2 that a mutation audit found no other test pinning: each test below fails if
 * the named check is removed from the code.
 *
 * - G1: the claim database commits with synchronous=FULL (a claim is on disk when COMMIT returns).
 * - G2: a payload missing without a prune mark is damage, not an expired result.
 * - G2: the seal's tail hash must be the hash of the journal's last line, even when a forger keeps
 *   the claim hash consistent.
 * - G2: a row remembered by the replay memory is checked in full again once its payload changes.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { IntegrityError } from "../../src/core/errors.js";
import { openPrivateDatabase } from "../../src/storage/sqlite.js";
import { claimHashOf, type ClaimRecord } from "../../src/invocations/index.js";
import { SCOPE, setup, type Env } from "./fixtures/env.js";
import { claimRow, editClaim, withClaimsDb } from "./fixtures/tamper.js";

const request = { task: "sum" };
/** SQLite's PRAGMA synchronous value for FULL */
const SYNCHRONOUS_FULL = 2;

async function recordedClaim(env: Env): Promise<string> {
  const id = randomUUID();
  const outcome = await env.invocations.run(SCOPE, id, request, "agent", async (h) => {
    await h.effect({ kind: "tool", name: "sum", fingerprint: "1..4" }, () => 10);
    return { sum: 10 };
  });
  assert.equal(outcome.status, "recorded");
  return id;
}

async function assertRefused(env: Env, id: string, what: string): Promise<void> {
  for (const call of [() => env.invocations.lookup(SCOPE, id, request), () => env.invocations.open(SCOPE, id, request, "agent")]) {
    await assert.rejects(call(), (e: unknown) => {
      assert.ok(e instanceof IntegrityError, `${what}: ${String(e)}`);
      assert.equal(e.code, "claim-record-corrupt", what);
      return true;
    });
  }
}

test("G1: the claim database is opened in WAL mode with synchronous=FULL", async (t) => {
  const root = mkdtempSync(join(tmpdir(), "warden-invocations-"));
  t.after(() => rmSync(root, { recursive: true, force: true }));
  const db = openPrivateDatabase(join(root, "claims.sqlite"));
  try {
    assert.equal(db.pragma("journal_mode", { simple: true }), "wal");
    assert.equal(db.pragma("synchronous", { simple: true }), SYNCHRONOUS_FULL);
  } finally {
    db.close();
  }
  // The same opener serves the live claim database of a node.
  const env = await setup(t);
  await recordedClaim(env);
  assert.equal(withClaimsDb(env.home, (_exec, get) => (get("PRAGMA synchronous") as { synchronous: number }).synchronous), SYNCHRONOUS_FULL);
});

test("G2: a result payload missing without a prune mark is refused as damage, never replayed as expired", async (t) => {
  const env = await setup(t);
  const id = await recordedClaim(env);
  assert.equal(editClaim(env.home, SCOPE, id, "result = NULL"), 1);
  assert.equal(claimRow(env.home, SCOPE, id)?.pruned_at, null);
  await assertRefused(env, id, "payload dropped without prune");
});

test("G2: a seal whose tail hash is not the journal's last line is never replayed, even with a consistent claim hash", async (t) => {
  const env = await setup(t);
  const id = await recordedClaim(env);
  const o = claimRow(env.home, SCOPE, id)!;
  const forgedTail = "0".repeat(63) + "1";
  assert.notEqual(o.journal_tail, forgedTail);
  const record = {
    scope: SCOPE, id, request_hash: o.request_hash, agent: o.agent, run_id: o.run_id, created_at: o.created_at,
    result: {
      hash: o.result_hash, recorded_at: o.recorded_at,
      journal: { entries: o.journal_entries, tail_hash: forgedTail, bytes: o.journal_bytes, sha256: o.journal_sha256 },
    },
  } as unknown as ClaimRecord;
  assert.equal(editClaim(env.home, SCOPE, id, "journal_tail = ?, claim_hash = ?", forgedTail, claimHashOf(record)), 1);
  const answers = [await env.invocations.lookup(SCOPE, id, request), await env.invocations.open(SCOPE, id, request, "agent")];
  for (const answer of answers) {
    assert.equal(answer?.status, "unresolved");
    assert.deepEqual(answer?.status === "unresolved" && answer.audit.reasons, ["journal-changed"]);
  }
});

test("G2: a payload edited after its row was remembered by the replay memory is checked in full and refused", async (t) => {
  const env = await setup(t);
  const id = await recordedClaim(env);
  // Replayed often enough to be remembered (a run is remembered from its second sighting on).
  for (let i = 0; i < 3; i++) {
    const replay = await env.invocations.lookup(SCOPE, id, request);
    assert.deepEqual(replay?.status === "recorded" && replay.result, { sum: 10 });
  }
  // The forged payload keeps the stored hash: only a fresh hash check of the payload notices.
  assert.equal(editClaim(env.home, SCOPE, id, "result = ?", '{"sum":11}'), 1);
  await assertRefused(env, id, "payload edited after it was remembered");
});
