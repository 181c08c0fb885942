/**
 * The embedded backend: all state in one private directory (DESIGN.md "Backends").
 *
 *   <home>/            0700
 *     claims.sqlite    claims, results, receipts (WAL, synchronous=FULL)
 *     journals/        one signed journal per run
 *     keys/            the node's Ed25519 signing keys
 *     owners/          one flock'ed lock file per living process incarnation
 *     spend.sqlite     the daily spend counters per workspace and principal
 */
import { join } from "node:path";
import type { Worker } from "node:worker_threads";
import { resolveLimits, type Limits } from "../../core/limits.js";
import { ensurePrivateDirSync } from "../../storage/secure-fs.js";
import { EmbeddedClaimStore } from "./claims/claim-store.js";
import type { EmbeddedJournalStore, JournalStoreHooks } from "./journal/journal-store.js";
import { EmbeddedKeyStore } from "./journal/key-store.js";
import { SmallReadJournalStore } from "./journal/small-read-journal-store.js";
import type { OpenDatabaseOptions } from "../../storage/sqlite.js";
import { EmbeddedSpendCounters } from "./spend/spend-store.js";

export interface EmbeddedBackendOptions {
  readonly home: string;
  readonly limits?: Partial<Limits>;
  /** SQLite tuning and fault-injection seams (see sqlite.ts) */
  readonly database?: OpenDatabaseOptions;
  /** journal I/O fault-injection seams */
  readonly journalHooks?: JournalStoreHooks;
  /** starts the claim store's write worker; undefined writes in-process (see claim-store.ts) */
  readonly claimWriteWorker?: (() => Worker) | undefined;
  /** false: every claim write goes to the write worker, even a lone one (benches and fault tests) */
  readonly claimWriteInline?: boolean;
}

export interface EmbeddedBackend {
  readonly home: string;
  readonly limits: Limits;
  readonly claims: EmbeddedClaimStore;
  readonly journals: EmbeddedJournalStore;
  readonly keys: EmbeddedKeyStore;
  readonly spend: EmbeddedSpendCounters;
  /** Waits for queued writes, closes the database and ends this process's ownership. */
  close(): Promise<void>;
}

export const CLAIMS_DATABASE = "claims.sqlite";

export function embeddedPaths(home: string): { claims: string; journals: string; keys: string; owners: string } {
  return {
    claims: join(home, CLAIMS_DATABASE),
    journals: join(home, "journals"),
    keys: join(home, "keys"),
    owners: join(home, "owners"),
  };
}

/** Opens (creating when missing) the state directory; every part is validated first (G10). */
export async function openEmbeddedBackend(options: EmbeddedBackendOptions): Promise<EmbeddedBackend> {
  const limits = resolveLimits(options.limits);
  const home = options.home;
  ensurePrivateDirSync(home, { create: true, recursive: true });
  const paths = embeddedPaths(home);
  for (const dir of [paths.journals, paths.keys, paths.owners]) ensurePrivateDirSync(dir, { create: true });
  const journals = new SmallReadJournalStore(paths.journals, options.journalHooks === undefined ? {} : { hooks: options.journalHooks });
  const keys = new EmbeddedKeyStore(paths.keys);
  const claims = EmbeddedClaimStore.open({
    path: paths.claims,
    ownersDir: paths.owners,
    maxClaims: limits.maxClaims,
    ...(options.database === undefined ? {} : { database: options.database }),
    ...("claimWriteWorker" in options ? { writeWorker: options.claimWriteWorker } : {}),
    ...(options.claimWriteInline === undefined ? {} : { inlineWhenIdle: options.claimWriteInline }),
  });
  let spend: EmbeddedSpendCounters;
  try {
    spend = EmbeddedSpendCounters.open(home);
  } catch (error) {
    await claims.close();
    throw error;
  }
  let closed = false;
  return {
    home,
    limits,
    claims,
    journals,
    keys,
    spend,
    async close(): Promise<void> {
      if (closed) return;
      closed = true;
      try {
        await claims.close();
      } finally {
        spend.close();
      }
    },
  };
}
