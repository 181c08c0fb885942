/**
 * What a PostgreSQL dequeue locks (DESIGN.md "Queued invocations", issue 32's scaling): the rows
 * a dequeue reads are locked `FOR UPDATE SKIP LOCKED` until it commits, and every other node's
 * dequeue skips them meanwhile. A dequeue that reads more rows than it can take (or rows it
 * cannot run at all) hides them from nodes with free slots, which then find nothing and wait
 * for their next poll. A third connection holds the principals' row a dequeue updates last, so
 * one node's dequeue is held open, with its locks, while the other dequeues.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import pg from "pg";
import { openPostgresBackend, type PostgresBackend } from "../../src/backends/postgres/index.js";
import type { LeaseRequest, NewQueued, QueueHost, QueueStore } from "../../src/invocations/queue-store.js";
import { startTestPostgres, type TestPostgres } from "../support/postgres.js";
import { queuedRow } from "../support/queued.js";

const NOW = Date.now();

const queued = (fields: Partial<NewQueued> = {}): NewQueued => queuedRow(fields, NOW);

function leaseOf(fields: Partial<LeaseRequest> = {}): LeaseRequest {
  return { max: 1, labels: {}, providers: ["claude"], now: Date.now(), limits: {}, ...fields };
}

const queueOf = (backend: PostgresBackend): QueueStore => (backend.claims as typeof backend.claims & QueueHost).queue();

describe("a postgres dequeue locks only rows it can take", () => {
  let server: TestPostgres;
  before(async () => {
    server = await startTestPostgres();
  });
  after(async () => {
    await server?.stop();
  });

  /** Two nodes and a raw connection on a fresh database, with `rows` enqueued. */
  async function fleet(t: { after(fn: () => unknown): void }, rows: readonly NewQueued[]) {
    const url = await server.createDatabase("locks");
    const a = await openPostgresBackend({ url });
    const b = await openPostgresBackend({ url });
    const raw = new pg.Client({ connectionString: url });
    await raw.connect();
    t.after(async () => {
      await raw.end().catch(() => undefined);
      await a.close();
      await b.close();
    });
    for (const row of rows) await queueOf(a).enqueue(row);
    // Each principal served once, so that a dequeue updates (not inserts) its row, which `raw` can hold.
    await raw.query("INSERT INTO warden_queue_principals (principal, last_served) SELECT DISTINCT principal, 0 FROM warden_queue ON CONFLICT DO NOTHING");
    return { a: queueOf(a), b: queueOf(b), raw, url };
  }

  /** Holds the principals' rows; answers a release. Waits until `a`'s dequeue is blocked on them. */
  async function holdPrincipals(raw: pg.Client): Promise<() => Promise<void>> {
    await raw.query("BEGIN");
    await raw.query("SELECT * FROM warden_queue_principals FOR UPDATE");
    return async () => {
      await raw.query("COMMIT");
    };
  }

  /** Waits until `blocked` dequeues wait on the held principals' rows, or `settled` says there is no more to wait for. */
  async function untilBlocked(url: string, blocked: number, settled: () => boolean = () => false): Promise<void> {
    const probe = new pg.Client({ connectionString: url });
    await probe.connect();
    try {
      const deadline = Date.now() + 60_000;
      for (;;) {
        if (settled()) return;
        const { rows } = await probe.query<{ n: number }>(
          "SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%warden_queue_principals%'",
        );
        if (rows[0]!.n >= blocked) return;
        if (Date.now() > deadline) throw new Error(`waited 60 s for ${blocked} dequeue(s) to block on the held principals' row (saw ${rows[0]!.n})`);
        await new Promise((r) => setTimeout(r, 20));
      }
    } finally {
      await probe.end();
    }
  }

  test("a node taking one row leaves the rest to a node dequeuing at the same time", async (t) => {
    const { a, b, raw, url } = await fleet(t, Array.from({ length: 10 }, (_, i) => queued({ enqueued_at: NOW + i })));
    const release = await holdPrincipals(raw);
    const first = a.lease(leaseOf());
    await untilBlocked(url, 1);
    // `a`'s dequeue is open, holding what it read. `b` finds a row of the nine `a` cannot take.
    const second = b.lease(leaseOf());
    // `b` blocks on the held row too when it found one to take; with none it answers at once.
    let answered = false;
    second.then(
      () => (answered = true),
      () => (answered = true),
    );
    await untilBlocked(url, 2, () => answered);
    await release();
    const [taken, other] = await Promise.all([first, second]);
    assert.equal(taken.leased.length, 1);
    assert.equal(other.leased.length, 1, "the second node found no row: the first node's dequeue locked rows it could not take");
    assert.notEqual(taken.leased[0]!.id, other.leased[0]!.id);
  });

  test("rows of a provider or labels a node lacks stay free for a node that has them", async (t) => {
    const rows = [
      ...Array.from({ length: 5 }, (_, i) => queued({ provider: "codex", enqueued_at: NOW + i })),
      ...Array.from({ length: 5 }, (_, i) => queued({ labels: { gpu: "yes" }, enqueued_at: NOW + 10 + i })),
      queued({ enqueued_at: NOW + 20 }),
    ];
    const { a, b, raw, url } = await fleet(t, rows);
    const release = await holdPrincipals(raw);
    // `a` runs claude only, without the gpu label: of eleven rows it can take the last one.
    const first = a.lease(leaseOf({ max: 4 }));
    await untilBlocked(url, 1);
    const second = b.lease(leaseOf({ max: 10, providers: ["codex", "claude"], labels: { gpu: "yes" } }));
    let answered = false;
    second.then(
      () => (answered = true),
      () => (answered = true),
    );
    await untilBlocked(url, 2, () => answered);
    await release();
    const [taken, other] = await Promise.all([first, second]);
    assert.deepEqual(
      taken.leased.map((r) => r.id),
      [rows[10]!.id],
    );
    assert.equal(other.leased.length, 10, `the second node took ${other.leased.length} of the 10 rows only it can run`);
  });
});
