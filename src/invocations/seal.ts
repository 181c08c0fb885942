/**
 * The journal seal stored with a recorded result. A replay compares it instead of re-verifying
 * the journal (DESIGN.md: cached replays must not re-verify whole journals): the file's length
 * and sha256, the hash of its last line, and that this last line is the run's termination with
 * the recorded result's hash. Hashing a few KB and parsing one line costs microseconds; a
 * signature verification per entry would cost far more.
 */
import { sha256Digest, type Digest } from "../core/digest.js";
import { lineHash } from "../journal/line.js";
import type { JournalDigest } from "../journal/types.js";
import type { JournalSeal } from "./claim-store.js";

const NEWLINE = 0x0a;

/** `sha256` is the digest of `bytes`, for a caller that already computed it. */
export function sealOf(
  bytes: Uint8Array,
  report: { readonly entries: number; readonly tail_hash: string },
  sha256: Digest = sha256Digest(bytes),
): JournalSeal {
  return { entries: report.entries, tail_hash: report.tail_hash, bytes: bytes.byteLength, sha256 };
}

/** True when `bytes` is still exactly the journal that was sealed with result `resultHash`. */
export function matchesSeal(bytes: Uint8Array, seal: JournalSeal, runId: string, resultHash: Digest): boolean {
  if (bytes.byteLength !== seal.bytes || sha256Digest(bytes) !== seal.sha256) return false;
  return tailMatchesSeal(bytes, seal, runId, resultHash);
}

/**
 * The same verdict from a digest the store computed: equal length and sha256 mean the bytes are
 * the sealed ones, and the last line is checked as above, so a seal copied from another run's row
 * still fails.
 */
export function digestMatchesSeal(digest: JournalDigest, seal: JournalSeal, runId: string, resultHash: Digest): boolean {
  if (digest.bytes !== seal.bytes || digest.sha256 !== seal.sha256 || digest.tail.byteLength > digest.bytes) return false;
  return tailMatchesSeal(digest.tail, seal, runId, resultHash);
}

/** `tail` (the journal's end) ends in a line that hashes to the seal's tail and terminates this run with this result. */
function tailMatchesSeal(tail: Uint8Array, seal: JournalSeal, runId: string, resultHash: Digest): boolean {
  if (tail.byteLength === 0 || tail[tail.byteLength - 1] !== NEWLINE) return false;
  const buf = Buffer.from(tail.buffer, tail.byteOffset, tail.byteLength);
  const start = buf.lastIndexOf(NEWLINE, buf.byteLength - 2) + 1;
  // A tail that begins mid-line (the store's last piece is not a whole line) cannot be judged: it fails.
  const last = buf.subarray(start);
  if (lineHash(last) !== seal.tail_hash) return false;
  try {
    const line = JSON.parse(last.toString("utf8")) as { entry?: { run_id?: unknown; event?: { type?: unknown; result_hash?: unknown } } };
    const entry = line.entry;
    return entry?.run_id === runId && entry.event?.type === "run.terminated" && entry.event.result_hash === resultHash;
  } catch {
    return false;
  }
}
