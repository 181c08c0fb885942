import { test } from "node:test";
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { Worker } from "node:worker_threads";
import fc from "fast-check";
import { canonicalDigest } from "../../src/core/canonical.js";
import { claimHashOf, type HashedClaimFields } from "../../src/invocations/claim-hash.js";
import { checkRun } from "../../src/invocations/run-check.js";
import { RunChecker } from "../../src/invocations/run-checker.js";
import { SCOPE, setup } from "./fixtures/env.js";
import { tsRunChecker } from "./fixtures/ts-worker.js";
import { LONG_TEST_MS } from "../support/wait.js";

test("journal checks on worker threads answer exactly what an inline check answers", { timeout: LONG_TEST_MS }, async (t) => {
  const env = await setup(t);
  const outcome = await env.invocations.run(SCOPE, randomUUID(), { n: 1 }, "agent", async (h) => {
    await h.effect({ kind: "tool", name: "x", fingerprint: "y" }, () => 1);
    return { ok: true };
  });
  assert.equal(outcome.status, "recorded");
  const runId = outcome.status === "recorded" ? outcome.audit.run_id : "";
  const bytes = readFileSync(join(env.home, "journals", `${runId}.ndjson`));
  const keys = await env.invocations.publicKeys();
  const damaged = Buffer.from(bytes);
  damaged[100] = damaged[100]! ^ 1;
  const pool = tsRunChecker(2);
  t.after(() => pool.close());
  for (const input of [bytes, damaged, bytes.subarray(0, bytes.byteLength - 5)]) {
    const inline = checkRun(input, keys, { runId });
    const pooled = await Promise.all([pool.check(input, keys, { runId }), pool.check(input, keys, { runId })]);
    assert.deepEqual(pooled[0], inline);
    assert.deepEqual(pooled[1], inline);
  }
  assert.equal(pool.workers, 2);
  assert.equal(pool.inline, false, "the pool fell back to inline checks: its workers did not run");
  assert.equal(checkRun(bytes, keys, { runId }).inspection.clean, true);
  assert.equal(checkRun(damaged, keys, { runId }).ok, false);
});

test("checks one after another share one worker: the pool grows only while every worker owes a check", { timeout: LONG_TEST_MS }, async (t) => {
  const pool = tsRunChecker(3);
  t.after(() => pool.close());
  const empty = new Uint8Array();
  const inline = checkRun(empty, [], {});
  for (let i = 0; i < 4; i++) assert.deepEqual(await pool.check(empty, [], {}), inline);
  assert.equal(pool.workers, 1, "a worker was started while an idle one could take the check");
  assert.equal(pool.inline, false, "the pool fell back to inline checks: its worker did not run");
  await Promise.all([pool.check(empty, [], {}), pool.check(empty, [], {}), pool.check(empty, [], {})]);
  assert.equal(pool.workers, 3, "three checks at once, three workers");
});

test("a worker that dies mid-check costs nothing: the check is redone inline", async () => {
  const empty = new Uint8Array();
  const inline = checkRun(empty, [], {});
  const dying = new RunChecker({ workers: 1, spawn: () => new Worker("process.exit(3)", { eval: true }) });
  assert.equal(dying.inline, false);
  assert.deepEqual(await dying.check(empty, [], {}), inline);
  assert.equal(dying.inline, true);
  assert.deepEqual(await dying.check(empty, [], {}), inline);
  await dying.close();
  const failing = new RunChecker({
    workers: 1,
    spawn: () => {
      throw new Error("no threads here");
    },
  });
  assert.deepEqual(await failing.check(empty, [], {}), inline);
});

test("the claim hash is the canonical (RFC 8785) digest of the row's identity and outcome", () => {
  const text = fc.string({ unit: "binary", minLength: 1, maxLength: 40 });
  const hex = fc.stringMatching(/^[0-9a-f]{64}$/);
  const digest = hex.map((h) => `sha256:${h}` as const);
  const count = fc.integer({ min: 0, max: Number.MAX_SAFE_INTEGER });
  const row = fc.record({
    scope: text,
    id: fc.uuid(),
    request_hash: digest,
    agent: text,
    run_id: fc.uuid(),
    created_at: count,
    result: fc.option(
      fc.record({ hash: digest, recorded_at: count, journal: fc.record({ entries: count, tail_hash: hex, bytes: count, sha256: digest }) }),
      { nil: undefined },
    ),
  });
  fc.assert(
    fc.property(row, (claim) => {
      const { result, ...identity } = claim;
      const canonical = canonicalDigest({
        v: 1,
        ...identity,
        result: result === undefined ? null : { hash: result.hash, recorded_at: result.recorded_at, journal: { ...result.journal } },
      });
      assert.equal(claimHashOf(claim as HashedClaimFields), canonical);
    }),
    { numRuns: 300 },
  );
});
