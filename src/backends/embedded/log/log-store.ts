/**
 * The transparency log on the embedded backend: `<home>/tlog.sqlite` (WAL, synchronous=FULL), its
 * leaves, the Merkle nodes they complete (merkle.ts), and the checkpoints the node signed. One
 * transaction per batch of leaves: a leaf is durable with its nodes, or not at all.
 */
import { appendNodes, frontier, leafHash, nodeKey, type Hash, type NodeId } from "../../../tlog/merkle.js";
import { planAppend, type LeafInput, type LogStore, type StoredCheckpoint } from "../../../tlog/store.js";
import { migrateSchema, openPrivateDatabase, sqliteFailure, type SqliteDatabase, type SqliteStatement, type OpenDatabaseOptions } from "../../../storage/sqlite.js";

export const LOG_DATABASE = "tlog.sqlite";

const MIGRATIONS = [
  `CREATE TABLE tlog_leaves (idx INTEGER PRIMARY KEY, key TEXT NOT NULL UNIQUE, body BLOB NOT NULL);
   CREATE TABLE tlog_nodes (level INTEGER NOT NULL, idx INTEGER NOT NULL, hash BLOB NOT NULL, PRIMARY KEY (level, idx)) WITHOUT ROWID;
   CREATE TABLE tlog_checkpoints (size INTEGER PRIMARY KEY, note TEXT NOT NULL);
   CREATE TABLE tlog_cosignatures (size INTEGER NOT NULL, witness TEXT NOT NULL, lines TEXT NOT NULL, PRIMARY KEY (size, witness)) WITHOUT ROWID;`,
  // 2: the catch-up watermark (TransparencyLog), written in the transaction of the leaves it covers
  `CREATE TABLE tlog_marks (name TEXT PRIMARY KEY, value INTEGER NOT NULL) WITHOUT ROWID;`,
];

export class EmbeddedLogStore implements LogStore {
  readonly #db: SqliteDatabase;
  readonly #append: { immediate(leaves: readonly LeafInput[], watermark: number | undefined): number[] };
  readonly #watermark: SqliteStatement<[], { value: number }>;
  // Prepared once: a proof's read is a handful of point lookups, and compiling SQL would cost more.
  readonly #size: SqliteStatement<[], { n: number }>;
  readonly #node: SqliteStatement<[number, number], { hash: Buffer }>;
  readonly #byKey: SqliteStatement<[string], { idx: number }>;
  readonly #latest: SqliteStatement<[], StoredCheckpoint>;

  constructor(path: string, options: OpenDatabaseOptions = {}) {
    this.#db = openPrivateDatabase(path, options);
    migrateSchema(this.#db, MIGRATIONS, "transparency log");
    const db = this.#db;
    const sizeOf = (this.#size = db.prepare<[], { n: number }>("SELECT COALESCE(MAX(idx) + 1, 0) AS n FROM tlog_leaves"));
    const byKey = (this.#byKey = db.prepare<[string], { idx: number }>("SELECT idx FROM tlog_leaves WHERE key = ?"));
    const node = (this.#node = db.prepare<[number, number], { hash: Buffer }>("SELECT hash FROM tlog_nodes WHERE level = ? AND idx = ?"));
    this.#latest = db.prepare<[], StoredCheckpoint>("SELECT size, note FROM tlog_checkpoints ORDER BY size DESC LIMIT 1");
    const insertLeaf = db.prepare("INSERT INTO tlog_leaves (idx, key, body) VALUES (?, ?, ?)");
    const insertNode = db.prepare("INSERT INTO tlog_nodes (level, idx, hash) VALUES (?, ?, ?)");
    const mark = db.prepare<[number]>(
      "INSERT INTO tlog_marks (name, value) VALUES ('watermark', ?) ON CONFLICT (name) DO UPDATE SET value = max(value, excluded.value)",
    );
    this.#watermark = db.prepare<[], { value: number }>("SELECT value FROM tlog_marks WHERE name = 'watermark'");
    this.#append = db.transaction((leaves: readonly LeafInput[], watermark: number | undefined): number[] => {
      if (watermark !== undefined) mark.run(watermark);
      const size = sizeOf.get()!.n;
      const { indexes, added } = planAppend(size, leaves, (key) => byKey.get(key)?.idx);
      if (added.length === 0) return indexes;
      const edge = new Map<string, Hash>();
      for (const n of frontier(size)) {
        const row = node.get(n.level, n.index);
        if (row === undefined) throw new Error(`transparency log: stored node ${n.level}/${n.index} is missing`);
        edge.set(nodeKey(n.level, n.index), row.hash);
      }
      added.forEach((leaf, i) => insertLeaf.run(size + i, leaf.key, leaf.body));
      for (const n of appendNodes(size, edge, added.map((leaf) => leafHash(leaf.body)))) insertNode.run(n.level, n.index, n.hash);
      return indexes;
    });
  }

  async append(leaves: readonly LeafInput[], watermark?: number): Promise<number[]> {
    try {
      return this.#append.immediate(leaves, watermark);
    } catch (error) {
      throw sqliteFailure(error, "append to the transparency log", this.#db.name);
    }
  }

  async watermark(): Promise<number | undefined> {
    return this.#watermark.get()?.value;
  }

  async size(): Promise<number> {
    return this.#size.get()!.n;
  }

  async nodes(ids: readonly NodeId[]): Promise<Map<string, Hash>> {
    const get = this.#node;
    const out = new Map<string, Hash>();
    for (const id of ids) {
      const row = get.get(id.level, id.index);
      if (row !== undefined) out.set(nodeKey(id.level, id.index), row.hash);
    }
    return out;
  }

  async leaves(from: number, to: number): Promise<Buffer[]> {
    const rows = this.#db.prepare<[number, number], { body: Buffer }>("SELECT body FROM tlog_leaves WHERE idx >= ? AND idx < ? ORDER BY idx").all(from, to);
    return rows.map((r) => r.body);
  }

  async indexOf(key: string): Promise<number | undefined> {
    return this.#byKey.get(key)?.idx;
  }

  async latestCheckpoint(): Promise<StoredCheckpoint | undefined> {
    return this.#latest.get();
  }

  async checkpoint(size: number): Promise<StoredCheckpoint | undefined> {
    return this.#db.prepare<[number], StoredCheckpoint>("SELECT size, note FROM tlog_checkpoints WHERE size = ?").get(size);
  }

  async saveCheckpoint(checkpoint: StoredCheckpoint): Promise<void> {
    this.#db.prepare("INSERT INTO tlog_checkpoints (size, note) VALUES (?, ?) ON CONFLICT (size) DO NOTHING").run(checkpoint.size, checkpoint.note);
  }

  async saveCosignature(size: number, witness: string, lines: string): Promise<void> {
    this.#db.prepare("INSERT INTO tlog_cosignatures (size, witness, lines) VALUES (?, ?, ?) ON CONFLICT (size, witness) DO NOTHING").run(size, witness, lines);
  }

  async cosignatures(size: number): Promise<ReadonlyMap<string, string>> {
    const rows = this.#db.prepare<[number], { witness: string; lines: string }>("SELECT witness, lines FROM tlog_cosignatures WHERE size = ?").all(size);
    return new Map(rows.map((r) => [r.witness, r.lines]));
  }

  async witnessed(): Promise<ReadonlyMap<string, number>> {
    const rows = this.#db.prepare<[], { witness: string; size: number }>("SELECT witness, MAX(size) AS size FROM tlog_cosignatures GROUP BY witness").all();
    return new Map(rows.map((r) => [r.witness, r.size]));
  }

  async close(): Promise<void> {
    if (this.#db.open) this.#db.close();
  }
}
