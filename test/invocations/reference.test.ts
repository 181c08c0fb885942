/**
 * Ports of the three tests of the reference (symbi-runtime 1.21.1, invocation.rs), scenario by
 * scenario, onto warden's SQLite claims, signed journals and secure storage.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { chmodSync, linkSync, mkdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { ConflictError, IntegrityError, LimitError, UnsafeStorageError, isWardenError } from "../../src/core/errors.js";
import { CLAIMS_DATABASE } from "../../src/backends/embedded/index.js";
import { verifyJournal } from "../../src/journal/verify.js";
import { freshHandle as handleOf, openEnv, SCOPE, setup, stateDigest, tempHome } from "./fixtures/env.js";
import { claimRow, editClaim } from "./fixtures/tamper.js";

test("reference 1: concurrent retries have one owner and completed results are cached", async (t) => {
  const env = await setup(t);
  const id = randomUUID();
  const request = { task: "useful work" };
  const outcomes = await Promise.all(Array.from({ length: 8 }, () => env.invocations.open(SCOPE, id, request, randomUUID())));
  const owners = outcomes.filter((o) => o.status === "fresh");
  assert.equal(owners.length, 1);
  assert.equal(outcomes.filter((o) => o.status === "in_progress").length, 7);
  const owner = handleOf(owners[0]!);

  // The claim can start only once: a second run.started is refused.
  await assert.rejects(
    owner.journal.append({ type: "run.started", invocation: { scope: SCOPE, id, request_hash: owner.request_hash }, agent: "x" } as never),
    /run\.started is written by the invocation handle/,
  );
  const payload = { sum: 10 };
  const recorded = await owner.finish(payload);
  assert.equal(recorded.status, "recorded");

  // The journal verifies and its run.started names the invocation.
  const keys = await env.invocations.publicKeys();
  const bytes = readFileSync(join(env.home, "journals", `${owner.run_id}.ndjson`));
  const report = verifyJournal(bytes, keys, { runId: owner.run_id });
  assert.equal(report.ok, true);
  assert.equal(report.entries, 2);
  const started = report.valid[0]!.event;
  assert.equal(started.type, "run.started");
  assert.deepEqual(started.type === "run.started" && started.invocation, { scope: SCOPE, id, request_hash: owner.request_hash });

  const cached = await env.invocations.open(SCOPE, id, request, randomUUID());
  assert.equal(cached.status, "recorded");
  assert.equal(cached.status === "recorded" && cached.audit.run_id, owner.run_id);
  assert.deepEqual(cached.status === "recorded" && cached.result, payload);
  await assert.rejects(env.invocations.open(SCOPE, id, { task: "different" }, "agent"), ConflictError);
  assert.equal((await env.invocations.open("another-scope", id, request, "agent")).status, "fresh");
});

test("reference 2: missing outcomes and damaged records never create another owner", async (t) => {
  const env = await setup(t);
  const request = { task: "effect" };
  for (const state of ["empty", "unknown_effect", "terminal_without_result"] as const) {
    const id = randomUUID();
    const run = handleOf(await env.invocations.open(SCOPE, id, request, "agent"));
    const runId = run.run_id;
    if (state === "unknown_effect") {
      await run.journal.append({ type: "effect.started", effect_id: "call", kind: "tool", name: "fixture", fingerprint: "fingerprint" });
      const finished = await run.finish({ ignored: true });
      assert.equal(finished.status, "unresolved", state);
    } else if (state === "terminal_without_result") {
      await run.release({ reason: "failed" });
    } else {
      await run.release();
    }
    const existing = await env.invocations.open(SCOPE, id, request, "agent");
    assert.equal(existing.status, "unresolved", state);
    assert.equal(existing.status === "unresolved" && existing.audit.run_id, runId, state);

    // Damaged records: every kind of edit reads as an error, never as a new owner.
    const damages: [string, ...unknown[]][] = [
      ["claim_hash = ?", "sha256:" + "0".repeat(64)],
      ["run_id = ?", "not-a-run"],
      ["created_at = ?", "yesterday"],
      ["result = ?", '{"forged":true}'],
      ["request_hash = ?", "{"],
    ];
    for (const [set, value] of damages) {
      const original = claimRow(env.home, SCOPE, id)!;
      assert.equal(editClaim(env.home, SCOPE, id, set, value), 1);
      for (const call of [() => env.invocations.open(SCOPE, id, request, "agent"), () => env.invocations.lookup(SCOPE, id, request)]) {
        await assert.rejects(call(), (e: unknown) => {
          assert.ok(e instanceof IntegrityError, `${state}/${set}: ${String(e)}`);
          return true;
        });
      }
      // Restore the row for the next damage.
      const column = set.split(" ")[0]!;
      editClaim(env.home, SCOPE, id, `${column} = ?`, original[column]);
      assert.equal((await env.invocations.open(SCOPE, id, request, "agent")).status, "unresolved");
    }
  }
});

test("reference 3: unsafe claim files and exhausted capacity refuse without creating more records", async (t) => {
  const { root, home } = tempHome();
  t.after(() => rmSync(root, { recursive: true, force: true }));
  mkdirSync(home, { mode: 0o700 });
  const db = join(home, CLAIMS_DATABASE);
  const outside = join(root, "outside");
  writeFileSync(outside, "protected", { mode: 0o600 });
  const refusedWith = async (code: string): Promise<void> => {
    await assert.rejects(openEnv(home), (e: unknown) => {
      assert.ok(e instanceof UnsafeStorageError, String(e));
      assert.equal(e.code, code);
      return true;
    });
    assert.equal(readFileSync(outside, "utf8"), "protected");
  };

  symlinkSync(outside, db);
  await refusedWith("unsafe-storage-symlink");
  rmSync(db);
  linkSync(outside, db);
  await refusedWith("unsafe-storage-hard-link");
  rmSync(db);
  symlinkSync(outside, `${db}-wal`);
  await refusedWith("unsafe-storage-symlink");
  rmSync(`${db}-wal`);

  // A healthy store; then a loose mode on the database is refused.
  let env = await openEnv(home, { limits: { maxClaims: 2 } });
  const ids = [randomUUID(), randomUUID()];
  for (const id of ids) await env.invocations.run(SCOPE, id, null, "agent", () => ({ ok: id }));
  await env.close();
  chmodSync(db, 0o644);
  await refusedWith("unsafe-storage-mode");
  chmodSync(db, 0o600);

  // Exhausted capacity: a new claim is refused, nothing is written or deleted, replays still work.
  env = await openEnv(home, { limits: { maxClaims: 2 } });
  t.after(() => env.close());
  const before = stateDigest(home);
  await assert.rejects(env.invocations.open(SCOPE, randomUUID(), null, "agent"), (e: unknown) => {
    assert.ok(e instanceof LimitError);
    assert.equal(e.code, "capacity-exhausted");
    return true;
  });
  assert.equal(stateDigest(home), before);
  for (const id of ids) {
    const replay = await env.invocations.open(SCOPE, id, null, "agent");
    assert.deepEqual(replay.status === "recorded" && replay.result, { ok: id });
  }
  assert.equal(env.backend.claims.count(), 2);

  // A hard-linked journal is refused on replay: never replayed from a file someone else can alter.
  const recorded = await env.invocations.lookup(SCOPE, ids[0]!);
  const runId = recorded?.status === "recorded" ? recorded.audit.run_id : assert.fail("not recorded");
  linkSync(join(home, "journals", `${runId}.ndjson`), join(root, "journal-alias"));
  await assert.rejects(env.invocations.lookup(SCOPE, ids[0]!), (e: unknown) => isWardenError(e) && e.code === "unsafe-storage-hard-link");
  await assert.rejects(env.invocations.open(SCOPE, ids[0]!, null, "agent"), UnsafeStorageError);
  rmSync(join(root, "journal-alias"));
  assert.equal((await env.invocations.lookup(SCOPE, ids[0]!))?.status, "recorded");
  await env.close();

  // A state directory with group/other access is refused.
  chmodSync(home, 0o777);
  await refusedWith("unsafe-storage-mode");
  chmodSync(home, 0o700);
  chmodSync(join(home, "owners"), 0o755);
  await refusedWith("unsafe-storage-mode");
});
