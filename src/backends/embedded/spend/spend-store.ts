/**
 * The daily spend counters of the embedded backend (DESIGN.md "Spend"): `<home>/spend.sqlite`, one
 * row per (day, workspace or principal), added to in one transaction per run, so they survive a
 * restart (and a kill -9: a committed row is on disk, WAL with synchronous=FULL).
 */
import { join } from "node:path";
import { NO_SPEND, type SpendCounter, type SpendCounters, type SpendSubjectKind, type SpendSubjects, type SpendTotals } from "../../../runner/spend.js";
import { migrateSchema, openPrivateDatabase, sqliteFailure, type SqliteDatabase } from "../../../storage/sqlite.js";

export const SPEND_DATABASE = "spend.sqlite";

const MIGRATIONS: readonly string[] = [
  `CREATE TABLE spend_days (
     day TEXT NOT NULL,
     kind TEXT NOT NULL CHECK (kind IN ('workspace', 'principal')),
     subject TEXT NOT NULL,
     input_tokens INTEGER NOT NULL,
     output_tokens INTEGER NOT NULL,
     cost_usd_micros INTEGER NOT NULL,
     turns INTEGER NOT NULL,
     wall_ms INTEGER NOT NULL,
     runs INTEGER NOT NULL,
     PRIMARY KEY (day, kind, subject)
   ) WITHOUT ROWID`,
];

interface Row {
  kind: SpendSubjectKind;
  subject: string;
  input_tokens: number;
  output_tokens: number;
  cost_usd_micros: number;
  turns: number;
  wall_ms: number;
}

function totalsOf(row: Row): SpendTotals {
  return { input_tokens: row.input_tokens, output_tokens: row.output_tokens, cost_usd_micros: row.cost_usd_micros, turns: row.turns, wall_ms: row.wall_ms };
}

export class EmbeddedSpendCounters implements SpendCounters {
  readonly #db: SqliteDatabase;
  readonly #add: (day: string, subjects: SpendSubjects, spend: SpendTotals) => void;

  private constructor(db: SqliteDatabase) {
    this.#db = db;
    const upsert = db.prepare(
      `INSERT INTO spend_days VALUES (@day, @kind, @subject, @input_tokens, @output_tokens, @cost_usd_micros, @turns, @wall_ms, 1)
       ON CONFLICT (day, kind, subject) DO UPDATE SET
         input_tokens = input_tokens + excluded.input_tokens, output_tokens = output_tokens + excluded.output_tokens,
         cost_usd_micros = cost_usd_micros + excluded.cost_usd_micros, turns = turns + excluded.turns,
         wall_ms = wall_ms + excluded.wall_ms, runs = runs + 1`,
    );
    this.#add = db.transaction((day: string, subjects: SpendSubjects, spend: SpendTotals) => {
      upsert.run({ day, kind: "workspace", subject: subjects.workspace, ...spend });
      upsert.run({ day, kind: "principal", subject: subjects.principal, ...spend });
    });
  }

  static open(home: string): EmbeddedSpendCounters {
    const path = join(home, SPEND_DATABASE);
    const db = openPrivateDatabase(path);
    try {
      migrateSchema(db, MIGRATIONS, path);
    } catch (error) {
      db.close();
      throw error;
    }
    return new EmbeddedSpendCounters(db);
  }

  add(day: string, subjects: SpendSubjects, spend: SpendTotals): Promise<void> {
    try {
      this.#add(day, subjects, spend);
      return Promise.resolve();
    } catch (error) {
      return Promise.reject(sqliteFailure(error, "add a run's spend to the day's counters"));
    }
  }

  read(day: string, kind: SpendSubjectKind, subject: string): Promise<SpendTotals> {
    try {
      const row = this.#db.prepare("SELECT * FROM spend_days WHERE day = ? AND kind = ? AND subject = ?").get(day, kind, subject) as Row | undefined;
      return Promise.resolve(row === undefined ? NO_SPEND : totalsOf(row));
    } catch (error) {
      return Promise.reject(sqliteFailure(error, "read the day's spend"));
    }
  }

  list(day: string): Promise<readonly SpendCounter[]> {
    try {
      const rows = this.#db.prepare("SELECT * FROM spend_days WHERE day = ? ORDER BY kind, subject").all(day) as Row[];
      return Promise.resolve(rows.map((r) => ({ kind: r.kind, subject: r.subject, spend: totalsOf(r) })));
    } catch (error) {
      return Promise.reject(sqliteFailure(error, "list the day's spend"));
    }
  }

  close(): void {
    this.#db.close();
  }
}
