/**
 * Child of crash.test.ts. Loads everything, prints "loaded", then reads one JSON line of
 * parameters from stdin: opens the store under `home`, prints "opened", and pushes the crash
 * bundle (begin, chunked upload, commit). With `point`, it SIGKILLs itself at the `nth` time the
 * store reaches that fault point; with `step` alone, at the nth fault point of any kind; otherwise
 * the parent kills it after a random delay. A push that completes prints "steps <n>" (how many
 * fault points it passed) and exits 0; 3 means the requested kill point was never reached. Each
 * acknowledged chunk is reported as "acked <digest> <next offset>" (stdout is a pipe: written
 * synchronously, so a line printed before a kill reaches the parent).
 */
import { openEmbeddedDelivery } from "../../../src/backends/embedded/delivery/delivery-backend.js";
import type { DeliveryFaultPoint } from "../../../src/backends/embedded/delivery/delivery-faults.js";
import { crashBundle, CRASH_CHUNK_BYTES } from "./crash-bundle.js";
import { awaitParams } from "./await-params.js";

interface Params {
  readonly home: string;
  readonly seed: number;
  readonly point?: DeliveryFaultPoint;
  readonly nth?: number;
  readonly step?: number;
}

async function run(params: Params): Promise<void> {
  let seen = 0;
  let steps = 0;
  const { delivery } = await openEmbeddedDelivery(params.home, {
    faults: {
      at: (point) => {
        steps++;
        if (point === params.point && ++seen === params.nth) process.kill(process.pid, "SIGKILL");
        if (params.point === undefined && steps === params.step) process.kill(process.pid, "SIGKILL");
      },
    },
  });
  process.stdout.write("opened\n");
  const { manifest, blobs } = crashBundle(params.seed);
  const begun = await delivery.begin(manifest);
  for (const missing of begun.missing) {
    const bytes = blobs.get(missing.digest)!;
    for (let offset = missing.offset; offset < bytes.byteLength; ) {
      const chunk = bytes.subarray(offset, Math.min(offset + CRASH_CHUNK_BYTES, bytes.byteLength));
      offset = (await delivery.putChunk(begun.stage_id, missing.digest, offset, chunk)).next_offset;
      process.stdout.write(`acked ${missing.digest} ${offset}\n`);
    }
  }
  await delivery.commit(begun.stage_id);
  await delivery.close();
  process.stdout.write(`steps ${steps}\n`);
  process.exit(params.point === undefined && params.step === undefined ? 0 : 3);
}

awaitParams(run);
