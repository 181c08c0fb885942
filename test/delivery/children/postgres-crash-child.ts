/**
 * Child of postgres-crash.test.ts. Loads everything, prints "loaded", then reads one JSON line of
 * parameters from stdin: opens the postgres backend on `url` and its delivery, prints "opened",
 * and pushes the crash bundle of `seed` (begin, chunked upload, commit) until the parent kills it.
 * It reports its progress so the parent can check what a re-push may and may not ask for:
 * "begun <stage id>" once begin answered, "acked <digest> <next offset>" per acknowledged chunk,
 * "committing" before the commit, "recording" / "recorded" around the catalog's record (the
 * commit's last durable step, so the parent can aim kills at its transaction) and "committed"
 * once the commit answered, then "receipt <json>"; a push that completes exits 0. The catalog is only observed, the
 * store under test is the backend's own.
 * stdout is a pipe: written synchronously, so a line printed before a kill reaches the parent.
 */
import { openPostgresBackend } from "../../../src/backends/postgres/index.js";
import type { CatalogStore } from "../../../src/delivery/catalog.js";
import { Delivery } from "../../../src/delivery/service.js";
import { crashBundle, CRASH_CHUNK_BYTES } from "./crash-bundle.js";
import { awaitParams } from "./await-params.js";

interface Params {
  readonly url: string;
  readonly seed: number;
}

const say = (line: string): void => {
  process.stdout.write(`${line}\n`);
};

/** The catalog, announcing each `record` before it starts and once it answered. */
function announcingRecord(catalog: CatalogStore): CatalogStore {
  return new Proxy(catalog, {
    get(target, property) {
      const value: unknown = Reflect.get(target, property, target);
      if (typeof value !== "function") return value;
      if (property !== "record") return value.bind(target);
      return async (...args: Parameters<CatalogStore["record"]>) => {
        say("recording");
        const entry = await target.record(...args);
        say("recorded");
        return entry;
      };
    },
  });
}

async function run(params: Params): Promise<void> {
  const backend = await openPostgresBackend({ url: params.url, poolSize: 4 });
  const stores = { ...backend.delivery, catalog: announcingRecord(backend.delivery.catalog) };
  const delivery = await Delivery.open(stores, { limits: backend.limits });
  say("opened");
  const { manifest, blobs } = crashBundle(params.seed);
  const begun = await delivery.begin(manifest);
  say(`begun ${begun.stage_id}`);
  for (const missing of begun.missing) {
    const bytes = blobs.get(missing.digest)!;
    for (let offset = missing.offset; offset < bytes.byteLength; ) {
      const chunk = bytes.subarray(offset, Math.min(offset + CRASH_CHUNK_BYTES, bytes.byteLength));
      offset = (await delivery.putChunk(begun.stage_id, missing.digest, offset, chunk)).next_offset;
      say(`acked ${missing.digest} ${offset}`);
    }
  }
  say("committing");
  const receipt = await delivery.commit(begun.stage_id);
  say("committed");
  say(`receipt ${JSON.stringify(receipt)}`);
  await backend.close();
  process.exit(0);
}

awaitParams(run);
