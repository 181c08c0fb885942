/**
 * The fleet's nodes, for operators (the console's overview): each owner incarnation (owner.ts)
 * writes a row naming its host, pid, version and listen URL right after it takes its owner lock,
 * on the lock's own connection. Whether a node is live is never stored: it is read from pg_locks
 * (warden_owner_alive), like every claim's, so a node killed however it dies leaves the list as
 * its session ends, with no timeout or heartbeat row to go stale. Rows of dead owners are
 * deleted by the next node that registers.
 */
import { hostname } from "node:os";
import type pg from "pg";
import { query, type PgPool } from "./connection.js";

/** What a node says of itself; `version` and `url` are known once it serves (`announce`). */
export interface NodeAnnouncement {
  readonly version?: string;
  readonly url?: string;
}

export interface FleetNodeRecord {
  /** the owner id of the node's current incarnation */
  readonly node_id: string;
  readonly host: string;
  readonly pid: number;
  readonly version?: string;
  readonly url?: string;
  /** ms since the epoch: when this incarnation took its owner lock */
  readonly started_at: number;
}

/** At most this many live nodes are listed (a fleet is a handful of nodes, not thousands). */
const MAX_LISTED = 256;

interface NodeRow {
  owner: string;
  host: string;
  pid: number;
  version: string | null;
  url: string | null;
  started_at: string | number;
}

export class NodeRegistry {
  readonly #pool: PgPool;
  #announced: NodeAnnouncement = {};
  #owner: string | undefined;

  constructor(pool: PgPool) {
    this.#pool = pool;
  }

  /** The owner lock's hook: this incarnation's row, written on the lock's own connection. */
  readonly register = async (client: pg.Client, owner: string): Promise<void> => {
    await client.query("DELETE FROM warden_nodes WHERE NOT warden_owner_alive(owner)");
    await client.query({
      text: `INSERT INTO warden_nodes (owner, host, pid, version, url, started_at) VALUES ($1, $2, $3, $4, $5, $6)
             ON CONFLICT (owner) DO UPDATE SET host = $2, pid = $3, version = $4, url = $5, started_at = $6`,
      values: [owner, hostname(), process.pid, this.#announced.version ?? null, this.#announced.url ?? null, Date.now()],
    });
    this.#owner = owner;
  };

  /** Records the node's version and URL, for this incarnation's row and those of later ones. */
  async announce(announcement: NodeAnnouncement): Promise<void> {
    this.#announced = { ...this.#announced, ...announcement };
    if (this.#owner === undefined) return;
    await query(this.#pool, "announce this node", {
      text: "UPDATE warden_nodes SET version = $2, url = $3 WHERE owner = $1",
      values: [this.#owner, this.#announced.version ?? null, this.#announced.url ?? null],
    });
  }

  /** The nodes whose owner lock is held now, oldest first. */
  async live(): Promise<FleetNodeRecord[]> {
    const result = await query<NodeRow>(this.#pool, "list the fleet's nodes", {
      text: `SELECT owner, host, pid, version, url, started_at FROM warden_nodes
             WHERE warden_owner_alive(owner) ORDER BY started_at, owner LIMIT ${MAX_LISTED}`,
    });
    return result.rows.map((row) => ({
      node_id: row.owner,
      host: row.host,
      pid: row.pid,
      ...(row.version === null ? {} : { version: row.version }),
      ...(row.url === null ? {} : { url: row.url }),
      started_at: Number(row.started_at),
    }));
  }
}
