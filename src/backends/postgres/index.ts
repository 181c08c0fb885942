/**
 * The postgres backend (DESIGN.md "Backends"): every store on one PostgreSQL database, so several
 * nodes share claims, journals, keys, bundles and blobs.
 *
 *   warden_schema                    applied migrations (schema.ts)
 *   warden_claims, warden_counters   claims, results, receipts; the capacity counter
 *   warden_journals, …_journal_lines one row per journal line
 *   warden_parked_sessions           a parked run's CLI session transcript, for the node that resumes it
 *   warden_signing_keys              the fleet's Ed25519 keys
 *   warden_blobs, …_blob_chunks      content-addressed blobs as bytea rows
 *   warden_stages, …_stage_blobs, …_stage_chunks   uploads in progress
 *   warden_commits, …_commit_blobs   the catalog of committed bundles
 *   warden_tlog_*                    the fleet's transparency log (log-store.ts)
 *   warden_nodes                     the fleet's nodes (node-registry.ts)
 *
 * Opening applies migrations, then registers this process as a new owner (owner.ts). A node
 * still needs its own private home directory for what is local to it (materializations, agent
 * outputs, workspaces, its token); nothing in it is shared.
 */
import { resolveLimits, type Limits } from "../../core/limits.js";
import type { DeliveryBackend } from "../../delivery/service.js";
import { deliveryStoreLock } from "./store-lock.js";
import { PostgresBlobStore } from "./blob-store.js";
import { PostgresCatalogStore } from "./catalog-store.js";
import { PostgresClaimStore } from "./claim-store.js";
import { openPool, type ConnectionSettings, type PgPool } from "./connection.js";
import { PostgresSessionStore } from "./session-store.js";
import { JournalPrefetch, PostgresJournalStore } from "./journal-store.js";
import { PostgresKeyStore } from "./key-store.js";
import { PostgresLogStore } from "./log-store.js";
import { OwnerSession, type OwnerSessionOptions } from "./owner.js";
import { NodeRegistry } from "./node-registry.js";
import { migrate } from "./schema.js";
import { PostgresStageStore } from "./stage-store.js";
import { PostgresSpendCounters } from "./spend-store.js";

export interface PostgresBackendOptions {
  /** `postgresql://user[:password]@host[:port]/database` (a unix socket directory as an encoded host) */
  readonly url: string;
  readonly limits?: Partial<Limits>;
  /** pooled connections of this node (default 16); the owner lock uses one more, outside the pool */
  readonly poolSize?: number;
  /** how long a call waits for a connection before failing `storage-unavailable`, ms */
  readonly connectTimeoutMs?: number;
  /** how long one statement may run before it is cancelled and fails `storage-timeout`, ms (default 60 s) */
  readonly statementTimeoutMs?: number;
  /** owner-lock heartbeat and reconnect tuning (tests shorten them) */
  readonly owner?: Omit<OwnerSessionOptions, "settings">;
  /** the name this node's catch-up watermark is kept under in the fleet's log (a node: its home's node id) */
  readonly logNode?: string;
}

export interface PostgresBackend {
  readonly limits: Limits;
  readonly claims: PostgresClaimStore;
  readonly journals: PostgresJournalStore;
  readonly keys: PostgresKeyStore;
  /** the fleet's transparency log (one per database); on the pool that `close` ends */
  readonly log: PostgresLogStore;
  /** the delivery stores, for `Delivery.open`; closing them leaves the pool to `close` below */
  readonly delivery: DeliveryBackend;
  readonly owner: OwnerSession;
  /** the fleet's live nodes, and what this one says of itself */
  readonly nodes: NodeRegistry;
  /** the fleet's daily spend counters per workspace and principal */
  readonly spend: PostgresSpendCounters;
  /** parked runs' session transcripts, for whichever node resumes them */
  readonly sessions: PostgresSessionStore;
  /** Waits for queued writes, ends this incarnation's ownership and closes the pool. */
  close(): Promise<void>;
}

const DEFAULT_POOL_SIZE = 16;

export async function openPostgresBackend(options: PostgresBackendOptions): Promise<PostgresBackend> {
  const limits = resolveLimits(options.limits);
  const settings: ConnectionSettings = {
    url: options.url,
    ...(options.connectTimeoutMs === undefined ? {} : { connectTimeoutMs: options.connectTimeoutMs }),
    ...(options.statementTimeoutMs === undefined ? {} : { statementTimeoutMs: options.statementTimeoutMs }),
  };
  const pool: PgPool = openPool(settings, options.poolSize ?? DEFAULT_POOL_SIZE);
  let owner: OwnerSession | undefined;
  const nodes = new NodeRegistry(pool);
  try {
    await migrate(pool);
    owner = await OwnerSession.open({ ...options.owner, settings, onLocked: nodes.register });
  } catch (error) {
    await pool.end().catch(() => undefined);
    throw error;
  }
  const session = owner;
  const prefetch = new JournalPrefetch();
  const claims = new PostgresClaimStore({ pool, owner: session, maxClaims: limits.maxClaims, prefetch });
  const journals = new PostgresJournalStore(pool, prefetch);
  const keys = new PostgresKeyStore(pool);
  const delivery: DeliveryBackend = {
    blobs: new PostgresBlobStore(pool),
    stages: new PostgresStageStore(pool),
    catalog: new PostgresCatalogStore(pool),
    storeWide: deliveryStoreLock(pool),
    close: async () => undefined,
  };
  let closing: Promise<void> | undefined;
  return {
    limits,
    claims,
    journals,
    keys,
    log: new PostgresLogStore(pool, options.logNode),
    delivery,
    owner: session,
    nodes,
    spend: new PostgresSpendCounters(pool),
    sessions: new PostgresSessionStore(pool),
    close(): Promise<void> {
      closing ??= (async () => {
        try {
          await claims.close();
          await journals.settled();
        } finally {
          await session.close();
          await pool.end().catch(() => undefined);
        }
      })();
      return closing;
    },
  };
}
