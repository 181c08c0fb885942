/**
 * The fleet's node registry on a real PostgreSQL: each backend lists itself once its owner lock is
 * held; a backend that closes leaves the list; one whose lock's connection is cut comes back as a
 * new owner, listed with what it had announced, and the row of its lost incarnation is gone (never
 * listed again, deleted by the next registration).
 */
import { describe, test } from "node:test";
import assert from "node:assert/strict";
import { openPostgresBackend } from "../../src/backends/postgres/index.js";
import { adminQuery, useTestPostgres } from "../support/postgres.js";
import { waitFor } from "../support/wait.js";

describe("postgres node registry", () => {
  const server = useTestPostgres();

  test("lists the nodes whose owner lock is held, with what each announced; a lost incarnation leaves it, its successor joins", async (t) => {
    const url = await server.createDatabase("registry");
    const a = await openPostgresBackend({ url, owner: { heartbeatMs: 50, reconnectMs: 100 } });
    const b = await openPostgresBackend({ url });
    let bOpen = true;
    t.after(async () => {
      await a.close();
      if (bOpen) await b.close();
    });
    await a.nodes.announce({ version: "9.9.9", url: "http://127.0.0.1:1" });
    const listed = await b.nodes.live();
    assert.deepEqual(listed.map((n) => n.node_id).sort(), [a.owner.id, b.owner.id].sort());
    const first = listed.find((n) => n.node_id === a.owner.id)!;
    assert.equal(first.pid, process.pid);
    assert.equal(first.version, "9.9.9");
    assert.equal(first.url, "http://127.0.0.1:1");
    assert.equal(listed.find((n) => n.node_id === b.owner.id)!.url, undefined, "b announced nothing");

    await b.close();
    bOpen = false;
    assert.deepEqual((await a.nodes.live()).map((n) => n.node_id), [a.owner.id], "a closed node's lock went with its session");

    const lost = a.owner.id;
    const killed = await adminQuery<{ ok: boolean }>(url, "SELECT pg_terminate_backend(pid) AS ok FROM pg_stat_activity WHERE application_name = $1", [`warden-owner ${lost}`]);
    assert.deepEqual(killed.rows.map((r) => r.ok), [true]);
    await waitFor("a to come back as a new owner", () => (a.owner.healthy && a.owner.id !== lost ? true : undefined));
    const after = await a.nodes.live();
    assert.deepEqual(after.map((n) => [n.node_id, n.version, n.url]), [[a.owner.id, "9.9.9", "http://127.0.0.1:1"]]);
    const rows = await adminQuery<{ owner: string }>(url, "SELECT owner FROM warden_nodes ORDER BY owner");
    assert.deepEqual(rows.rows.map((r) => r.owner), [a.owner.id], "the rows of dead owners were deleted at the new registration");
  });
});
