/**
 * Worker-thread entry of the off-thread hasher (off-thread-hash.ts): each job is a range of a
 * SharedArrayBuffer, digested where it lies (nothing is copied or handed back), answered with its
 * sha256. It says `ready` once it listens: the hasher hands it nothing before (Worker's own
 * `online` comes before the entry has loaded, which from source through tsx takes a while).
 */
import { parentPort } from "node:worker_threads";
import { sha256Hex } from "./digest.js";

interface Job {
  readonly id: number;
  readonly buffer: SharedArrayBuffer;
  readonly offset: number;
  readonly length: number;
}

parentPort?.on("message", (job: Job) => {
  let hex: string | undefined;
  let message: string | undefined;
  try {
    hex = sha256Hex(new Uint8Array(job.buffer, job.offset, job.length));
  } catch (error) {
    message = error instanceof Error ? error.message : String(error);
  }
  parentPort?.postMessage({ id: job.id, hex, message });
});
parentPort?.postMessage({ ready: true });
