/**
 * A warden node on the postgres backend: the shared stores on PostgreSQL, plus the node's own
 * private home directory for what stays local to one machine (materializations, agent outputs,
 * workspaces, its token). `openWarden({ home, postgres: { url } })` opens this instead of the
 * embedded backend; everything above the stores is the same.
 */
import type { TrustPolicy } from "../../signing/policy.js";
import type { Limits } from "../../core/limits.js";
import { Delivery } from "../../delivery/service.js";
import { ensurePrivateDirSync } from "../../storage/secure-fs.js";
import { openPostgresBackend, type PostgresBackend } from "./index.js";

export interface PostgresNodeOptions {
  /** `postgresql://…` of the fleet's database */
  readonly url: string;
  /** pooled connections of this node (default 16) */
  readonly poolSize?: number;
  /** how long a call waits for a connection before failing `storage-unavailable`, ms */
  readonly connectTimeoutMs?: number;
}

export interface PostgresNodeBackend extends PostgresBackend {
  readonly home: string;
  /** The Delivery service on the shared stores, after its start-up recovery. */
  openDelivery(options?: { clock?: () => number; trust?: TrustPolicy }): Promise<Delivery>;
}

export async function openPostgresNodeBackend(
  home: string,
  options: PostgresNodeOptions & { readonly limits?: Partial<Limits> },
): Promise<PostgresNodeBackend> {
  ensurePrivateDirSync(home, { create: true, recursive: true });
  const backend = await openPostgresBackend(options);
  return {
    ...backend,
    home,
    close: () => backend.close(),
    openDelivery: (delivery = {}) =>
      Delivery.open(backend.delivery, {
        limits: backend.limits,
        ...(delivery.clock === undefined ? {} : { clock: delivery.clock }),
        ...(delivery.trust === undefined ? {} : { trust: delivery.trust }),
      }),
  };
}
