/**
 * A warden node on the postgres backend: the shared stores on PostgreSQL, plus the node's own
 * private home directory for what stays local to one machine (materializations, agent outputs,
 * workspaces, its token). `openWarden({ home, postgres: { url } })` opens this instead of the
 * embedded backend; everything above the stores is the same.
 */
import type { TrustPolicy } from "../../signing/policy.js";
import type { Limits } from "../../core/limits.js";
import { Delivery } from "../../delivery/service.js";
import type { DeliveryAttest } from "../../delivery/bundle-catalog.js";
import { randomUUID } from "node:crypto";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { ensurePrivateDirSync, publishNewFileSync, readPrivateFileSync } from "../../storage/secure-fs.js";
import { ValidationError } from "../../core/errors.js";
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
  openDelivery(options?: { clock?: () => number; trust?: TrustPolicy; attest?: DeliveryAttest }): Promise<Delivery>;
}

export async function openPostgresNodeBackend(
  home: string,
  options: PostgresNodeOptions & { readonly limits?: Partial<Limits> },
): Promise<PostgresNodeBackend> {
  ensurePrivateDirSync(home, { create: true, recursive: true });
  const backend = await openPostgresBackend({ ...options, logNode: nodeIdOf(home) });
  return {
    ...backend,
    home,
    close: () => backend.close(),
    openDelivery: (delivery = {}) =>
      Delivery.open(backend.delivery, {
        limits: backend.limits,
        ...(delivery.clock === undefined ? {} : { clock: delivery.clock }),
        ...(delivery.trust === undefined ? {} : { trust: delivery.trust }),
        ...(delivery.attest === undefined ? {} : { attest: delivery.attest }),
      }),
  };
}

/** `<home>/node-id`: who this node is across its restarts (an owner id names one incarnation only). */
export const NODE_ID_FILE = "node-id";
const NODE_ID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/** The home's node id, made at its first start on the postgres backend. */
export function nodeIdOf(home: string): string {
  const path = join(home, NODE_ID_FILE);
  // Published whole or not at all; a second process of the same home racing here reads the winner's.
  if (!existsSync(path)) publishNewFileSync(path, `${randomUUID()}\n`);
  const id = readPrivateFileSync(path, 64).toString("utf8").trim();
  if (!NODE_ID.test(id)) throw new ValidationError("node-id-invalid", `${path} does not hold a node id (a UUID); restore it, or remove it to start as a new node`);
  return id;
}
