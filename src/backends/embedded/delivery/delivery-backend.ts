/**
 * Opens the embedded delivery backend under a warden home and returns the `Delivery` service on
 * it. Opening is start-up recovery: take the store's lock (one process at a time), audit the
 * whole tree without changing anything, then repair files, then let the service settle stages
 * and collect garbage.
 */
import type { TrustPolicy } from "../../../signing/policy.js";
import { StorageError } from "../../../core/errors.js";
import { resolveLimits, type Limits } from "../../../core/limits.js";
import { Delivery } from "../../../delivery/service.js";
import type { DeliveryAttest } from "../../../delivery/bundle-catalog.js";
import { FileLock } from "../../../storage/lock.js";
import { ensurePrivateDirSync } from "../../../storage/secure-fs.js";
import { auditDeliveryTree } from "./delivery-audit.js";
import { EmbeddedBlobStore } from "./delivery-blob-store.js";
import { EmbeddedCatalogStore } from "./delivery-catalog-store.js";
import { openDeliveryDatabase, type DeliveryDatabase } from "./delivery-db.js";
import type { DeliveryFaults } from "./delivery-faults.js";
import { lstatOrUndefined } from "./delivery-fd-io.js";
import { DeliveryLayout } from "./delivery-layout.js";
import { repairDeliveryFiles, type FileRepairReport } from "./delivery-repair.js";
import { EmbeddedStageStore } from "./delivery-stage-store.js";

export interface EmbeddedDeliveryOptions {
  readonly limits?: Partial<Limits>;
  readonly clock?: () => number;
  readonly faults?: DeliveryFaults;
  readonly trust?: TrustPolicy;
  readonly attest?: DeliveryAttest;
}

export interface EmbeddedDelivery {
  readonly delivery: Delivery;
  readonly layout: DeliveryLayout;
  readonly repairs: FileRepairReport;
}

export async function openEmbeddedDelivery(home: string, options: EmbeddedDeliveryOptions = {}): Promise<EmbeddedDelivery> {
  const limits = resolveLimits(options.limits);
  const layout = new DeliveryLayout(home);
  ensurePrivateDirSync(home, { create: true, recursive: true });
  ensurePrivateDirSync(layout.root, { create: true });
  const lock = FileLock.tryAcquire(layout.lockPath);
  if (lock === undefined) {
    throw new StorageError("delivery-store-locked", `the delivery store ${layout.root} is open in another process or instance`);
  }
  let db: DeliveryDatabase | undefined;
  try {
    const audit = auditDeliveryTree(layout, limits);
    const newStore = lstatOrUndefined(layout.blobsDir) === undefined;
    ensurePrivateDirSync(layout.blobsDir, { create: true });
    ensurePrivateDirSync(layout.stagesDir, { create: true });
    db = openDeliveryDatabase(layout.dbPath);
    const blobs = new EmbeddedBlobStore(layout, options.faults);
    if (newStore) blobs.createShards();
    const stages = new EmbeddedStageStore(db, layout, blobs, options.faults);
    const catalog = new EmbeddedCatalogStore(db, options.faults, (stageId) => stages.closed(stageId));
    const repairs = await repairDeliveryFiles(audit, layout, stages);
    const opened = db;
    let closed = false;
    const backend = {
      blobs,
      stages,
      catalog,
      close: async (): Promise<void> => {
        if (closed) return;
        closed = true;
        opened.close();
        lock.release();
      },
    };
    const clock = options.clock;
    const delivery = await Delivery.open(backend, {
      limits,
      ...(clock === undefined ? {} : { clock }),
      ...(options.trust === undefined ? {} : { trust: options.trust }),
      ...(options.attest === undefined ? {} : { attest: options.attest }),
    });
    return { delivery, layout, repairs };
  } catch (error) {
    db?.close();
    lock.release();
    throw error;
  }
}
