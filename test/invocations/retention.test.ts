import { test } from "node:test";
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { ConflictError, ValidationError } from "../../src/core/errors.js";
import { DEFAULT_LIMITS } from "../../src/core/limits.js";
import { recordedCopies } from "../../src/invocations/index.js";
import { SCOPE, setup, type Env } from "./fixtures/env.js";

const request = { task: "summarize" };
const T0 = Date.parse("2030-01-01T00:00:00.000Z");

function clock(start: number): { now: () => Date; set(ms: number): void } {
  let current = start;
  return { now: () => new Date(current), set: (ms) => (current = ms) };
}

async function record(env: Env, id = randomUUID()): Promise<string> {
  const outcome = await env.invocations.run(SCOPE, id, request, "agent", () => ({ summary: `of ${id}` }));
  assert.equal(outcome.status, "recorded");
  return id;
}

test("prune drops payloads only; a pruned id answers recorded+expired, refuses other requests, never re-runs", async (t) => {
  const time = clock(T0);
  const env = await setup(t, { now: time.now });
  const a = await record(env);
  const b = await record(env);
  const unresolved = randomUUID();
  const opened = await env.invocations.open(SCOPE, unresolved, request, "agent");
  assert.equal(opened.status, "fresh");
  if (opened.status === "fresh") await opened.handle.release();
  time.set(T0 + 10);
  const recent = await record(env);

  assert.deepEqual(await env.invocations.prune({ olderThan: new Date(T0 + 5) }), { pruned: 2 });
  for (const id of [a, b]) {
    const answer = await env.invocations.lookup(SCOPE, id, request);
    assert.equal(answer?.status, "recorded");
    if (answer?.status === "recorded") {
      assert.equal(answer.expired, true);
      assert.equal(answer.result, undefined);
      assert.match(answer.result_hash, /^sha256:[0-9a-f]{64}$/);
    }
    await assert.rejects(env.invocations.open(SCOPE, id, { task: "other" }, "agent"), (e: unknown) => e instanceof ConflictError && e.code === "idempotency-conflict");
    let ran = false;
    const rerun = await env.invocations.run(SCOPE, id, request, "agent", () => {
      ran = true;
      return {};
    });
    assert.equal(ran, false);
    assert.equal(rerun.status === "recorded" && rerun.expired && rerun.replayed, true);
  }
  const kept = await env.invocations.lookup(SCOPE, recent);
  assert.deepEqual(kept?.status === "recorded" && kept.result, { summary: `of ${recent}` });
  assert.equal((await env.invocations.lookup(SCOPE, unresolved))?.status, "unresolved");
  assert.deepEqual(await env.invocations.prune({ olderThan: new Date(T0 + 5) }), { pruned: 0 });
  const listed = new Map((await env.invocations.list({ status: "recorded" })).items.map((i) => [i.id, i.expired]));
  assert.deepEqual([listed.get(a), listed.get(b), listed.get(recent)], [true, true, false]);
});

test("prune without a date applies the retention limit from the configured clock", async (t) => {
  const time = clock(T0);
  const env = await setup(t, { now: time.now });
  const id = await record(env);
  time.set(T0 + DEFAULT_LIMITS.resultRetentionMs);
  assert.deepEqual(await env.invocations.prune(), { pruned: 0 });
  time.set(T0 + DEFAULT_LIMITS.resultRetentionMs + 1);
  assert.deepEqual(await env.invocations.prune(), { pruned: 1 });
  assert.equal((await env.invocations.lookup(SCOPE, id))?.status, "recorded");
});

test("bulk-seeded copies replay like real claims, and prune walks thousands of rows in chunks", async (t) => {
  const env = await setup(t);
  const template = await env.backend.claims.get({ scope: SCOPE, id: await record(env) });
  assert.ok(template !== undefined);
  const ids = Array.from({ length: 2500 }, () => randomUUID());
  assert.equal(env.backend.claims.importRecorded(recordedCopies(template, ids.length, (i) => ids[i]!), { batchSize: 1000 }), 2500);
  assert.equal(env.backend.claims.count(), 2501);
  const copy = await env.invocations.lookup(SCOPE, ids[1234]!, request);
  assert.deepEqual(copy?.status === "recorded" && copy.result, template.result?.payload && JSON.parse(template.result.payload));
  // Importing an existing key writes nothing of its batch.
  assert.throws(() => env.backend.claims.importRecorded(recordedCopies(template, 1, () => ids[0]!)));
  assert.equal(env.backend.claims.count(), 2501);

  assert.deepEqual(await env.invocations.prune({ olderThan: new Date(Date.now() + 60_000) }), { pruned: 2501 });
  for (const id of [ids[0]!, ids[1999]!, ids[2499]!]) {
    const answer = await env.invocations.lookup(SCOPE, id);
    assert.equal(answer?.status === "recorded" && answer.expired, true);
  }
});

test("list pages through claims in order and filters by status", async (t) => {
  const env = await setup(t);
  const recorded = [await record(env), await record(env), await record(env)];
  const released = randomUUID();
  const r = await env.invocations.open(SCOPE, released, request, "agent");
  if (r.status === "fresh") await r.handle.release();
  const running = randomUUID();
  assert.equal((await env.invocations.open("other-scope", running, request, "agent")).status, "fresh");

  const seen: string[] = [];
  let cursor: string | undefined;
  let pages = 0;
  do {
    const page = await env.invocations.list({ limit: 2, ...(cursor === undefined ? {} : { cursor }) });
    assert.ok(page.items.length <= 2);
    seen.push(...page.items.map((i) => `${i.scope}/${i.id}`));
    cursor = page.cursor;
    pages++;
  } while (cursor !== undefined && pages < 10);
  const expected = [...recorded.map((id) => `${SCOPE}/${id}`), `${SCOPE}/${released}`, `other-scope/${running}`].sort();
  assert.deepEqual(seen, expected);

  const ids = async (status: "unresolved" | "in_progress" | "recorded") =>
    (await env.invocations.list({ status })).items.map((i) => i.id).sort();
  assert.deepEqual(await ids("unresolved"), [released]);
  assert.deepEqual(await ids("in_progress"), [running]);
  assert.deepEqual(await ids("recorded"), [...recorded].sort());
  await assert.rejects(env.invocations.list({ cursor: "garbage" }), (e: unknown) => e instanceof ValidationError && e.code === "invalid-cursor");
  await assert.rejects(env.invocations.list({ limit: 0 }), (e: unknown) => e instanceof ValidationError && e.code === "invalid-list-limit");
});
