/**
 * Parked runs' CLI session transcripts on the fleet's database (ParkedSessionStore), so that any
 * node can resume a run another node parked. One row per transcript file.
 */
import type { ParkedSessionStore, SessionFile } from "../../invocations/parked-sessions.js";
import { query, transaction, type PgPool } from "./connection.js";

export class PostgresSessionStore implements ParkedSessionStore {
  readonly #pool: PgPool;

  constructor(pool: PgPool) {
    this.#pool = pool;
  }

  async put(runId: string, files: readonly SessionFile[]): Promise<void> {
    await transaction(this.#pool, "keep a parked session", async (client) => {
      await client.query({ text: "DELETE FROM warden_parked_sessions WHERE run_id = $1", values: [runId] });
      for (const f of files) {
        await client.query({ text: "INSERT INTO warden_parked_sessions (run_id, dir, bytes) VALUES ($1, $2, $3)", values: [runId, f.dir, Buffer.from(f.bytes)] });
      }
    });
  }

  async get(runId: string): Promise<readonly SessionFile[]> {
    const result = await query<{ dir: string; bytes: Buffer }>(this.#pool, "read a parked session", {
      name: "warden-session-get",
      text: "SELECT dir, bytes FROM warden_parked_sessions WHERE run_id = $1 ORDER BY dir",
      values: [runId],
    });
    return result.rows.map((r) => ({ dir: r.dir, bytes: r.bytes }));
  }

  async remove(runId: string): Promise<void> {
    await query(this.#pool, "forget a parked session", { name: "warden-session-remove", text: "DELETE FROM warden_parked_sessions WHERE run_id = $1", values: [runId] });
  }
}
