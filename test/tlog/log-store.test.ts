/**
 * The LogStore contract, one test body per rule run against both stores: the embedded one
 * (SQLite) and the fleet's on a real PostgreSQL. Then what only a shared store has to keep: many
 * appenders on separate pools (as separate nodes) never interleave or duplicate indexes, and a
 * batch that cannot be stored leaves nothing of itself.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as path from "node:path";
import { EmbeddedLogStore } from "../../src/backends/embedded/log/log-store.js";
import { openPool, type PgPool } from "../../src/backends/postgres/connection.js";
import { PostgresLogStore } from "../../src/backends/postgres/log-store.js";
import { migrate } from "../../src/backends/postgres/schema.js";
import { appendNodes, leafHash, nodeKey, type Hash } from "../../src/tlog/merkle.js";
import type { LeafInput, LogStore } from "../../src/tlog/store.js";
import { startTestPostgres, type TestPostgres } from "../support/postgres.js";
import { tempDir } from "../support/temp.js";

const leaf = (key: string): LeafInput => ({ key, body: Buffer.from(JSON.stringify({ v: 1, key })) });

/** Every node a log of these leaves stores, as appendNodes computes them for the whole log at once. */
function expectedNodes(bodies: readonly Buffer[]): Map<string, Hash> {
  return new Map(appendNodes(0, new Map(), bodies.map((b) => leafHash(b))).map((n) => [nodeKey(n.level, n.index), n.hash]));
}

/** The store holds exactly the leaves given, in order, and every Merkle node of their tree. */
async function assertLogOf(store: LogStore, bodies: readonly Buffer[]): Promise<void> {
  assert.equal(await store.size(), bodies.length);
  assert.deepEqual(await store.leaves(0, bodies.length), bodies);
  const expected = expectedNodes(bodies);
  const ids = [...expected.keys()].map((k) => {
    const [level, index] = k.split("/").map(Number) as [number, number];
    return { level, index };
  });
  assert.deepEqual(await store.nodes(ids), expected);
}

interface StoreUnderTest {
  readonly name: string;
  hooks(): void;
  /** A new empty log; `second` opens another handle on the same log (another node of the fleet). */
  open(t: { after(fn: () => unknown): void }): Promise<{ store: LogStore; second(): LogStore; pool?: PgPool }>;
}

const embedded: StoreUnderTest = {
  name: "embedded",
  hooks: () => undefined,
  async open(t) {
    const root = tempDir("tlog-store");
    const file = path.join(root, "tlog.sqlite");
    const opened: LogStore[] = [];
    t.after(async () => {
      for (const s of opened) await s.close();
      fs.rmSync(root, { recursive: true, force: true });
    });
    const make = (): LogStore => {
      const s = new EmbeddedLogStore(file);
      opened.push(s);
      return s;
    };
    return { store: make(), second: make };
  },
};

let server: TestPostgres | undefined;
const postgres: StoreUnderTest = {
  name: "postgres",
  hooks() {
    before(async () => {
      server = await startTestPostgres();
    });
    after(async () => {
      await server?.stop();
    });
  },
  async open(t) {
    const url = await server!.createDatabase("tlog");
    const pools: PgPool[] = [];
    t.after(async () => {
      for (const p of pools) await p.end();
    });
    const make = (): PostgresLogStore => {
      const pool = openPool({ url }, 8);
      pools.push(pool);
      return new PostgresLogStore(pool);
    };
    const first = openPool({ url }, 8);
    pools.push(first);
    await migrate(first);
    return { store: new PostgresLogStore(first), second: make, pool: first };
  },
};

for (const backend of [embedded, postgres]) {
  describe(`LogStore contract: ${backend.name}`, () => {
    backend.hooks();

    it("appends in batches: consecutive indexes, the leaves' bytes, and every Merkle node of the tree", async (t) => {
      const { store } = await backend.open(t);
      assert.equal(await store.size(), 0);
      const bodies: Buffer[] = [];
      let next = 0;
      // Batch sizes that cross the frontier at every shape: single leaves, powers of two, odd runs.
      for (const n of [1, 1, 2, 5, 8, 1, 13, 64, 3, 200]) {
        const batch = Array.from({ length: n }, (_, i) => leaf(`k${next + i}`));
        assert.deepEqual(await store.append(batch), batch.map((_, i) => next + i));
        bodies.push(...batch.map((l) => l.body));
        next += n;
      }
      await assertLogOf(store, bodies);
      assert.deepEqual(await store.leaves(5, 9), bodies.slice(5, 9));
      assert.equal(await store.indexOf("k17"), 17);
      assert.equal(await store.indexOf("absent"), undefined);
      // A node that is not stored is missing from the answer, not an error.
      assert.equal((await store.nodes([{ level: 0, index: next }, { level: 20, index: 0 }])).size, 0);
    });

    it("a key is logged once: again, in a later batch or twice in one, it answers its first index", async (t) => {
      const { store } = await backend.open(t);
      assert.deepEqual(await store.append([leaf("a"), leaf("b")]), [0, 1]);
      assert.deepEqual(await store.append([leaf("c"), leaf("a"), leaf("c"), leaf("d"), leaf("b")]), [2, 0, 2, 3, 1]);
      assert.deepEqual(await store.append([leaf("d")]), [3]);
      // A known key with other bytes keeps the logged bytes: the log never rewrites a leaf.
      assert.deepEqual(await store.append([{ key: "a", body: Buffer.from("other") }]), [0]);
      await assertLogOf(store, ["a", "b", "c", "d"].map((k) => leaf(k).body));
    });

    it("the catch-up watermark: none at first, raised with a batch (also one with no new leaf), never lowered", async (t) => {
      const { store } = await backend.open(t);
      assert.equal(await store.watermark(), undefined);
      await store.append([leaf("a")]);
      assert.equal(await store.watermark(), undefined, "a batch without a watermark leaves it as it is");
      await store.append([leaf("b")], 1_000);
      assert.equal(await store.watermark(), 1_000);
      await store.append([], 5_000);
      assert.equal(await store.watermark(), 5_000, "raised by a batch with no leaf");
      await store.append([leaf("c")], 2_000);
      assert.equal(await store.watermark(), 5_000, "never lowered");
      assert.equal(await store.size(), 3);
    });

    it("a size is signed once, the latest checkpoint is the largest, and cosignatures are kept per (size, witness)", async (t) => {
      const { store } = await backend.open(t);
      assert.equal(await store.latestCheckpoint(), undefined);
      await store.saveCheckpoint({ size: 3, note: "three" });
      await store.saveCheckpoint({ size: 3, note: "three again" });
      await store.saveCheckpoint({ size: 7, note: "seven" });
      await store.saveCheckpoint({ size: 5, note: "five" });
      assert.deepEqual(await store.checkpoint(3), { size: 3, note: "three" });
      assert.deepEqual(await store.latestCheckpoint(), { size: 7, note: "seven" });
      assert.equal(await store.checkpoint(4), undefined);

      await store.saveCosignature(5, "w1", "— w1 A\n");
      await store.saveCosignature(5, "w1", "— w1 B\n");
      await store.saveCosignature(3, "w2", "— w2 C\n");
      await store.saveCosignature(7, "w2", "— w2 D\n");
      await store.saveCosignature(5, "w2", "— w2 E\n");
      assert.deepEqual(await store.cosignatures(5), new Map([["w1", "— w1 A\n"], ["w2", "— w2 E\n"]]));
      assert.deepEqual(await store.cosignatures(4), new Map());
      assert.deepEqual(await store.witnessed(), new Map([["w1", 5], ["w2", 7]]));
    });

    it("appenders on two handles of one log, at once, make one sequence: no index twice, no gap, every node right", async (t) => {
      const { store, second } = await backend.open(t);
      const other = second();
      const batches = Array.from({ length: 40 }, (_, b) => Array.from({ length: 1 + (b % 7) }, (_, i) => leaf(`b${b}-${i}`)));
      // Every fifth batch repeats a key another batch logs: whoever is first, both get one index.
      for (let b = 5; b < batches.length; b += 5) batches[b]!.push(leaf(`b${b - 3}-0`));
      const answers = await Promise.all(batches.map((batch, b) => (b % 2 === 0 ? store : other).append(batch)));
      const byKey = new Map<string, number>();
      batches.forEach((batch, b) => batch.forEach((l, i) => {
        const index = answers[b]![i]!;
        const seen = byKey.get(l.key);
        assert.ok(seen === undefined || seen === index, `${l.key} answered ${seen} and ${index}`);
        byKey.set(l.key, index);
      }));
      const indexes = [...byKey.values()].sort((x, y) => x - y);
      assert.deepEqual(indexes, indexes.map((_, i) => i), "indexes 0..n-1, each once");
      const bodies = await store.leaves(0, indexes.length);
      for (const [key, index] of byKey) assert.deepEqual(bodies[index], leaf(key).body);
      await assertLogOf(other, bodies);
    });
  });
}

describe("LogStore on postgres: a batch is stored whole or not at all", () => {
  postgres.hooks();

  it("a batch that fails midway (its second leaf's index is taken behind the store's back) leaves no leaf, node or size of itself", async (t) => {
    const { store, pool } = await postgres.open(t);
    assert.deepEqual(await store.append([leaf("a"), leaf("b"), leaf("c")]), [0, 1, 2]);
    await pool!.query("INSERT INTO warden_tlog_leaves (idx, key, body) VALUES (4, 'planted', '\\x00')");
    await assert.rejects(store.append([leaf("d"), leaf("e"), leaf("f")]), (e: unknown) => (e as { code?: string }).code === "database-error");
    assert.equal(await store.size(), 3);
    assert.equal(await store.indexOf("d"), undefined);
    assert.equal((await store.nodes([{ level: 0, index: 3 }, { level: 2, index: 0 }])).size, 0, "no node of the failed batch");
    // The log goes on from where it was, once the planted row is gone.
    await pool!.query("DELETE FROM warden_tlog_leaves WHERE key = 'planted'");
    assert.deepEqual(await store.append([leaf("d"), leaf("e")]), [3, 4]);
    await assertLogOf(store, ["a", "b", "c", "d", "e"].map((k) => leaf(k).body));
  });
});
