/**
 * The daily spend counters of a fleet (DESIGN.md "Spend"), in `warden_spend_days`: every node adds
 * its runs' spend with one atomic upsert per subject, so the budget of a workspace or a principal
 * holds across the fleet (a run already under way on one node is not stopped by another's spend).
 */
import { NO_SPEND, type SpendCounter, type SpendCounters, type SpendSubjectKind, type SpendSubjects, type SpendTotals } from "../../runner/spend.js";
import { query, transaction, type PgPool } from "./connection.js";

interface Row {
  kind: SpendSubjectKind;
  subject: string;
  input_tokens: string;
  output_tokens: string;
  cost_usd_micros: string;
  turns: string;
  wall_ms: string;
}

function totalsOf(row: Row): SpendTotals {
  return {
    input_tokens: Number(row.input_tokens),
    output_tokens: Number(row.output_tokens),
    cost_usd_micros: Number(row.cost_usd_micros),
    turns: Number(row.turns),
    wall_ms: Number(row.wall_ms),
  };
}

const UPSERT = `INSERT INTO warden_spend_days AS d VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 1)
  ON CONFLICT (day, kind, subject) DO UPDATE SET
    input_tokens = d.input_tokens + excluded.input_tokens, output_tokens = d.output_tokens + excluded.output_tokens,
    cost_usd_micros = d.cost_usd_micros + excluded.cost_usd_micros, turns = d.turns + excluded.turns,
    wall_ms = d.wall_ms + excluded.wall_ms, runs = d.runs + 1`;

export class PostgresSpendCounters implements SpendCounters {
  readonly #pool: PgPool;

  constructor(pool: PgPool) {
    this.#pool = pool;
  }

  async add(day: string, subjects: SpendSubjects, spend: SpendTotals): Promise<void> {
    const values = [spend.input_tokens, spend.output_tokens, spend.cost_usd_micros, spend.turns, spend.wall_ms];
    await transaction(this.#pool, "add a run's spend to the day's counters", async (client) => {
      await query(client, "add a run's spend to its workspace's day", { text: UPSERT, values: [day, "workspace", subjects.workspace, ...values] });
      await query(client, "add a run's spend to its principal's day", { text: UPSERT, values: [day, "principal", subjects.principal, ...values] });
    });
  }

  async read(day: string, kind: SpendSubjectKind, subject: string): Promise<SpendTotals> {
    const { rows } = await query<Row>(this.#pool, "read the day's spend", {
      text: "SELECT * FROM warden_spend_days WHERE day = $1 AND kind = $2 AND subject = $3",
      values: [day, kind, subject],
    });
    return rows[0] === undefined ? NO_SPEND : totalsOf(rows[0]);
  }

  async list(day: string): Promise<readonly SpendCounter[]> {
    const { rows } = await query<Row>(this.#pool, "list the day's spend", {
      text: "SELECT * FROM warden_spend_days WHERE day = $1 ORDER BY kind, subject",
      values: [day],
    });
    return rows.map((r) => ({ kind: r.kind, subject: r.subject, spend: totalsOf(r) }));
  }
}
