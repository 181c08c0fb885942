/**
 * Two nodes on one database: delivery's store-wide steps (begin, gc) exclude each other across
 * nodes, not only within one process. gc on node B must not delete a blob that begin on node A
 * has just counted as stored and not asked for; and a node that dies holding the store lock
 * releases it with its session. A connection lent out by the pool (for the lock, or for a
 * transaction) whose session ends between two statements fails its step, never the process.
 */
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import pg from "pg";
import type { Digest } from "../../src/core/digest.js";
import { openPostgresBackend, type PostgresBackend } from "../../src/backends/postgres/index.js";
import { openPool, transaction } from "../../src/backends/postgres/connection.js";
import { Delivery, type DeliveryBackend } from "../../src/delivery/service.js";
import type { StageRecord, StageStore } from "../../src/delivery/stage.js";
import { bytesOf, skillManifest, uploadMissing } from "../delivery/store-harness.js";
import { startTestPostgres, type TestPostgres } from "../support/postgres.js";

let server: TestPostgres;
let url: string;
let nodeA: PostgresBackend;
let nodeB: PostgresBackend;

before(async () => {
  server = await startTestPostgres();
  url = await server.createDatabase("store-lock");
  nodeA = await openPostgresBackend({ url });
  nodeB = await openPostgresBackend({ url });
});
after(async () => {
  await nodeA?.close();
  await nodeB?.close();
  await server?.stop();
});

/** A promise and the function that resolves it. */
function gate(): { readonly wait: Promise<void>; readonly open: () => void } {
  let open!: () => void;
  const wait = new Promise<void>((resolve) => (open = resolve));
  return { wait, open };
}

/** `stages`, whose `create` first tells `reached` and then waits for `release`. */
function pausingCreate(stages: StageStore, reached: () => void, release: Promise<void>): StageStore {
  return new Proxy(stages, {
    get(target, prop) {
      if (prop === "create") {
        return async (stage: StageRecord): Promise<void> => {
          reached();
          await release;
          await target.create(stage);
        };
      }
      const value: unknown = Reflect.get(target, prop, target);
      return typeof value === "function" ? (value as (...args: unknown[]) => unknown).bind(target) : value;
    },
  });
}

/**
 * Whether `promise` settles within `ms`: for checks that something waits (it must not settle),
 * which have no event to wait for. A busy machine can only make a wrong answer show less often.
 */
const settledWithin = async (promise: Promise<unknown>, ms: number): Promise<boolean> => {
  let settled = false;
  void promise.then(
    () => (settled = true),
    () => (settled = true),
  );
  await new Promise((resolve) => setTimeout(resolve, ms));
  return settled;
};

test("gc on one node waits for a begin on another, and keeps the stored blob that begin did not ask for", async () => {
  const shared = { path: "data/shared.bin", content: bytesOf(1, 4096) };
  const first = skillManifest("lock-bundle", "r1", [shared]);
  // Both services open first: opening runs start-up recovery, which collects garbage itself.
  const reached = gate();
  const release = gate();
  const backendA: DeliveryBackend = { ...nodeA.delivery, stages: pausingCreate(nodeA.delivery.stages, reached.open, release.wait) };
  const deliveryA = await Delivery.open(backendA);
  const deliveryB = await Delivery.open(nodeB.delivery);
  const begunFirst = await deliveryB.begin(first.manifest);
  assert.equal(begunFirst.committed, false);
  await uploadMissing(deliveryB, begunFirst, first.blobs);
  await deliveryB.commit(begunFirst.stage_id);
  await deliveryB.catalog.retire("lock-bundle", "r1");
  const sharedDigest = first.manifest.components.find((c) => c.relative_path === shared.path)!.blob.digest;
  assert.ok(await nodeB.delivery.blobs.has(sharedDigest), "stored, and now referenced by no live revision");

  // Node A begins r2, which holds the same file: stored, so not asked for. It pauses right
  // before its stage exists, while node B collects garbage.
  const second = skillManifest("lock-bundle", "r2", [shared, { path: "data/new.bin", content: bytesOf(2, 4096) }]);
  const beginning = deliveryA.begin(second.manifest);
  await reached.wait;
  const collecting = deliveryB.gc();
  assert.equal(await settledWithin(collecting, 400), false, "gc waits while a begin on another node runs");
  release.open();
  const begun = await beginning;
  assert.equal(begun.committed, false);
  assert.ok(!begun.missing.some((m) => m.digest === sharedDigest), "the stored blob was not asked for");
  await collecting;
  assert.ok(await nodeA.delivery.blobs.has(sharedDigest), "gc kept the blob the new stage counts on");
  // The upload finishes on node B and the commit needs nothing more.
  await uploadMissing(deliveryB, begun, second.blobs);
  const receipt = await deliveryB.commit(begun.stage_id);
  assert.equal(receipt.revision, "r2");
  assert.deepEqual(new Set(receipt.blobs.map((b) => b.digest)), new Set(second.manifest.components.map((c) => c.blob.digest as Digest)));
});

test("a node that dies holding the store lock releases it: the other node's gc goes ahead at once", async () => {
  const deliveryB = await Delivery.open(nodeB.delivery);
  const release = gate();
  const holding = nodeA.delivery.storeWide!(() => release.wait.then(() => "done"));
  const admin = new pg.Client({ connectionString: url });
  await admin.connect();
  try {
    // The lock's session, as pg_locks shows it: advisory, two-int form (objsubid 2).
    let holder: number | undefined;
    for (let i = 0; i < 100 && holder === undefined; i++) {
      const rows = (await admin.query<{ pid: number }>("SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND objsubid = 2 AND granted")).rows;
      holder = rows[0]?.pid;
      if (holder === undefined) await new Promise((resolve) => setTimeout(resolve, 20));
    }
    assert.ok(holder !== undefined, "node A holds the store lock");
    const collecting = deliveryB.gc();
    assert.equal(await settledWithin(collecting, 300), false, "gc waits while the lock is held");
    await admin.query("SELECT pg_terminate_backend($1)", [holder]);
    const started = performance.now();
    await collecting;
    assert.ok(performance.now() - started < 5000, "released with the session, not after a timeout");
  } finally {
    release.open();
    await admin.end();
  }
  assert.equal(await holding, "done", "the step itself finishes; only its lock was gone");
  // Node A takes the lock again on a fresh connection.
  assert.equal(await nodeA.delivery.storeWide!(async () => "again"), "again");
});

test("a session ended between two statements of a transaction fails it storage-unavailable, not the process", async () => {
  const pool = openPool({ url }, 2);
  const admin = new pg.Client({ connectionString: url });
  await admin.connect();
  try {
    await assert.rejects(
      transaction(pool, "test a lost session", async (client) => {
        const pid = (await client.query<{ pid: number }>("SELECT pg_backend_pid() AS pid")).rows[0]!.pid;
        // The session's end arrives while no statement runs: only the lent client hears it.
        const ended = new Promise((resolve) => {
          client.once("error", resolve);
          client.once("end", resolve);
        });
        await admin.query("SELECT pg_terminate_backend($1)", [pid]);
        await ended;
        await client.query("SELECT 1");
      }),
      { code: "storage-unavailable" },
    );
    // The broken connection was discarded: the pool answers on a fresh one.
    assert.equal((await pool.query<{ one: number }>("SELECT 1 AS one")).rows[0]!.one, 1);
  } finally {
    await admin.end();
    await pool.end();
  }
});
