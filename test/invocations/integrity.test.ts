/**
 * After a result is recorded, a damaged claim row or journal is never replayed and never grants
 * a new run: reading it is an IntegrityError or `unresolved`.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { appendFileSync, readFileSync, rmSync, truncateSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { IntegrityError } from "../../src/core/errors.js";
import { sha256Digest } from "../../src/core/digest.js";
import { claimHashOf, type ClaimRecord, type ExistingOutcome } from "../../src/invocations/index.js";
import { SCOPE, setup, type Env } from "./fixtures/env.js";
import { claimRow, editClaim } from "./fixtures/tamper.js";

const request = { task: "sum" };

async function recordedClaim(env: Env): Promise<{ id: string; runId: string; journal: string }> {
  const id = randomUUID();
  const outcome = await env.invocations.run(SCOPE, id, request, "agent", async (h) => {
    await h.effect({ kind: "tool", name: "sum", fingerprint: "1..4" }, () => 10);
    return { sum: 10 };
  });
  assert.equal(outcome.status, "recorded");
  const runId = outcome.status === "recorded" ? outcome.audit.run_id : "";
  return { id, runId, journal: join(env.home, "journals", `${runId}.ndjson`) };
}

/** Every way of asking must answer `unresolved` (journal damage) — never recorded, never fresh. */
async function assertUnresolved(env: Env, id: string, what: string): Promise<void> {
  const answers: (ExistingOutcome | undefined)[] = [
    await env.invocations.lookup(SCOPE, id, request),
    await env.invocations.lookup(SCOPE, id),
  ];
  const opened = await env.invocations.open(SCOPE, id, request, "agent");
  assert.notEqual(opened.status, "fresh", what);
  for (const answer of [...answers, opened]) {
    assert.equal(answer?.status, "unresolved", what);
    assert.deepEqual(answer?.status === "unresolved" && answer.audit.reasons, ["journal-changed"], what);
  }
}

/** Every way of asking must fail with an IntegrityError (row damage). */
async function assertRefused(env: Env, id: string, what: string): Promise<void> {
  for (const call of [
    () => env.invocations.lookup(SCOPE, id, request),
    () => env.invocations.open(SCOPE, id, request, "agent"),
    () => env.invocations.inspect(SCOPE, id),
  ]) {
    await assert.rejects(call(), (e: unknown) => {
      assert.ok(e instanceof IntegrityError, `${what}: ${String(e)}`);
      return true;
    });
  }
}

test("an edited request hash in the row is refused, for the original and for the forged request", async (t) => {
  const env = await setup(t);
  const { id } = await recordedClaim(env);
  const forged = { task: "forged" };
  editClaim(env.home, SCOPE, id, "request_hash = ?", sha256Digest(JSON.stringify(forged)));
  await assertRefused(env, id, "request hash");
  await assert.rejects(env.invocations.open(SCOPE, id, forged, "agent"), IntegrityError);
});

test("an edited result payload or result hash is refused, even with a consistent claim hash", async (t) => {
  const env = await setup(t);
  const { id } = await recordedClaim(env);
  const original = claimRow(env.home, SCOPE, id)!;
  editClaim(env.home, SCOPE, id, "result = ?", '{"sum":11}');
  await assertRefused(env, id, "payload");

  // A forger who rewrites payload, result hash and claim hash consistently still fails: the
  // journal's signed termination names the real result hash.
  const payload = '{"sum":11}';
  const forgedHash = sha256Digest(payload);
  const o = original;
  const record = {
    scope: SCOPE, id, request_hash: o.request_hash, agent: o.agent, run_id: o.run_id, created_at: o.created_at,
    result: {
      hash: forgedHash, recorded_at: o.recorded_at,
      journal: { entries: o.journal_entries, tail_hash: o.journal_tail, bytes: o.journal_bytes, sha256: o.journal_sha256 },
    },
  } as unknown as ClaimRecord;
  editClaim(env.home, SCOPE, id, "result = ?, result_hash = ?, claim_hash = ?", payload, forgedHash, claimHashOf(record));
  const answer = await env.invocations.lookup(SCOPE, id, request);
  assert.equal(answer?.status, "unresolved");
  assert.notEqual((await env.invocations.open(SCOPE, id, request, "agent")).status, "fresh");
});

test("a journal edited, truncated, extended or deleted after the result was recorded is never replayed", async (t) => {
  const env = await setup(t);
  const damages: [string, (path: string) => void][] = [
    ["flipped byte", (p) => {
      const bytes = readFileSync(p);
      bytes[40] = bytes[40]! ^ 0x01;
      writeFileSync(p, bytes);
    }],
    ["truncated last line", (p) => truncateSync(p, readFileSync(p).byteLength - 10)],
    ["dropped last line", (p) => {
      const text = readFileSync(p, "utf8");
      writeFileSync(p, text.slice(0, text.lastIndexOf("\n", text.length - 2) + 1));
    }],
    ["appended line", (p) => appendFileSync(p, readFileSync(p, "utf8").split("\n")[0] + "\n")],
    ["deleted", (p) => rmSync(p)],
  ];
  for (const [what, damage] of damages) {
    const { id, journal } = await recordedClaim(env);
    damage(journal);
    await assertUnresolved(env, id, what);
  }
});

test("a row with a malformed column is refused as malformed", async (t) => {
  const env = await setup(t);
  const { id } = await recordedClaim(env);
  editClaim(env.home, SCOPE, id, "journal_bytes = ?", "many");
  await assertRefused(env, id, "journal_bytes");
  await assert.rejects(env.invocations.lookup(SCOPE, id), (e: unknown) => e instanceof IntegrityError && e.code === "claim-record-malformed");
});

test("list reports a damaged row without hiding the others", async (t) => {
  const env = await setup(t);
  const good = await recordedClaim(env);
  const bad = await recordedClaim(env);
  editClaim(env.home, SCOPE, bad.id, "agent = ?", "mallory");
  const page = await env.invocations.list();
  const byId = new Map(page.items.map((i) => [i.id, i]));
  assert.equal(byId.get(good.id)?.status, "recorded");
  assert.equal(byId.get(good.id)?.problem, undefined);
  assert.equal(byId.get(bad.id)?.status, "unresolved");
  assert.equal(byId.get(bad.id)?.problem, "claim-record-corrupt");
});
