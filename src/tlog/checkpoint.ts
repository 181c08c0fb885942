/**
 * C2SP tlog-checkpoint (c2sp.org/tlog-checkpoint@v1.0.0): the note text `<origin>\n<size>\n<base64
 * root>\n` plus optional non-empty extension lines (warden writes none).
 */
import { decodeBase64Strict } from "../core/base64.js";
import { malformed } from "./errors.js";
import { HASH_BYTES, type Hash } from "./merkle.js";

export interface Checkpoint {
  readonly origin: string;
  readonly size: number;
  readonly root: Hash;
  readonly extensions: readonly string[];
}

export function formatCheckpoint(checkpoint: Pick<Checkpoint, "origin" | "size" | "root">): string {
  return `${checkpoint.origin}\n${checkpoint.size}\n${checkpoint.root.toString("base64")}\n`;
}

/** Parses a checkpoint's note text (the part before the signatures). */
export function parseCheckpointText(text: string): Checkpoint {
  const lines = text.split("\n");
  if (lines.length < 4 || lines.at(-1) !== "") throw malformed("checkpoint-malformed", "a checkpoint is origin, size and root hash lines");
  const [origin, sizeText, rootText, ...rest] = lines.slice(0, -1) as [string, string, string, ...string[]];
  const root = decodeBase64Strict(rootText, HASH_BYTES);
  if (origin === "" || !/^(0|[1-9][0-9]{0,15})$/.test(sizeText) || !Number.isSafeInteger(Number(sizeText)) || root === undefined || rest.some((l) => l === "")) {
    throw malformed("checkpoint-malformed", "a checkpoint is a non-empty origin, a decimal size with no leading zeros, a base64 SHA-256 root, and non-empty extension lines");
  }
  return { origin, size: Number(sizeText), root, extensions: rest };
}
