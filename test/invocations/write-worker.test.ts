/**
 * The claim store's writes on the write worker (as in a compiled build): claims stay atomic and
 * durable-before-answer, refusals cross the thread with their class and code, and a worker that
 * cannot open or that dies never yields a second owner — later writes run in-process.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { Worker } from "node:worker_threads";
import Database from "better-sqlite3";
import { embeddedPaths } from "../../src/backends/embedded/index.js";
import { CLAIM_WRITE_WORKER_URL } from "../../src/backends/embedded/claims/claim-store.js";
import { LimitError, StorageError } from "../../src/core/errors.js";
import { SCOPE, setup, type EnvOptions } from "./fixtures/env.js";
import { tsWorker } from "./fixtures/ts-worker.js";

const request = { task: "write-worker" };
const onWorker: EnvOptions = { claimWriteWorker: () => tsWorker(CLAIM_WRITE_WORKER_URL) };

test("on the write worker: one owner among 16 concurrent opens, results recorded and replayed, commits shared", async (t) => {
  const env = await setup(t, onWorker);
  assert.equal(env.backend.claims.writesOffThread, true);
  const id = randomUUID();
  const outcomes = await Promise.all(Array.from({ length: 16 }, () => env.invocations.open(SCOPE, id, request, "agent")));
  assert.deepEqual(outcomes.map((o) => o.status).sort(), ["fresh", ...Array<string>(15).fill("in_progress")]);
  const handle = outcomes.find((o) => o.status === "fresh");
  assert.ok(handle?.status === "fresh");
  await handle.handle.effect({ kind: "tool", name: "t", fingerprint: "f" }, () => 1);
  assert.equal((await handle.handle.finish({ n: 1 })).status, "recorded");
  const replay = await env.invocations.run(SCOPE, id, request, "agent", () => assert.fail("re-ran a recorded id"));
  assert.equal(replay.status === "recorded" && replay.replayed, true);

  const before = env.backend.claims.commits;
  const ids = Array.from({ length: 32 }, () => randomUUID());
  const runs = await Promise.all(ids.map((i) => env.invocations.run(SCOPE, i, request, "agent", () => ({ ok: true }))));
  assert.ok(runs.every((r) => r.status === "recorded" && !r.replayed));
  const commits = env.backend.claims.commits - before;
  assert.ok(commits >= 1 && commits < 64, `${commits} commits for 32 claims and 32 results`);
  assert.equal(env.backend.claims.writesOffThread, true);
});

test("a lone caller's claim and record commit on the caller's thread while the worker is idle; a burst still goes to the worker", async (t) => {
  const env = await setup(t, onWorker);
  assert.equal(env.backend.claims.writesOffThread, true);
  // The worker answers its open first; until then writes wait for it.
  await env.invocations.run(SCOPE, randomUUID(), request, "agent", () => 0);
  const inlineBefore = env.backend.claims.inlineWrites;
  const commitsBefore = env.backend.claims.commits;
  const id = randomUUID();
  const run = await env.invocations.run(SCOPE, id, request, "agent", async (h) => {
    // The claim is durable before the effect runs (G1): another connection reads it already.
    const other = new Database(embeddedPaths(env.home).claims, { readonly: true });
    try {
      assert.equal((other.prepare("SELECT count(*) AS n FROM claims WHERE id = ?").get(id) as { n: number }).n, 1);
    } finally {
      other.close();
    }
    await h.effect({ kind: "tool", name: "t", fingerprint: "f" }, () => 1);
    return { ok: true };
  });
  assert.equal(run.status, "recorded");
  assert.equal(env.backend.claims.inlineWrites - inlineBefore, 2, "claim and record committed inline");
  assert.equal(env.backend.claims.commits - commitsBefore, 2);

  const burstInline = env.backend.claims.inlineWrites;
  const workerBefore = env.backend.claims.commits;
  const runs = await Promise.all(Array.from({ length: 16 }, () => env.invocations.run(SCOPE, randomUUID(), request, "agent", () => ({ ok: true }))));
  assert.ok(runs.every((r) => r.status === "recorded"));
  const inline = env.backend.claims.inlineWrites - burstInline;
  // At most the first write of each turn while the worker held nothing; the rest were grouped there.
  assert.ok(inline < 8, `${inline} of 32 burst writes committed inline`);
  assert.ok(env.backend.claims.commits - workerBefore < 32, "the burst's writes were grouped");
  assert.equal(env.backend.claims.writesOffThread, true);
});

test("on the write worker: exhausted capacity is refused as a LimitError and nothing is deleted", async (t) => {
  const env = await setup(t, { ...onWorker, limits: { maxClaims: 2 } });
  for (let i = 0; i < 2; i++) assert.equal((await env.invocations.run(SCOPE, randomUUID(), request, "agent", () => 1)).status, "recorded");
  await assert.rejects(
    env.invocations.open(SCOPE, randomUUID(), request, "agent"),
    (e: unknown) => e instanceof LimitError && e.code === "capacity-exhausted" && e.status === 507,
  );
  assert.equal(env.backend.claims.count(), 2);
});

test("a write worker that cannot open its connection: every write runs in-process", async (t) => {
  const refusing = (): Worker =>
    new Worker(
      `const { parentPort } = require("node:worker_threads");
       parentPort.on("message", (m) => { if (m.kind === "open") parentPort.postMessage({ kind: "open-failed", error: { name: "StorageError", code: "storage-io", message: "no", status: 503 } }); });`,
      { eval: true },
    );
  const env = await setup(t, { claimWriteWorker: refusing });
  const id = randomUUID();
  const [a, b] = await Promise.all([env.invocations.open(SCOPE, id, request, "agent"), env.invocations.open(SCOPE, id, request, "agent")]);
  assert.deepEqual([a.status, b.status].sort(), ["fresh", "in_progress"]);
  assert.equal(env.backend.claims.writesOffThread, false);
  if (a.status === "fresh") await a.handle.finish({ ok: 1 });
  if (b.status === "fresh") await b.handle.finish({ ok: 1 });
  assert.equal((await env.invocations.lookup(SCOPE, id, request))?.status, "recorded");
});

test("a write worker that dies: the writes it held are refused, never granted twice; later writes run in-process", async (t) => {
  let worker: Worker | undefined;
  const env = await setup(t, {
    claimWriteWorker: () => {
      worker = tsWorker(CLAIM_WRITE_WORKER_URL);
      return worker;
    },
  });
  assert.equal((await env.invocations.run(SCOPE, randomUUID(), request, "agent", () => 1)).status, "recorded");
  const id = randomUUID();
  const opening = env.invocations.open(SCOPE, id, request, "agent");
  await worker!.terminate();
  const first = await opening.then(
    (o) => o.status,
    (e: unknown) => (e instanceof StorageError ? e.code : String(e)),
  );
  // Either the claim committed before the worker went (fresh) or the open was refused.
  assert.ok(first === "fresh" || first === "claim-writer-failed", first);
  assert.equal(env.backend.claims.writesOffThread, false);
  // A refused claim may or may not have committed: if it did, it was released before the refusal
  // and reads unresolved (not in_progress for the rest of the process's life); if not, the id is
  // free. Either way there is never a second owner.
  const again = await env.invocations.open(SCOPE, id, request, "agent");
  if (first === "fresh") assert.notEqual(again.status, "fresh", "a second owner for one id");
  else assert.ok(again.status === "fresh" || again.status === "unresolved", again.status);
  const third = await env.invocations.open(SCOPE, id, request, "agent");
  assert.notEqual(third.status, "fresh", "a second owner for one id");
  assert.equal((await env.invocations.run(SCOPE, randomUUID(), request, "agent", () => 2)).status, "recorded");
});

test("a write worker that dies after committing a claim and before answering: the claim reads unresolved at once, never in_progress, never fresh", async (t) => {
  const env = await setup(t, { claimWriteWorker: () => tsWorker(CLAIM_WRITE_WORKER_URL, { exitBeforeFirstReply: true }) });
  const id = randomUUID();
  const refused = await env.invocations.open(SCOPE, id, request, "agent").then(
    (o) => o.status,
    (e: unknown) => (e instanceof StorageError ? e.code : String(e)),
  );
  assert.equal(refused, "claim-writer-failed");
  assert.equal(env.backend.claims.writesOffThread, false);
  // The claim committed (the worker exits only after COMMIT) and nobody owns the run.
  assert.equal((await env.invocations.lookup(SCOPE, id, request))?.status, "unresolved");
  assert.equal((await env.invocations.open(SCOPE, id, request, "agent")).status, "unresolved");
  assert.equal((await env.invocations.run(SCOPE, randomUUID(), request, "agent", () => 3)).status, "recorded");
});
