/**
 * Connections to PostgreSQL: the shared pool of a node, the settings every connection runs with,
 * and the one place where a driver failure becomes a WardenError. `pg` is imported only under
 * src/backends: the domain sees store interfaces.
 *
 * Every connection runs with `synchronous_commit = on`, whatever the server's default: a store
 * resolves a write only after COMMIT returned, and that must mean the WAL is on disk (G1).
 */
import pg from "pg";
import { IntegrityError, StorageError, ValidationError, errnoCode, isWardenError, storageFull, type WardenError } from "../../core/errors.js";

export type PgPool = pg.Pool;
export type PgClient = pg.PoolClient | pg.Client;
export type PgQueryable = pg.Pool | pg.PoolClient | pg.Client;

export interface ConnectionSettings {
  /** `postgresql://user@host:port/db` or a unix socket directory as an encoded host */
  readonly url: string;
  /** how long to wait for a new connection before the call fails `storage-unavailable`, ms */
  readonly connectTimeoutMs?: number;
  /**
   * how long one statement may run (lock waits included) before the server cancels it and the
   * call fails `storage-timeout`, ms
   */
  readonly statementTimeoutMs?: number;
}

const DEFAULT_CONNECT_TIMEOUT_MS = 5000;
/**
 * Every statement warden sends is small (a batch of keys, one chunk, a thousand rows to prune):
 * one still running after this long is waiting on a lock or a sick server, and a caller waiting
 * forever would hold its connection, its batch and every caller queued behind it.
 */
const DEFAULT_STATEMENT_TIMEOUT_MS = 60_000;
const QUERY_CANCELED = "57014";
const INT8_OID = 20;

/**
 * int8 columns (ms timestamps, offsets, counters) arrive as numbers; a value past 2^53 cannot be
 * one and is refused rather than rounded, as a damaged record (500, not a 503 worth retrying):
 * warden never writes one. Reads whose rows are checked one by one use ROW_CHECKED_TYPES instead.
 */
const types = {
  getTypeParser(oid: number, format?: "text" | "binary"): (value: string) => unknown {
    if (oid === INT8_OID && format !== "binary") return parseInt8;
    return pg.types.getTypeParser(oid, format ?? "text") as (value: string) => unknown;
  },
};

/**
 * The same, except that an int8 past 2^53 arrives as its text: for reads of rows that are checked
 * one by one (claims), where the row with such a value is refused as malformed on its own instead
 * of failing the whole statement and every other row read with it.
 */
export const ROW_CHECKED_TYPES = {
  getTypeParser(oid: number, format?: "text" | "binary"): (value: string) => unknown {
    if (oid === INT8_OID && format !== "binary") return int8OrText;
    return types.getTypeParser(oid, format);
  },
};

/** An int8 as a number when it is one exactly, else its text (for the row's check to refuse). */
function int8OrText(text: string): number | string {
  const value = Number(text);
  return Number.isSafeInteger(value) ? value : text;
}

function parseInt8(text: string): number {
  const value = Number(text);
  if (!Number.isSafeInteger(value)) {
    throw new IntegrityError("database-value-out-of-range", `a stored int8 value, ${text}, is not a safe integer: the record holding it is damaged`, { status: 500 });
  }
  return value;
}

/** The connection options every warden connection uses. */
export function clientConfig(settings: ConnectionSettings, applicationName: string): pg.ClientConfig {
  if (typeof settings.url !== "string" || !/^postgres(ql)?:\/\//.test(settings.url)) {
    throw new ValidationError("postgres-url-invalid", "the PostgreSQL URL must start with postgresql:// (or postgres://)");
  }
  return {
    connectionString: settings.url,
    connectionTimeoutMillis: settings.connectTimeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS,
    keepAlive: true,
    application_name: applicationName,
    types,
  };
}

function statementTimeoutOf(settings: ConnectionSettings): number {
  const ms = settings.statementTimeoutMs ?? DEFAULT_STATEMENT_TIMEOUT_MS;
  if (!Number.isSafeInteger(ms) || ms < 1) throw new ValidationError("postgres-statement-timeout-invalid", "the statement timeout must be a positive integer of ms");
  return ms;
}

/**
 * The server's TCP keepalives on every connection of a node. Its sessions hold what other nodes
 * wait on (the owner lock, on its own connection: while it lives, the node's runs read
 * in_progress fleet-wide; the store-wide lock of a begin or gc), and a node whose host vanishes
 * (power lost, network cut: no FIN ever arrives) would otherwise keep them until the kernel's
 * default keepalive gives up, over two hours. With these, the server ends such a session within
 * about 11 s. (Ignored on a unix socket, whose peer cannot vanish without its host.)
 */
export const SERVER_KEEPALIVES = "SET tcp_keepalives_idle = 5; SET tcp_keepalives_interval = 2; SET tcp_keepalives_count = 3";

/**
 * The node's pool. Idle connections that die (server restart) are dropped and replaced on demand.
 * Each new connection is configured with SET before it is handed out, not through the `options`
 * startup parameter: PgBouncer refuses that parameter (or, told to ignore it, drops the settings).
 */
export function openPool(settings: ConnectionSettings, max: number): PgPool {
  const configure = `SET synchronous_commit = on; SET statement_timeout = ${statementTimeoutOf(settings)}; ${SERVER_KEEPALIVES}`;
  const pool = new pg.Pool({
    ...clientConfig(settings, "warden"),
    max,
    idleTimeoutMillis: 30_000,
    onConnect: async (client) => {
      await client.query(configure);
    },
  });
  // An idle client's error (the server went away) must not crash the process: the pool discards
  // that client, and the next query opens a new connection or fails storage-unavailable.
  pool.on("error", () => undefined);
  return pool;
}

/** A connection outside the pool, for the owner lock (see owner.ts). */
export function openDedicatedClient(settings: ConnectionSettings, applicationName: string): pg.Client {
  return new pg.Client(clientConfig(settings, applicationName));
}

const NETWORK_ERRNOS = new Set([
  "ECONNREFUSED",
  "ECONNRESET",
  "EPIPE",
  "ETIMEDOUT",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "EAI_AGAIN",
  "ENOTFOUND",
  // a unix socket path with no server behind it
  "ENOENT",
]);
/** SQLSTATEs that mean "the server is going away or not accepting us now" (class 08 too). */
const UNAVAILABLE_SQLSTATES = new Set(["57P01", "57P02", "57P03", "53300", "57P05"]);
const DRIVER_CONNECTION_MESSAGES = /Connection terminated|not queryable|timeout exceeded when trying to connect|Connection ended|Client was closed/i;

/** The driver's own refusal to start a password exchange without a password (no SQLSTATE). */
const NO_PASSWORD = /client password must be a string/;

export const UNIQUE_VIOLATION = "23505";
export const FOREIGN_KEY_VIOLATION = "23503";

/** True when `error` says the database cannot be reached (rather than refusing a statement). */
export function isUnavailable(error: unknown): boolean {
  const code = errnoCode(error);
  if (code !== undefined) {
    if (NETWORK_ERRNOS.has(code) || UNAVAILABLE_SQLSTATES.has(code) || (code.length === 5 && code.startsWith("08"))) return true;
  }
  return error instanceof Error && DRIVER_CONNECTION_MESSAGES.test(error.message);
}

/** The SQLSTATE of a server error, or undefined. */
export function sqlState(error: unknown): string | undefined {
  const code = errnoCode(error);
  return code !== undefined && /^[0-9A-Z]{5}$/.test(code) ? code : undefined;
}

/**
 * A driver or server failure as a WardenError: `storage-unavailable` when the database cannot be
 * reached (the caller may retry once it is back), `capacity-exhausted` (507) when it is out of disk,
 * `storage-timeout` when a statement ran past the statement timeout (cancelled by the server, so
 * it changed nothing), and `database-error` for anything else. WardenErrors pass through unchanged.
 */
export function pgFailure(error: unknown, action: string): WardenError {
  if (isWardenError(error)) return error;
  const message = error instanceof Error ? error.message : String(error);
  if (isUnavailable(error)) {
    return new StorageError("storage-unavailable", `the database is unavailable; could not ${action}: ${message}`, { cause: error });
  }
  const state = sqlState(error);
  if (state === "53100") return storageFull(action, error);
  // Refused credentials are a configuration to fix, not an outage to wait out (nor a failed "migration").
  if (state === "28P01" || state === "28000" || NO_PASSWORD.test(message)) {
    return new StorageError("database-auth-failed", `the database refused warden's credentials (${message}); give the password in the URL, PGPASSWORD or ~/.pgpass`, {
      cause: error,
      ...(state === undefined ? {} : { details: { sqlstate: state } }),
    });
  }
  if (state === QUERY_CANCELED) {
    return new StorageError("storage-timeout", `the database did not answer in time (statement timeout); could not ${action}`, { cause: error });
  }
  return new StorageError("database-error", `could not ${action}: ${message}`, {
    cause: error,
    ...(state === undefined ? {} : { details: { sqlstate: state } }),
  });
}

/** Runs one query, mapping failures through pgFailure. */
export async function query<R extends pg.QueryResultRow = pg.QueryResultRow>(
  db: PgQueryable,
  action: string,
  config: pg.QueryConfig,
): Promise<pg.QueryResult<R>> {
  try {
    return await db.query<R>(config);
  } catch (error) {
    throw pgFailure(error, action);
  }
}

/**
 * Lends `work` a pooled connection and releases it after, discarding it when it broke (`work`
 * calls `broke`, or the session ended meanwhile). While a connection is lent, pg-pool no longer
 * listens for its 'error' event, and a session that ends between two statements (the server
 * restarted, an operator terminated it) is reported only there: unheard, it would crash the node.
 */
export async function withPooledClient<T>(
  pool: PgPool,
  action: string,
  work: (client: pg.PoolClient, broke: () => void) => Promise<T>,
): Promise<T> {
  let client: pg.PoolClient;
  try {
    client = await pool.connect();
  } catch (error) {
    throw pgFailure(error, action);
  }
  let broken = false;
  const broke = (): void => {
    broken = true;
  };
  client.on("error", broke);
  try {
    return await work(client, broke);
  } finally {
    client.off("error", broke);
    client.release(broken);
  }
}

/**
 * Runs `work` in one transaction on a pooled connection. A failed COMMIT, or a connection lost
 * mid-transaction, rejects: the caller must treat the outcome as unknown, never as success.
 */
export async function transaction<T>(pool: PgPool, action: string, work: (client: pg.PoolClient) => Promise<T>): Promise<T> {
  return withPooledClient(pool, action, async (client, broke) => {
    try {
      await client.query("BEGIN");
      const value = await work(client);
      await client.query("COMMIT");
      return value;
    } catch (error) {
      try {
        await client.query("ROLLBACK");
      } catch {
        // the connection is gone: the server rolled the transaction back itself
        broke();
      }
      throw pgFailure(error, action);
    }
  });
}
