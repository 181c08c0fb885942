/** Worker-thread entry of the run checker pool (run-checker.ts): one checkRun per message. */
import { parentPort } from "node:worker_threads";
import type { PublicKeyRecord } from "../journal/types.js";
import type { VerifyOptions } from "../journal/verify.js";
import { checkRun } from "./run-check.js";

interface Job {
  readonly id: number;
  readonly bytes: Uint8Array;
  readonly keys: readonly PublicKeyRecord[];
  readonly options: VerifyOptions;
}

parentPort?.on("message", (job: Job) => {
  try {
    parentPort?.postMessage({ id: job.id, ok: true, check: checkRun(job.bytes, job.keys, job.options) });
  } catch (error) {
    parentPort?.postMessage({ id: job.id, ok: false, message: error instanceof Error ? error.message : String(error) });
  }
});
