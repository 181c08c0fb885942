import { test } from "node:test";
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { existsSync, readdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { UnsafeStorageError } from "../../src/core/errors.js";
import { freshHandle, openEnv, SCOPE, setup } from "./fixtures/env.js";

test("start-up removes only the lock files of dead owners", async (t) => {
  const alive = await setup(t);
  const owners = join(alive.home, "owners");
  const dead = join(owners, `${randomUUID()}.lock`);
  const pending = join(owners, `.pending-${randomUUID()}.lock`);
  writeFileSync(dead, "", { mode: 0o600 });
  writeFileSync(pending, "", { mode: 0o600 });
  const aliveLock = join(owners, `${alive.backend.claims.ownerId}.lock`);
  const second = await openEnv(alive.home);
  t.after(() => second.close());
  assert.equal(existsSync(dead), false, "a dead owner's lock file survived start-up");
  assert.equal(existsSync(aliveLock), true, "a live owner's lock file was removed");
  assert.equal(existsSync(pending), true, "a fresh pending registration was removed");
  assert.equal(existsSync(join(owners, `${second.backend.claims.ownerId}.lock`)), true);
  // A claim of the first (live) owner reads in_progress for the second.
  const id = randomUUID();
  const handle = freshHandle(await alive.invocations.open(SCOPE, id, {}, "agent"));
  assert.equal((await second.invocations.lookup(SCOPE, id))?.status, "in_progress");
  // Closing the owner ends its ownership: its open claim reads unresolved, its lock file is gone.
  await alive.close();
  assert.equal(existsSync(aliveLock), false);
  const after = await second.invocations.lookup(SCOPE, id);
  assert.deepEqual(after?.status === "unresolved" && after.audit.reasons, ["owner-gone"]);
  await assert.rejects(handle.finish({}));
  assert.equal((await second.invocations.lookup(SCOPE, id))?.status, "unresolved");
});

test("a foreign file among the owner locks is refused at start-up and left alone", async (t) => {
  const env = await setup(t);
  const stray = join(env.home, "owners", "notes.txt");
  writeFileSync(stray, "hi", { mode: 0o600 });
  await assert.rejects(openEnv(env.home), (e: unknown) => e instanceof UnsafeStorageError && e.code === "unsafe-storage-name");
  assert.ok(readdirSync(join(env.home, "owners")).includes("notes.txt"));
});
