/**
 * A statement that cannot finish (here: waiting on a lock another session holds) is cancelled by
 * the server after the statement timeout and fails `storage-timeout`, instead of holding its
 * caller, its batch and every caller behind it forever; it changed nothing, and the node goes on
 * answering once the lock is gone.
 */
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import pg from "pg";
import { openPostgresBackend, type PostgresBackend } from "../../src/backends/postgres/index.js";
import { Invocations } from "../../src/invocations/index.js";
import { startTestPostgres, type TestPostgres } from "../support/postgres.js";

let server: TestPostgres;
let url: string;
let backend: PostgresBackend;

before(async () => {
  server = await startTestPostgres();
  url = await server.createDatabase("timeout");
  backend = await openPostgresBackend({ url, statementTimeoutMs: 300 });
});
after(async () => {
  await backend?.close();
  await server?.stop();
});

test("a statement stuck behind another session's lock fails storage-timeout; nothing changes; the node answers again after", async () => {
  const invocations = new Invocations({ claims: backend.claims, journals: backend.journals, keys: backend.keys, limits: backend.limits });
  const id = randomUUID();
  const recorded = await invocations.run("timeout", id, { task: "t" }, "agent", () => ({ ok: true }));
  assert.equal(recorded.status, "recorded");

  const locker = new pg.Client({ connectionString: url });
  await locker.connect();
  try {
    await locker.query("BEGIN");
    await locker.query("LOCK TABLE warden_claims IN ACCESS EXCLUSIVE MODE");
    const started = performance.now();
    await assert.rejects(invocations.lookup("timeout", id, { task: "t" }), { code: "storage-timeout", status: 503 });
    await assert.rejects(invocations.open("timeout", randomUUID(), { task: "t" }, "agent"), { code: "storage-timeout" });
    const waited = performance.now() - started;
    assert.ok(waited >= 300 && waited < 10_000, `cancelled after the timeout (${waited.toFixed(0)} ms for two statements)`);
  } finally {
    await locker.query("ROLLBACK");
    await locker.end();
  }
  assert.equal(await backend.claims.count(), 1, "the cancelled claim created nothing");
  const again = await invocations.lookup("timeout", id, { task: "t" });
  assert.ok(again?.status === "recorded" && again.replayed);
});

test("a statement timeout that is not a positive integer is refused", async () => {
  await assert.rejects(openPostgresBackend({ url, statementTimeoutMs: 0 }), { code: "postgres-statement-timeout-invalid" });
});
