/**
 * The transparency log on the postgres backend: one log per fleet (DESIGN.md "Transparency"),
 * its leaves, the Merkle nodes they complete (merkle.ts), the checkpoints any node of the fleet
 * signed and the cosignatures witnesses returned for them.
 *
 * An append is one transaction that first locks the log's single head row (`SELECT … FOR
 * UPDATE`): every appender of the fleet, on any node, waits there for the one before it to commit,
 * then reads the size, and in one more statement the batch's keys already logged and the frontier
 * that one left. Two nodes can therefore never hand out the same index or build on a stale
 * frontier, and a batch commits with its nodes and the new size, or not at all. The unique key of a leaf is the second line of defence: a key logged twice fails
 * the batch rather than take two indexes.
 *
 * The catch-up watermark (log-catchup.ts) is kept per node, by the node id of its home: a fact a
 * node recorded and did not log before it died is found by that node's next start, whatever the
 * other nodes appended meanwhile (a fleet-wide mark would have moved past it). It is raised in the
 * transaction of the batch it covers, under the same lock.
 *
 * Reads take no lock: the head row, leaves and nodes of a batch become visible together at its
 * commit, so a size read is always backed by its nodes. Each read is one statement, whatever the
 * number of nodes a proof needs.
 */
import { appendNodes, frontier, leafHash, nodeKey, type Hash, type NodeId } from "../../tlog/merkle.js";
import { planAppend, type LeafInput, type LogStore, type StoredCheckpoint } from "../../tlog/store.js";
import { query, transaction, type PgPool } from "./connection.js";

const SIZE = { name: "warden-tlog-size", text: "SELECT size FROM warden_tlog_head" };
const LOCK_HEAD = { name: "warden-tlog-lock", text: "SELECT size FROM warden_tlog_head FOR UPDATE" };
/** What a batch builds on, read in one statement under the lock: its keys already logged, and the frontier's nodes. */
const BATCH_BASE = {
  name: "warden-tlog-batch-base",
  text: `
  SELECT key, idx, NULL::int AS level, NULL::bytea AS hash FROM warden_tlog_leaves WHERE key = ANY($1::text[])
  UNION ALL
  SELECT NULL, n.idx, n.level, n.hash FROM unnest($2::int[], $3::bigint[]) AS w(level, idx) JOIN warden_tlog_nodes n USING (level, idx)`,
};
const NODES = {
  name: "warden-tlog-nodes",
  text: "SELECT n.level, n.idx, n.hash FROM unnest($1::int[], $2::bigint[]) AS w(level, idx) JOIN warden_tlog_nodes n USING (level, idx)",
};
/** The leaves, their nodes and the new size in one statement: one round trip for the writes of a batch. */
const WRITE_BATCH = {
  name: "warden-tlog-write",
  text: `
  WITH leaves AS (
    INSERT INTO warden_tlog_leaves (idx, key, body) SELECT * FROM unnest($1::bigint[], $2::text[], $3::bytea[])
  ), nodes AS (
    INSERT INTO warden_tlog_nodes (level, idx, hash) SELECT * FROM unnest($4::int[], $5::bigint[], $6::bytea[])
  )
  UPDATE warden_tlog_head SET size = $7`,
};
const RAISE_WATERMARK = {
  name: "warden-tlog-raise-watermark",
  text: `INSERT INTO warden_tlog_watermarks (node, value) VALUES ($1, $2)
  ON CONFLICT (node) DO UPDATE SET value = GREATEST(warden_tlog_watermarks.value, EXCLUDED.value)`,
};
const WATERMARK = { name: "warden-tlog-watermark", text: "SELECT value FROM warden_tlog_watermarks WHERE node = $1" };
const LEAVES = { name: "warden-tlog-leaves", text: "SELECT body FROM warden_tlog_leaves WHERE idx >= $1 AND idx < $2 ORDER BY idx" };
const INDEX_OF = { name: "warden-tlog-index-of", text: "SELECT idx FROM warden_tlog_leaves WHERE key = $1" };
const LATEST = { name: "warden-tlog-latest", text: "SELECT size, note FROM warden_tlog_checkpoints ORDER BY size DESC LIMIT 1" };
const CHECKPOINT = { name: "warden-tlog-checkpoint", text: "SELECT size, note FROM warden_tlog_checkpoints WHERE size = $1" };
const SAVE_CHECKPOINT = {
  name: "warden-tlog-save-checkpoint",
  text: "INSERT INTO warden_tlog_checkpoints (size, note) VALUES ($1, $2) ON CONFLICT (size) DO NOTHING",
};
/** A witness's answer and its high-water mark together, so `witnessed` is a read of one row per witness. */
const SAVE_COSIGNATURE = {
  name: "warden-tlog-save-cosignature",
  text: `
  WITH cosigned AS (
    INSERT INTO warden_tlog_cosignatures (size, witness, lines) VALUES ($1, $2, $3) ON CONFLICT (size, witness) DO NOTHING
  )
  INSERT INTO warden_tlog_witnessed (witness, size) VALUES ($2, $1)
  ON CONFLICT (witness) DO UPDATE SET size = GREATEST(warden_tlog_witnessed.size, EXCLUDED.size)`,
};
const COSIGNATURES = { name: "warden-tlog-cosignatures", text: "SELECT witness, lines FROM warden_tlog_cosignatures WHERE size = $1" };
const WITNESSED = { name: "warden-tlog-witnessed", text: "SELECT witness, size FROM warden_tlog_witnessed" };

/** The watermark's name when none is given: one process on the database, as a library user runs it. */
export const DEFAULT_LOG_NODE = "default";

export class PostgresLogStore implements LogStore {
  readonly #pool: PgPool;
  readonly #node: string;

  /**
   * On the backend's pool, which stays the backend's to close. `node` names this node's catch-up
   * watermark (its home's node id; DEFAULT_LOG_NODE for a library user with one process).
   */
  constructor(pool: PgPool, node: string = DEFAULT_LOG_NODE) {
    this.#pool = pool;
    this.#node = node;
  }

  append(leaves: readonly LeafInput[], watermark?: number): Promise<number[]> {
    return transaction(this.#pool, "append to the transparency log", async (client) => {
      const size = (await query<{ size: number }>(client, "lock the transparency log", LOCK_HEAD)).rows[0]!.size;
      if (watermark !== undefined) {
        await query(client, "raise the log's catch-up watermark", { ...RAISE_WATERMARK, values: [this.#node, watermark] });
      }
      const edgeIds = frontier(size);
      const base = await query<{ key: string | null; idx: number; level: number | null; hash: Buffer | null }>(client, "read what the batch builds on", {
        ...BATCH_BASE,
        values: [[...new Set(leaves.map((leaf) => leaf.key))], edgeIds.map((n) => n.level), edgeIds.map((n) => n.index)],
      });
      const logged = new Map<string, number>();
      const edge = new Map<string, Hash>();
      for (const row of base.rows) {
        if (row.key !== null) logged.set(row.key, row.idx);
        else edge.set(nodeKey(row.level!, row.idx), row.hash!);
      }
      const { indexes, added } = planAppend(size, leaves, (key) => logged.get(key));
      if (added.length === 0) return indexes;
      for (const n of edgeIds) {
        if (!edge.has(nodeKey(n.level, n.index))) throw new Error(`transparency log: stored node ${n.level}/${n.index} is missing`);
      }
      const nodes = appendNodes(size, edge, added.map((leaf) => leafHash(leaf.body)));
      await query(client, "append to the transparency log", {
        ...WRITE_BATCH,
        values: [
          added.map((_, i) => size + i),
          added.map((leaf) => leaf.key),
          added.map((leaf) => leaf.body),
          nodes.map((n) => n.level),
          nodes.map((n) => n.index),
          nodes.map((n) => n.hash),
          size + added.length,
        ],
      });
      return indexes;
    });
  }

  async watermark(): Promise<number | undefined> {
    const row = (await query<{ value: string | number }>(this.#pool, "read the log's catch-up watermark", { ...WATERMARK, values: [this.#node] })).rows[0];
    return row === undefined ? undefined : Number(row.value);
  }

  async size(): Promise<number> {
    return (await query<{ size: number }>(this.#pool, "read the transparency log's size", SIZE)).rows[0]!.size;
  }

  async nodes(ids: readonly NodeId[]): Promise<Map<string, Hash>> {
    const out = new Map<string, Hash>();
    if (ids.length === 0) return out;
    const result = await query<{ level: number; idx: number; hash: Buffer }>(this.#pool, "read transparency log nodes", {
      ...NODES,
      values: [ids.map((id) => id.level), ids.map((id) => id.index)],
    });
    for (const row of result.rows) out.set(nodeKey(row.level, row.idx), row.hash);
    return out;
  }

  async leaves(from: number, to: number): Promise<Buffer[]> {
    const result = await query<{ body: Buffer }>(this.#pool, "read transparency log leaves", { ...LEAVES, values: [from, to] });
    return result.rows.map((r) => r.body);
  }

  async indexOf(key: string): Promise<number | undefined> {
    return (await query<{ idx: number }>(this.#pool, "find a transparency log leaf", { ...INDEX_OF, values: [key] })).rows[0]?.idx;
  }

  async latestCheckpoint(): Promise<StoredCheckpoint | undefined> {
    return (await query<StoredCheckpoint>(this.#pool, "read the latest checkpoint", LATEST)).rows[0];
  }

  async checkpoint(size: number): Promise<StoredCheckpoint | undefined> {
    return (await query<StoredCheckpoint>(this.#pool, "read a checkpoint", { ...CHECKPOINT, values: [size] })).rows[0];
  }

  async saveCheckpoint(checkpoint: StoredCheckpoint): Promise<void> {
    await query(this.#pool, "store a checkpoint", { ...SAVE_CHECKPOINT, values: [checkpoint.size, checkpoint.note] });
  }

  async saveCosignature(size: number, witness: string, lines: string): Promise<void> {
    await query(this.#pool, "store a cosignature", { ...SAVE_COSIGNATURE, values: [size, witness, lines] });
  }

  async cosignatures(size: number): Promise<ReadonlyMap<string, string>> {
    const result = await query<{ witness: string; lines: string }>(this.#pool, "read cosignatures", { ...COSIGNATURES, values: [size] });
    return new Map(result.rows.map((r) => [r.witness, r.lines]));
  }

  async witnessed(): Promise<ReadonlyMap<string, number>> {
    const result = await query<{ witness: string; size: number }>(this.#pool, "read what witnesses cosigned", WITNESSED);
    return new Map(result.rows.map((r) => [r.witness, r.size]));
  }

  /** Nothing of its own to close: the pool is the backend's, closed after the log's last checkpoint. */
  async close(): Promise<void> {}
}
