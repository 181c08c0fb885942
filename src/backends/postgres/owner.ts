/**
 * Owner liveness for the postgres backend. Each node incarnation holds a session-level advisory
 * lock, keyed by its owner id (warden_owner_key in schema.ts), on a DEDICATED connection that is
 * not part of the pool, for as long as it lives. Claims record the owner id; any node answers
 * "is the owner alive" by reading pg_locks (warden_owner_alive), which never takes the lock.
 * When a node dies, however it dies, its session ends, the lock vanishes and its open claims
 * read `unresolved` on every node at once: no timeout, no guess (a host that vanishes without a
 * word is noticed by the server's TCP keepalives, set short on this connection).
 *
 * If the dedicated connection is lost while the node lives on (a database restart, a network
 * cut), the lock is gone and the other nodes already see this incarnation's runs as unresolved.
 * The node must not go on claiming under that id: the session fails closed (every claim and
 * record is refused `storage-unavailable`) and reconnects as a NEW owner with a new id.
 *
 * The session must be a real server session: a transaction-mode pooler (PgBouncer with
 * pool_mode=transaction or statement) would hand the lock's backend to other clients and
 * release or share it behind warden's back. Point the backend at PostgreSQL directly, or at a
 * pooler in session mode.
 */
import { randomUUID } from "node:crypto";
import type pg from "pg";
import { StorageError } from "../../core/errors.js";
import { openDedicatedClient, pgFailure, SERVER_KEEPALIVES, type ConnectionSettings } from "./connection.js";

export interface OwnerSessionOptions {
  readonly settings: ConnectionSettings;
  /** how often the lock's connection is checked, ms */
  readonly heartbeatMs?: number;
  /** a heartbeat that takes longer than this counts as a lost connection, ms */
  readonly heartbeatTimeoutMs?: number;
  /** first delay before reconnecting after a loss, ms (doubles up to 2 s) */
  readonly reconnectMs?: number;
  /** run on the lock's connection once each incarnation holds its lock (the fleet's node registry) */
  readonly onLocked?: (client: pg.Client, id: string) => Promise<void>;
}

const DEFAULT_HEARTBEAT_MS = 1000;
const DEFAULT_HEARTBEAT_TIMEOUT_MS = 10_000;
const DEFAULT_RECONNECT_MS = 200;
const MAX_RECONNECT_MS = 2000;
/** Owner ids kept for `release` of claims made by earlier incarnations of this process. */
const REMEMBERED_INCARNATIONS = 16;

export class OwnerSession {
  readonly #options: OwnerSessionOptions;
  #client: pg.Client | undefined;
  #id: string;
  readonly #ids: string[] = [];
  #healthy = false;
  #closed = false;
  #heartbeat: NodeJS.Timeout | undefined;
  #reconnect: NodeJS.Timeout | undefined;
  #reconnectDelay: number;
  #incarnations = 0;
  #beating = false;

  private constructor(options: OwnerSessionOptions, id: string, client: pg.Client) {
    this.#options = options;
    this.#reconnectDelay = options.reconnectMs ?? DEFAULT_RECONNECT_MS;
    this.#id = id;
    this.#adopt(id, client);
  }

  /** Connects and takes the lock of a new owner id; fails `storage-unavailable` when it cannot. */
  static async open(options: OwnerSessionOptions): Promise<OwnerSession> {
    const { id, client } = await lockNewOwner(options.settings, options.onLocked);
    return new OwnerSession(options, id, client);
  }

  /** The current incarnation's owner id (it changes after a lost connection). */
  get id(): string {
    return this.#id;
  }

  /** Every owner id this process has held, newest first. */
  get ids(): readonly string[] {
    return this.#ids;
  }

  /** True while the lock's connection is up: claims may be created under `id`. */
  get healthy(): boolean {
    return this.#healthy;
  }

  /** Incarnations so far (1 after open; +1 per reconnect). */
  get incarnations(): number {
    return this.#incarnations;
  }

  /** Refuses work that needs a live owner lock. */
  assertHealthy(action: string): void {
    if (this.#closed) throw new StorageError("claim-store-closed", "the claim store is closed");
    if (!this.#healthy) {
      throw new StorageError(
        "storage-unavailable",
        `the owner lock's database connection is lost; could not ${action} (the node reconnects as a new owner)`,
      );
    }
  }

  /** Ends the session: the lock goes with it and this incarnation's open claims read unresolved. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.#healthy = false;
    clearInterval(this.#heartbeat);
    clearTimeout(this.#reconnect);
    const client = this.#client;
    this.#client = undefined;
    await client?.end().catch(() => undefined);
  }

  #adopt(id: string, client: pg.Client): void {
    this.#id = id;
    this.#ids.unshift(id);
    this.#ids.length = Math.min(this.#ids.length, REMEMBERED_INCARNATIONS);
    this.#client = client;
    this.#healthy = true;
    this.#incarnations++;
    this.#reconnectDelay = this.#options.reconnectMs ?? DEFAULT_RECONNECT_MS;
    const lost = (): void => this.#lost(client);
    client.on("error", lost);
    client.on("end", lost);
    clearInterval(this.#heartbeat);
    this.#heartbeat = setInterval(() => void this.#beat(client), this.#options.heartbeatMs ?? DEFAULT_HEARTBEAT_MS);
    this.#heartbeat.unref();
  }

  async #beat(client: pg.Client): Promise<void> {
    // One heartbeat at a time: a slow one is judged by its own timeout, not overlapped.
    if (client !== this.#client || this.#beating) return;
    this.#beating = true;
    const timeout = this.#options.heartbeatTimeoutMs ?? DEFAULT_HEARTBEAT_TIMEOUT_MS;
    let timer: NodeJS.Timeout | undefined;
    try {
      await Promise.race([
        client.query("SELECT 1"),
        new Promise((_, reject) => {
          timer = setTimeout(() => reject(new Error("owner heartbeat timed out")), timeout);
        }),
      ]);
    } catch {
      this.#lost(client);
    } finally {
      clearTimeout(timer);
      this.#beating = false;
    }
  }

  #lost(client: pg.Client): void {
    if (client !== this.#client || this.#closed) return;
    this.#healthy = false;
    this.#client = undefined;
    clearInterval(this.#heartbeat);
    // Make sure the server ends the old session (and drops its lock) even if only we noticed.
    client.end().catch(() => undefined);
    this.#scheduleReconnect();
  }

  #scheduleReconnect(): void {
    if (this.#closed) return;
    const delay = this.#reconnectDelay;
    this.#reconnectDelay = Math.min(delay * 2, MAX_RECONNECT_MS);
    this.#reconnect = setTimeout(() => void this.#tryReconnect(), delay);
    this.#reconnect.unref();
  }

  async #tryReconnect(): Promise<void> {
    if (this.#closed) return;
    let locked: { id: string; client: pg.Client };
    try {
      locked = await lockNewOwner(this.#options.settings, this.#options.onLocked);
    } catch {
      this.#scheduleReconnect();
      return;
    }
    if (this.#closed) {
      await locked.client.end().catch(() => undefined);
      return;
    }
    this.#adopt(locked.id, locked.client);
  }
}

/** Opens a dedicated connection and takes the advisory lock of a fresh owner id on it. */
async function lockNewOwner(settings: ConnectionSettings, onLocked: OwnerSessionOptions["onLocked"]): Promise<{ id: string; client: pg.Client }> {
  for (let attempt = 0; attempt < 4; attempt++) {
    const id = randomUUID();
    const client = openDedicatedClient(settings, `warden-owner ${id}`);
    // Errors before the session is adopted surface through the awaited calls below.
    client.on("error", () => undefined);
    try {
      await client.connect();
      await client.query(SERVER_KEEPALIVES);
      const result = await client.query<{ locked: boolean }>({
        text: "SELECT pg_try_advisory_lock(warden_owner_key($1)) AS locked",
        values: [id],
      });
      if (result.rows[0]?.locked === true) {
        await onLocked?.(client, id);
        return { id, client };
      }
    } catch (error) {
      await client.end().catch(() => undefined);
      throw pgFailure(error, "take the owner lock");
    }
    // Another session holds this key (a 64-bit collision): try another id.
    await client.end().catch(() => undefined);
  }
  throw new StorageError("owner-register-failed", "could not take an owner lock under four fresh owner ids");
}
