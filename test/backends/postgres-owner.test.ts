/**
 * What only the postgres backend has: the owner lock on its own connection. When that connection
 * is lost while the node lives on, the node's open runs read unresolved everywhere at once, the
 * node refuses to claim (storage-unavailable) and to record results under the lost owner, and it
 * comes back as a new owner. Also: two nodes migrating the same empty database at once.
 */
import { describe, test } from "node:test";
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { isWardenError } from "../../src/core/errors.js";
import { openPostgresBackend, type PostgresBackend } from "../../src/backends/postgres/index.js";
import { SCHEMA_MIGRATIONS } from "../../src/backends/postgres/schema.js";
import { Invocations } from "../../src/invocations/index.js";
import { adminQuery as admin, useTestPostgres } from "../support/postgres.js";
import { waitFor } from "../support/wait.js";

describe("postgres owner lock", () => {
  const server = useTestPostgres();

  test("nodes starting together on an empty database apply each migration once", async (t) => {
    const url = await server.createDatabase("migrate");
    const nodes = await Promise.all(Array.from({ length: 4 }, () => openPostgresBackend({ url })));
    t.after(() => Promise.all(nodes.map((n) => n.close())));
    const versions = await admin<{ version: number }>(url, "SELECT version FROM warden_schema ORDER BY version");
    assert.deepEqual(versions.rows.map((r) => r.version), SCHEMA_MIGRATIONS.map((_, i) => i + 1));
    assert.equal(new Set(nodes.map((n) => n.owner.id)).size, 4, "every node is its own owner");
  });

  test("a lost owner connection: open runs read unresolved at once, no claim or record under the lost owner, then a new owner", async (t) => {
    const url = await server.createDatabase("owner");
    const node: PostgresBackend = await openPostgresBackend({ url, owner: { heartbeatMs: 50, reconnectMs: 1500 } });
    const other = await openPostgresBackend({ url });
    t.after(async () => {
      await node.close();
      await other.close();
    });
    const service = (b: PostgresBackend): Invocations => new Invocations({ claims: b.claims, journals: b.journals, keys: b.keys, limits: b.limits });
    const [mine, theirs] = [service(node), service(other)];
    const id = randomUUID();
    const opened = await mine.open("s", id, { task: 1 }, "agent");
    assert.equal(opened.status, "fresh");
    if (opened.status !== "fresh") return;
    assert.equal((await theirs.lookup("s", id))?.status, "in_progress");
    const lostOwner = node.owner.id;

    const killed = await admin<{ ok: boolean }>(
      url,
      "SELECT pg_terminate_backend(pid) AS ok FROM pg_stat_activity WHERE application_name = $1",
      [`warden-owner ${lostOwner}`],
    );
    assert.deepEqual(killed.rows.map((r) => r.ok), [true]);
    // Another node sees the lock gone right away: no timeout decides it.
    await waitFor("the run to read unresolved on the other node", async () => (await theirs.lookup("s", id))?.status === "unresolved" || undefined, 1000, 10);
    await waitFor("the node to notice its lost lock", () => !node.owner.healthy || undefined);
    await assert.rejects(mine.open("s", randomUUID(), { task: 2 }, "agent"), (e: unknown) => isWardenError(e) && e.code === "storage-unavailable");
    // The run that was going cannot record a result under the lost owner.
    await assert.rejects(opened.handle.finish({ done: true }), (e: unknown) => isWardenError(e) && e.code === "storage-unavailable");
    const after = await theirs.lookup("s", id);
    assert.equal(after?.status, "unresolved");

    await waitFor("the node to come back as a new owner", () => node.owner.healthy || undefined);
    assert.notEqual(node.owner.id, lostOwner);
    assert.equal(node.owner.incarnations, 2);
    const fresh = await mine.open("s", randomUUID(), { task: 3 }, "agent");
    assert.equal(fresh.status, "fresh");
    if (fresh.status === "fresh") assert.equal((await fresh.handle.finish({ ok: 1 })).status, "recorded");
    assert.equal((await mine.open("s", id, { task: 1 }, "agent")).status, "unresolved", "never fresh again");
  });

  test("a database that cannot be reached fails the open with storage-unavailable", async () => {
    const url = `postgresql://postgres@${encodeURIComponent(`/tmp/warden-no-server-${randomUUID()}`)}:5432/warden`;
    await assert.rejects(openPostgresBackend({ url, connectTimeoutMs: 2000 }), (e: unknown) => isWardenError(e) && e.code === "storage-unavailable" && e.status === 503);
  });
});
