/**
 * The witness's memory: the last checkpoint it cosigned per log origin, in `<dir>/witness.sqlite`
 * (WAL, synchronous=FULL: a cosignature is answered only after its record is on disk, so a
 * restarted witness can never be rolled back).
 */
import { join } from "node:path";
import { migrateSchema, openPrivateDatabase, sqliteFailure, type SqliteDatabase } from "../storage/sqlite.js";
import type { WitnessRecord, WitnessStore } from "./witness.js";

const MIGRATIONS = ["CREATE TABLE witness_logs (origin TEXT PRIMARY KEY, size INTEGER NOT NULL, root BLOB NOT NULL, note TEXT NOT NULL);"];

export class SqliteWitnessStore implements WitnessStore {
  readonly #db: SqliteDatabase;

  constructor(dir: string) {
    this.#db = openPrivateDatabase(join(dir, "witness.sqlite"));
    migrateSchema(this.#db, MIGRATIONS, "witness");
  }

  get(origin: string): WitnessRecord | undefined {
    return this.#db.prepare<[string], WitnessRecord>("SELECT size, root, note FROM witness_logs WHERE origin = ?").get(origin);
  }

  update(origin: string, decide: (current: WitnessRecord | undefined) => WitnessRecord): WitnessRecord {
    const run = this.#db.transaction(() => {
      const next = decide(this.get(origin));
      this.#db
        .prepare("INSERT INTO witness_logs (origin, size, root, note) VALUES (?, ?, ?, ?) ON CONFLICT (origin) DO UPDATE SET size = excluded.size, root = excluded.root, note = excluded.note")
        .run(origin, next.size, next.root, next.note);
      return next;
    });
    try {
      return run.immediate();
    } catch (error) {
      if (error instanceof Error && "status" in error) throw error;
      throw sqliteFailure(error, "record the witnessed checkpoint", this.#db.name);
    }
  }

  close(): void {
    if (this.#db.open) this.#db.close();
  }
}
