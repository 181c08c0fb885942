/**
 * G1/G2 on postgres, in the window between losing the owner lock and noticing it. The node's
 * OwnerSession refuses claims and records once its heartbeat or socket tells it the lock is gone
 * (postgres-owner.test.ts); until then, only the statements themselves stand between a node and
 * a claim or a result under a lock the other nodes already see as gone. This file pins those
 * in-statement checks: a claim store whose owner session has not noticed (a stand-in that still
 * says healthy, sharing the real owner's id) must create no claim and record no result once the
 * owner's lock is gone.
 */
import { describe, test } from "node:test";
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import pg from "pg";
import { isWardenError } from "../../src/core/errors.js";
import { sha256Digest } from "../../src/core/digest.js";
import { openPostgresBackend } from "../../src/backends/postgres/index.js";
import { PostgresClaimStore } from "../../src/backends/postgres/claim-store.js";
import { openPool } from "../../src/backends/postgres/connection.js";
import { JournalPrefetch } from "../../src/backends/postgres/journal-store.js";
import type { OwnerSession } from "../../src/backends/postgres/owner.js";
import type { NewClaim, StoredResult } from "../../src/invocations/claim-store.js";
import { claimHashOf } from "../../src/invocations/index.js";
import { useTestPostgres } from "../support/postgres.js";

async function admin<T extends pg.QueryResultRow>(url: string, sql: string, values: unknown[] = []): Promise<T[]> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return (await client.query<T>(sql, values)).rows;
  } finally {
    await client.end();
  }
}

async function ownerAlive(url: string, owner: string): Promise<boolean> {
  const [row] = await admin<{ alive: boolean }>(url, "SELECT warden_owner_alive($1) AS alive", [owner]);
  return row?.alive === true;
}

function newClaim(scope: string): NewClaim {
  const identity = {
    scope,
    id: randomUUID(),
    request_hash: sha256Digest(Buffer.from(randomUUID())),
    agent: "agent",
    run_id: randomUUID(),
    created_at: Date.now(),
  };
  return { ...identity, claim_hash: claimHashOf(identity) };
}

describe("postgres owner lock lost but not yet noticed", () => {
  const server = useTestPostgres();

  test("the statements themselves create no claim and record no result under a lock that is gone", async (t) => {
    const url = await server.createDatabase("window");
    // Long heartbeat: this node is only here to hold (and then lose) a real owner lock.
    const node = await openPostgresBackend({ url, owner: { heartbeatMs: 60_000, reconnectMs: 60_000 } });
    const pool = openPool({ url }, 2);
    t.after(async () => {
      await pool.end().catch(() => undefined);
      await node.close();
    });
    const ownerId = node.owner.id;
    // An owner session that has not (yet) noticed anything: the window a heartbeat leaves open.
    const unaware = { id: ownerId, ids: [ownerId], healthy: true, assertHealthy: (): void => undefined } as unknown as OwnerSession;
    const claims = new PostgresClaimStore({ pool, owner: unaware, maxClaims: 1000, prefetch: new JournalPrefetch() });

    const held = newClaim("s");
    const first = await claims.claim(held);
    assert.equal(first.created, true, "a claim is created while the lock is held");
    assert.equal(await ownerAlive(url, ownerId), true);

    const killed = await admin<{ ok: boolean }>(
      url,
      "SELECT pg_terminate_backend(pid) AS ok FROM pg_stat_activity WHERE application_name = $1",
      [`warden-owner ${ownerId}`],
    );
    assert.deepEqual(killed.map((r) => r.ok), [true]);
    const deadline = Date.now() + 5000;
    while (await ownerAlive(url, ownerId)) {
      if (Date.now() > deadline) throw new Error("the owner lock did not go away");
      await new Promise((r) => setTimeout(r, 10));
    }
    assert.equal((await claims.get(held))?.owner_alive, false, "every node now reads the run as unresolved");

    // A new claim under the lost owner: refused, and no row.
    const late = newClaim("s");
    await assert.rejects(claims.claim(late), (e: unknown) => isWardenError(e) && e.code === "storage-unavailable");
    assert.deepEqual(await admin(url, "SELECT id FROM warden_claims WHERE scope = $1 AND id = $2", [late.scope, late.id]), []);

    // A result for the run that was going: refused, and the row stays without one.
    const payload = JSON.stringify({ done: true });
    const result: StoredResult = {
      hash: sha256Digest(Buffer.from(payload)),
      payload,
      recorded_at: Date.now(),
      journal: { entries: 2, tail_hash: "0".repeat(64), bytes: 10, sha256: sha256Digest(Buffer.from("x")) },
    };
    await assert.rejects(claims.record(held, held.run_id, result, held.claim_hash), (e: unknown) => isWardenError(e) && e.code === "storage-unavailable");
    const [row] = await admin<{ result_hash: string | null }>(url, "SELECT result_hash FROM warden_claims WHERE scope = $1 AND id = $2", [held.scope, held.id]);
    assert.equal(row?.result_hash, null, "no result under a lost owner");
    await claims.close();
  });
});
