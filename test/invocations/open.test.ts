import { test } from "node:test";
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { readdirSync } from "node:fs";
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import { ConflictError, LimitError, ValidationError } from "../../src/core/errors.js";
import { EffectFailed, Invocations } from "../../src/invocations/index.js";
import { freshHandle as fresh, SCOPE, setup, stateDigest } from "./fixtures/env.js";

const request = { task: "useful work" };

test("16 concurrent opens in one process: exactly one fresh, fifteen in_progress, one durable transaction", async (t) => {
  const env = await setup(t);
  const id = randomUUID();
  const before = env.backend.claims.commits;
  const outcomes = await Promise.all(Array.from({ length: 16 }, () => env.invocations.open(SCOPE, id, request, "agent")));
  const statuses = outcomes.map((o) => o.status).sort();
  assert.deepEqual(statuses, ["fresh", ...Array<string>(15).fill("in_progress")]);
  // All 16 were queued in one turn: group commit put them in one transaction.
  assert.equal(env.backend.claims.commits - before, 1);
  const handle = fresh(outcomes.find((o) => o.status === "fresh")!);
  assert.equal((await env.invocations.lookup(SCOPE, id))?.status, "in_progress");
  const done = await handle.finish({ sum: 10 });
  assert.equal(done.status, "recorded");
  const again = await Promise.all(Array.from({ length: 4 }, () => env.invocations.open(SCOPE, id, request, "agent")));
  for (const o of again) {
    assert.equal(o.status, "recorded");
    if (o.status === "recorded") {
      assert.deepEqual(o.result, { sum: 10 });
      assert.equal(o.replayed, true);
    }
  }
});

test("run: the first call runs and records, later calls replay without running", async (t) => {
  const env = await setup(t);
  const id = randomUUID();
  let runs = 0;
  const work = async (h: Parameters<Parameters<typeof env.invocations.run>[4]>[0]) => {
    runs++;
    const value = await h.effect({ kind: "tool", name: "sum", fingerprint: "1+2" }, () => 3);
    return { value };
  };
  const first = await env.invocations.run(SCOPE, id, request, "agent", work);
  assert.equal(first.status, "recorded");
  assert.equal(first.status === "recorded" && first.replayed, false);
  const second = await env.invocations.run(SCOPE, id, request, "agent", work);
  assert.equal(second.status, "recorded");
  assert.equal(second.status === "recorded" && second.replayed, true);
  assert.deepEqual(second.status === "recorded" && second.result, { value: 3 });
  assert.equal(runs, 1);
  // A different request under the id is refused, another scope is independent.
  await assert.rejects(env.invocations.run(SCOPE, id, { task: "other" }, "agent", work), (e: unknown) => e instanceof ConflictError && e.code === "idempotency-conflict");
  const other = await env.invocations.run("another-scope", id, request, "agent", work);
  assert.equal(other.status === "recorded" && other.replayed, false);
  assert.equal(runs, 2);
});

test("a different request under an id is a conflict and writes nothing", async (t) => {
  const env = await setup(t);
  const id = randomUUID();
  const h = fresh(await env.invocations.open(SCOPE, id, request, "agent"));
  await h.finish({ ok: true });
  const inProgressId = randomUUID();
  const held = fresh(await env.invocations.open(SCOPE, inProgressId, request, "agent"));
  const before = stateDigest(env.home);
  for (const target of [id, inProgressId]) {
    await assert.rejects(env.invocations.open(SCOPE, target, { task: "different" }, "agent"), (e: unknown) => {
      assert.ok(e instanceof ConflictError);
      assert.equal(e.code, "idempotency-conflict");
      return true;
    });
    await assert.rejects(env.invocations.lookup(SCOPE, target, { task: "different" }), ConflictError);
  }
  assert.equal(stateDigest(env.home), before, "a refused conflict changed the state directory");
  await held.release();
});

test("lookup never creates a claim; an unknown id stays unknown", async (t) => {
  const env = await setup(t);
  const id = randomUUID();
  const before = stateDigest(env.home);
  assert.equal(await env.invocations.lookup(SCOPE, id, request), undefined);
  assert.equal(await env.invocations.lookup(SCOPE, id), undefined);
  assert.equal(stateDigest(env.home), before);
  assert.equal(fresh(await env.invocations.open(SCOPE, id, request, "agent")).open, true);
});

test("effects: failed is clean, unknown or unfinished keeps the claim unresolved and never fresh again", async (t) => {
  const env = await setup(t);
  // EffectFailed: definitely no effect, the run is clean and its result recorded.
  const cleanId = randomUUID();
  const clean = fresh(await env.invocations.open(SCOPE, cleanId, request, "agent"));
  await assert.rejects(
    clean.effect({ kind: "network", name: "post", fingerprint: "x" }, () => {
      throw new EffectFailed("refused by the server", { detail: { status: 403 } });
    }),
    EffectFailed,
  );
  const recorded = await clean.finish({ posted: false }, { failed: true });
  assert.equal(recorded.status, "recorded");

  // Any other exception: the effect may have happened.
  const unknownId = randomUUID();
  const unknown = fresh(await env.invocations.open(SCOPE, unknownId, request, "agent"));
  await assert.rejects(
    unknown.effect({ kind: "network", name: "post", fingerprint: "x" }, () => {
      throw new Error("connection reset after send");
    }),
    /connection reset/,
  );
  const unresolved = await unknown.finish({ posted: "maybe" });
  assert.equal(unresolved.status, "unresolved");
  assert.deepEqual(
    unresolved.status === "unresolved" && unresolved.audit.findings?.map((f) => f.reason),
    ["effect-outcome-unknown"],
  );
  const reopened = await env.invocations.open(SCOPE, unknownId, request, "agent");
  assert.equal(reopened.status, "unresolved");
  assert.equal(reopened.status === "unresolved" && reopened.audit.run_id, unknown.run_id);
});

test("release and asyncDispose give the run up: unresolved, never re-run", async (t) => {
  const env = await setup(t);
  const id = randomUUID();
  {
    await using handle = fresh(await env.invocations.open(SCOPE, id, request, "agent"));
    await handle.journal.append({ type: "note", progress: "half" });
    assert.equal((await env.invocations.lookup(SCOPE, id))?.status, "in_progress");
  }
  const after = await env.invocations.lookup(SCOPE, id);
  assert.equal(after?.status, "unresolved");
  assert.deepEqual(after?.status === "unresolved" && after.audit.reasons, ["released"]);
  assert.equal((await env.invocations.open(SCOPE, id, request, "agent")).status, "unresolved");

  const cancelledId = randomUUID();
  const h = fresh(await env.invocations.open(SCOPE, cancelledId, request, "agent"));
  await h.release({ reason: "cancelled" });
  await assert.rejects(h.finish({}), (e: unknown) => e instanceof ConflictError && e.code === "invocation-handle-closed");
  const inspection = await env.invocations.inspect(SCOPE, cancelledId);
  assert.equal(inspection.report.journal.termination, "cancelled");
  assert.equal(inspection.report.status, "unresolved");
});

test("the handle journals run.started/terminated itself and refuses them from the caller", async (t) => {
  const env = await setup(t);
  const id = randomUUID();
  const h = fresh(await env.invocations.open(SCOPE, id, request, "agent", { provider: "claude" }));
  assert.equal(h.journal.entries, 1);
  await assert.rejects(
    h.journal.append({ type: "run.terminated", reason: "completed" } as never),
    (e: unknown) => e instanceof ValidationError && e.code === "journal-event-reserved",
  );
  await h.journal.append({ type: "effect.started", effect_id: "e1", kind: "process", name: "git", fingerprint: "status" });
  await h.journal.append({ type: "effect.finished", effect_id: "e1", outcome: "succeeded" });
  const done = await h.finish({ ok: 1 });
  assert.equal(done.status, "recorded");
  assert.equal(done.status === "recorded" && done.audit.journal?.entries, 4);
  const inspection = await env.invocations.inspect(SCOPE, id);
  assert.equal(inspection.report.journal.ok, true);
  assert.equal(inspection.report.journal.effects, 1);
});

test("bounds: over-limit or malformed inputs are refused with their own codes and nothing is written", async (t) => {
  const env = await setup(t, { limits: { scopeBytes: 16, requestBytes: 64, resultBytes: 32 } });
  const before = stateDigest(env.home);
  const cases: [() => Promise<unknown>, new (...a: never[]) => Error, string][] = [
    [() => env.invocations.open("", randomUUID(), request, "agent"), ValidationError, "invalid-scope"],
    [() => env.invocations.open("s".repeat(17), randomUUID(), request, "agent"), LimitError, "scope-too-large"],
    [() => env.invocations.open("a\nb", randomUUID(), request, "agent"), ValidationError, "invalid-scope"],
    [() => env.invocations.open(SCOPE, "not-a-uuid", request, "agent"), ValidationError, "invocation-id-invalid"],
    [() => env.invocations.open(SCOPE, randomUUID(), { big: "x".repeat(64) }, "agent"), LimitError, "request-too-large"],
    [() => env.invocations.open(SCOPE, randomUUID(), request, ""), ValidationError, "invalid-agent"],
    [() => env.invocations.open(SCOPE, randomUUID(), { n: Number.NaN }, "agent"), ValidationError, "invalid-json"],
    [() => env.invocations.lookup(SCOPE, randomUUID(), { big: "x".repeat(64) }), LimitError, "request-too-large"],
  ];
  for (const [call, type, code] of cases) {
    await assert.rejects(call(), (e: unknown) => {
      assert.ok(e instanceof type, `${code}: got ${String(e)}`);
      assert.equal((e as { code?: string }).code, code);
      return true;
    });
  }
  assert.equal(stateDigest(env.home), before);
  // An over-limit result is refused with the handle still open; a smaller one is recorded.
  const h = fresh(await env.invocations.open(SCOPE, randomUUID(), request, "agent"));
  await assert.rejects(h.finish({ text: "x".repeat(64) }), (e: unknown) => e instanceof LimitError && e.code === "result-too-large");
  assert.equal(h.open, true);
  assert.equal((await h.finish({ ok: 1 })).status, "recorded");
});

test("ids are case-insensitive UUIDs: the upper-case form is the same invocation", async (t) => {
  const env = await setup(t);
  const id = randomUUID();
  fresh(await env.invocations.open(SCOPE, id, request, "agent"));
  assert.equal((await env.invocations.open(SCOPE, id.toUpperCase(), request, "agent")).status, "in_progress");
});

test("a handle dropped without finish or release is released once it is garbage", async (t) => {
  const env = await setup(t);
  const id = randomUUID();
  await (async () => {
    const dropped = fresh(await env.invocations.open(SCOPE, id, request, "agent"));
    assert.equal(dropped.open, true);
  })();
  assert.equal((await env.invocations.lookup(SCOPE, id))?.status, "in_progress");
  setFlagsFromString("--expose-gc");
  const gc = runInNewContext("gc") as () => void;
  let status: string | undefined;
  for (let i = 0; i < 50 && status !== "unresolved"; i++) {
    gc();
    await new Promise((resolve) => setTimeout(resolve, 10));
    status = (await env.invocations.lookup(SCOPE, id))?.status;
  }
  assert.equal(status, "unresolved");
  assert.equal((await env.invocations.open(SCOPE, id, request, "agent")).status, "unresolved");
});

test("a fresh claim's journal is created while the claim commits, not after it (one fewer wait for a single caller)", async (t) => {
  const env = await setup(t);
  await env.invocations.publicKeys(); // key creation stays out of the figure
  const events: string[] = [];
  const claims = env.backend.claims;
  const claim = claims.claim.bind(claims);
  claims.claim = async (...args: Parameters<typeof claim>) => {
    const attempt = await claim(...args);
    events.push("claim durable");
    return attempt;
  };
  const journals = env.backend.journals;
  const create = journals.create.bind(journals);
  journals.create = (runId: string) => {
    events.push("journal create");
    return create(runId);
  };
  const handle = fresh(await env.invocations.open(SCOPE, randomUUID(), request, "agent"));
  assert.deepEqual(events, ["journal create", "claim durable"]);
  assert.equal((await handle.finish({ ok: true })).status, "recorded");
  // A replay creates nothing: open answers it from its read, before any claim or journal.
  events.length = 0;
  assert.equal((await env.invocations.open(SCOPE, handle.id, request, "agent")).status, "recorded");
  assert.deepEqual(events, []);
});

test("callers that lose the race for a claim leave no journal behind", async (t) => {
  const env = await setup(t);
  const id = randomUUID();
  const outcomes = await Promise.all(Array.from({ length: 16 }, () => env.invocations.open(SCOPE, id, request, "agent")));
  const handle = fresh(outcomes.find((o) => o.status === "fresh")!);
  const files = readdirSync(env.backend.journals.dir).filter((name) => name.endsWith(".ndjson"));
  assert.deepEqual(files, [`${handle.run_id}.ndjson`]);
  assert.equal((await handle.finish({ ok: true })).status, "recorded");
});

test("a new id is read once before it is claimed: by open, or by the caller that says it looked it up", async (t) => {
  const env = await setup(t);
  // The real store, with its row reads counted (a Proxy: the store's private fields need `this` to be the store).
  let reads = 0;
  const store = env.backend.claims;
  const claims = new Proxy(store, {
    get(target, prop) {
      const value: unknown = Reflect.get(target, prop, target);
      if (typeof value !== "function") return value;
      const method = value as (...args: unknown[]) => unknown;
      return (...args: unknown[]) => {
        if (prop === "get") reads++;
        return method.apply(target, args);
      };
    },
  });
  const invocations = new Invocations({ claims, journals: env.backend.journals, keys: env.backend.keys, limits: env.backend.limits });
  t.after(() => invocations.close());

  const opened = await invocations.open(SCOPE, randomUUID(), request, "agent");
  assert.equal(reads, 1, "open reads a new id once, then claims it");
  await fresh(opened).finish({ ok: true });

  // The facade's path: Warden.start has just read the id as absent (its replay check).
  reads = 0;
  const id = randomUUID();
  assert.equal(await invocations.lookup(SCOPE, id, request), undefined);
  const claimed = await invocations.open(SCOPE, id, request, "agent", { lookedUp: true });
  assert.equal(reads, 1, "the caller's lookup is the only read of the new id");
  await fresh(claimed).finish({ ok: true });

  // A replay is still answered from a read alone: no claim attempt, nothing written.
  reads = 0;
  const commits = store.commits;
  const replayed = await invocations.open(SCOPE, id, request, "agent");
  assert.equal(replayed.status, "recorded");
  assert.equal(reads, 1);
  assert.equal(store.commits, commits);
});

test("told the id was looked up, the claim store inserts first: an id claimed meanwhile is answered from the write", async (t) => {
  const env = await setup(t);
  const id = randomUUID();
  await fresh(await env.invocations.open(SCOPE, id, request, "agent")).finish({ ok: true });
  const store = env.backend.claims;
  const commits = store.commits;
  // Another caller recorded it between this caller's lookup and its claim.
  const raced = await env.invocations.open(SCOPE, id, request, "agent", { lookedUp: true });
  assert.equal(raced.status, "recorded");
  assert.equal(store.commits, commits + 1, "the write transaction (not a read before it) found the row");
});

test("a run in progress here is read without its journal; once parked, its journal's last line makes it awaiting_approval", async (t) => {
  const env = await setup(t);
  const id = randomUUID();
  const handle = fresh(await env.invocations.open(SCOPE, id, request, "agent"));
  const journals = env.backend.journals;
  const read = journals.read.bind(journals);
  let reads = 0;
  journals.read = (...args: Parameters<typeof read>) => {
    reads++;
    return read(...args);
  };
  assert.equal((await env.invocations.lookup(SCOPE, id))?.status, "in_progress");
  assert.equal((await env.invocations.list({ status: "in_progress", limit: 10 })).items.length, 1);
  assert.equal(reads, 0, "a status read of a run this process is writing read its journal");
  await handle.journal.append({ type: "run.parked", call_id: "claude:a", tool: "Bash", policies: ["ask-rm"], deadline: "2026-12-07T00:00:00.000Z", session: "e1bc0f7e-1b2c-4416-aa62-89129da5a5d2", workspace: "main" });
  await handle.park();
  assert.equal((await env.invocations.lookup(SCOPE, id))?.status, "awaiting_approval");
  assert.ok(reads > 0);
});
