/**
 * G1, embedded: a claim is acknowledged only after its COMMIT returned. When the COMMIT itself
 * fails (an I/O error on the WAL, here a deferred foreign key that SQLite checks only at COMMIT,
 * which fails the COMMIT on a real database the same way), every write of the batch must be
 * refused and nothing of it may stay, never answered as done.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { isWardenError } from "../../src/core/errors.js";
import { GroupCommit } from "../../src/backends/embedded/sqlite/group-commit.js";
import { openPrivateDatabase } from "../../src/storage/sqlite.js";

test("a COMMIT that fails refuses every write of its batch and keeps none of them", async (t) => {
  const root = mkdtempSync(join(tmpdir(), "warden-backends-"));
  const db = openPrivateDatabase(join(root, "commit.sqlite"));
  t.after(() => {
    db.close();
    rmSync(root, { recursive: true, force: true });
  });
  db.exec(
    "PRAGMA foreign_keys = ON;" +
      "CREATE TABLE parent (id INTEGER PRIMARY KEY);" +
      "CREATE TABLE child (id INTEGER PRIMARY KEY, parent INTEGER REFERENCES parent(id) DEFERRABLE INITIALLY DEFERRED);",
  );
  const insertChild = db.prepare("INSERT INTO child (id, parent) VALUES (?, ?)");
  const insertParent = db.prepare("INSERT INTO parent (id) VALUES (?)");
  const writes = new GroupCommit(db);

  // One turn, one batch: a good write and one whose row only the COMMIT finds wrong.
  const good = writes.submit(() => insertParent.run(1).changes);
  const bad = writes.submit(() => insertChild.run(1, 99).changes);
  const results = await Promise.allSettled([good, bad]);
  for (const r of results) {
    assert.equal(r.status, "rejected", "no write of a batch whose COMMIT failed is answered as done");
    if (r.status === "rejected") assert.ok(isWardenError(r.reason), String(r.reason));
  }
  assert.equal(db.inTransaction, false, "the failed transaction is rolled back, not left open");
  assert.deepEqual(db.prepare("SELECT count(*) AS n FROM parent").get(), { n: 0 });
  assert.deepEqual(db.prepare("SELECT count(*) AS n FROM child").get(), { n: 0 });
  assert.equal(writes.batches, 0);

  // The connection goes on working: the next batch commits.
  assert.equal(await writes.submit(() => insertParent.run(2).changes), 1);
  assert.deepEqual(db.prepare("SELECT id FROM parent").all(), [{ id: 2 }]);
});
