/**
 * Worker-thread entry of the signer (signer.ts). Keys arrive once each; a batch is one buffer of
 * messages (with their end offsets) signed with one key, answered as one buffer of 64-byte
 * signatures. Both buffers are transferred, not copied.
 */
import { sign, type KeyObject } from "node:crypto";
import { parentPort } from "node:worker_threads";

type Message =
  | { readonly kind: "key"; readonly index: number; readonly key: KeyObject }
  | { readonly kind: "batch"; readonly id: number; readonly key: number; readonly data: ArrayBuffer; readonly ends: readonly number[] };

const SIGNATURE_BYTES = 64;
const keys = new Map<number, KeyObject>();

parentPort?.on("message", (message: Message) => {
  if (message.kind === "key") {
    keys.set(message.index, message.key);
    return;
  }
  try {
    const key = keys.get(message.key);
    if (key === undefined) throw new Error(`unknown key ${message.key}`);
    const data = new Uint8Array(message.data);
    const out = new Uint8Array(message.ends.length * SIGNATURE_BYTES);
    let start = 0;
    message.ends.forEach((end, i) => {
      out.set(sign(null, data.subarray(start, end), key), i * SIGNATURE_BYTES);
      start = end;
    });
    parentPort?.postMessage({ id: message.id, ok: true, signatures: out.buffer }, [out.buffer]);
  } catch (error) {
    parentPort?.postMessage({ id: message.id, ok: false, message: error instanceof Error ? error.message : String(error) });
  }
});
