/** Full storage and failing journal I/O: refused cleanly, nothing deleted, never a second run. */
import { test } from "node:test";
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { LimitError, StorageError, storageFull } from "../../src/core/errors.js";
import { Invocations } from "../../src/invocations/index.js";
import type { ClaimStore } from "../../src/invocations/claim-store.js";
import { openEnv, SCOPE, setup, stateDigest, type Env } from "./fixtures/env.js";
import { withClaimsDb } from "./fixtures/tamper.js";
import { waitFor } from "../support/wait.js";

const request = { task: "fill" };

/**
 * The real claim store, with its writes refused as a full disk refuses them while `full` is set;
 * `releases` counts the release attempts.
 */
function fillableClaims(env: Env): { claims: ClaimStore; full: boolean; releases: number } {
  const enospc = Object.assign(new Error("ENOSPC: no space left on device, write"), { code: "ENOSPC" });
  const disk = { claims: env.backend.claims as ClaimStore, full: false, releases: 0 };
  disk.claims = new Proxy(env.backend.claims, {
    get(target, prop) {
      if (prop === "release") disk.releases++;
      if (disk.full && (prop === "record" || prop === "release")) return () => Promise.reject(storageFull("write the claim store", enospc));
      const value: unknown = Reflect.get(target, prop, target);
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
  return disk;
}

/** Opens a run, fills the disk and finishes it: the result and the release both fail to store. */
async function giveUpWhileFull(invocations: Invocations, disk: { full: boolean }): Promise<string> {
  const id = randomUUID();
  const opened = await invocations.open(SCOPE, id, request, "agent");
  assert.equal(opened.status, "fresh");
  if (opened.status !== "fresh") throw new Error("not fresh");
  disk.full = true;
  await assert.rejects(opened.handle.finish({ ok: true }), (e: unknown) => e instanceof LimitError && e.code === "capacity-exhausted");
  return id;
}

test("a full database (SQLITE_FULL) refuses new claims as capacity-exhausted and keeps every existing one", async (t) => {
  const env = await setup(t);
  await env.invocations.run(SCOPE, randomUUID(), request, "agent", () => ({ ok: true }));
  await env.close();
  const pages = withClaimsDb(env.home, (_exec, get) => (get("PRAGMA page_count") as { page_count: number }).page_count);
  // Reopen with the database capped at its current size: the disk is "full".
  const full = await openEnv(env.home, { database: { maxPageCount: pages } });
  t.after(() => full.close());
  const accepted: string[] = [];
  let refusal: unknown;
  for (let i = 0; i < 400 && refusal === undefined; i++) {
    const id = randomUUID();
    try {
      const outcome = await full.invocations.open(SCOPE, id, request, "agent");
      assert.equal(outcome.status, "fresh");
      if (outcome.status === "fresh") await outcome.handle.release();
      accepted.push(id);
    } catch (error) {
      refusal = error;
    }
  }
  assert.ok(refusal instanceof LimitError, `expected a capacity refusal, got ${String(refusal)}`);
  assert.equal(refusal.code, "capacity-exhausted");
  const before = stateDigest(env.home);
  await assert.rejects(full.invocations.open(SCOPE, randomUUID(), request, "agent"), (e: unknown) => e instanceof LimitError && e.code === "capacity-exhausted");
  assert.equal(stateDigest(env.home), before, "a refused claim changed the state directory");
  assert.equal(full.backend.claims.count(), accepted.length + 1);
  for (const id of accepted) assert.equal((await full.invocations.lookup(SCOPE, id, request))?.status, "unresolved");
});

test("a journal write failure mid-run leaves the claim unresolved, never fresh", async (t) => {
  let failNextSync = false;
  const env = await setup(t, {
    journalHooks: {
      beforeSync: () => {
        if (failNextSync) {
          failNextSync = false;
          throw Object.assign(new Error("no space left on device"), { code: "ENOSPC" });
        }
      },
    },
  });
  const id = randomUUID();
  const opened = await env.invocations.open(SCOPE, id, request, "agent");
  assert.equal(opened.status, "fresh");
  if (opened.status !== "fresh") return;
  let ran = false;
  failNextSync = true;
  await assert.rejects(
    opened.handle.effect({ kind: "file", name: "write", fingerprint: "x" }, () => (ran = true)),
    StorageError,
  );
  assert.equal(ran, false, "the effect ran although its start was not durable");
  const finished = await opened.handle.finish({ ok: true });
  assert.equal(finished.status, "unresolved");
  assert.deepEqual(finished.status === "unresolved" && finished.audit.reasons, ["journal-write-failed", "released"]);
  assert.equal((await env.invocations.open(SCOPE, id, request, "agent")).status, "unresolved");
  const inspection = await env.invocations.inspect(SCOPE, id);
  assert.equal(inspection.report.journal.requires_reconciliation, true);
});

test("a failing journal at open burns nothing silently: the claim stays and reads unresolved", async (t) => {
  const env = await setup(t, {
    journalHooks: {
      beforeWrite: () => {
        throw Object.assign(new Error("I/O error"), { code: "EIO" });
      },
    },
  });
  const id = randomUUID();
  await assert.rejects(env.invocations.open(SCOPE, id, request, "agent"), StorageError);
  const answer = await env.invocations.lookup(SCOPE, id, request);
  assert.equal(answer?.status, "unresolved");
  assert.equal((await env.invocations.open(SCOPE, id, request, "agent")).status, "unresolved");
});

test("a run given up while its release cannot be stored (a full disk) reads unresolved in its own process, not in_progress, and is never run again", async (t) => {
  const env = await setup(t);
  const disk = fillableClaims(env);
  const invocations = new Invocations({ claims: disk.claims, journals: env.backend.journals, keys: env.backend.keys, limits: env.backend.limits });
  const id = await giveUpWhileFull(invocations, disk);
  const seen = await invocations.lookup(SCOPE, id, request);
  assert.equal(seen?.status, "unresolved", "the run is over: in_progress would hold it for as long as this process lives");
  assert.deepEqual(seen?.status === "unresolved" && seen.audit.reasons, ["released"]);
  assert.equal((await invocations.open(SCOPE, id, request, "agent")).status, "unresolved");
  assert.equal((await invocations.list({ status: "unresolved" })).items.filter((c) => c.id === id).length, 1);
  // Room again: the next sighting stores the release, and the row itself then says so.
  disk.full = false;
  assert.equal((await invocations.lookup(SCOPE, id, request))?.status, "unresolved");
  await waitFor("the release stored in the claim's row", async () => ((await env.backend.claims.get({ scope: SCOPE, id }))?.released === true ? true : undefined));
  assert.equal((await env.backend.claims.get({ scope: SCOPE, id }))?.released, true);
  assert.equal((await invocations.open(SCOPE, id, request, "agent")).status, "unresolved");
});

test("a release that could not be stored is stored in the background once there is room: other readers see unresolved without a sighting here", async (t) => {
  const env = await setup(t);
  const disk = fillableClaims(env);
  const invocations = new Invocations({
    claims: disk.claims,
    journals: env.backend.journals,
    keys: env.backend.keys,
    limits: env.backend.limits,
    releaseRetryMs: 40,
  });
  t.after(() => invocations.close());
  // Another reader of the same store (another process, a fleet node): it knows only the stored row.
  const elsewhere = new Invocations({ claims: env.backend.claims, journals: env.backend.journals, keys: env.backend.keys, limits: env.backend.limits });
  const id = await giveUpWhileFull(invocations, disk);
  await waitFor("three attempts to store the release while the disk is full", () => (disk.releases >= 3 ? true : undefined));
  assert.ok(disk.releases >= 3, `retried while full (${disk.releases} attempts)`);
  assert.equal((await elsewhere.lookup(SCOPE, id, request))?.status, "in_progress", "the row alone: its owner lives");
  disk.full = false;
  await waitFor("the retried release stored once the disk has room", async () => ((await env.backend.claims.get({ scope: SCOPE, id }))?.released === true ? true : undefined));
  assert.equal((await env.backend.claims.get({ scope: SCOPE, id }))?.released, true, "stored with no sighting here");
  const seen = await elsewhere.lookup(SCOPE, id, request);
  assert.equal(seen?.status, "unresolved");
  assert.deepEqual(seen?.status === "unresolved" && seen.audit.reasons, ["released"]);
  // Stored once: the retries stop.
  const after = disk.releases;
  // A pause, not a wait: it checks that nothing more happens, which has no moment to wait for;
  // at the retry interval (40 ms) it spans several retries on an idle machine.
  await new Promise((resolve) => setTimeout(resolve, 150));
  assert.equal(disk.releases, after, "no retry after the release was stored");
});
