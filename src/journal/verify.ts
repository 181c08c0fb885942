/**
 * Verifies a journal (G5): every line must be the canonical DESIGN line, signed by a trusted key,
 * chained to the previous line by seq and prev, of one run, and in lifecycle order. Verification
 * stops at the first bad line and names it; everything before it is the verified prefix.
 */
import type { KeyObject } from "node:crypto";
import { canonicalJson } from "../core/canonical.js";
import { isHex64, sha256Hex } from "../core/digest.js";
import { ValidationError, isWardenError } from "../core/errors.js";
import { DEFAULT_LIMITS, type Limits } from "../core/limits.js";
import { decodeBase64Strict } from "../core/base64.js";
import { ED25519_SIGNATURE_BYTES, keyIdOf, parsePublicKey, publicKeyObject, verifyWithKeyObject } from "../core/ed25519.js";
import { RunLifecycle } from "./lifecycle.js";
import { lineText, signingMessage } from "./line.js";
import { PolicyRule } from "./policy-rule.js";
import { validateEntry } from "./schema.js";
import { ZERO_HASH, type JournalEntry, type PublicKeyRecord } from "./types.js";

/** Every code a verification can fail with; each names one broken rule. */
export const VERIFY_ERROR_CODES = [
  "journal-too-large",
  "journal-entry-too-large",
  "journal-incomplete-line",
  "journal-bad-json",
  "journal-bad-line",
  "journal-non-canonical",
  "journal-bad-entry",
  "journal-bad-event",
  "journal-note-too-large",
  "journal-unknown-key",
  "journal-bad-signature",
  "journal-wrong-run-id",
  "journal-wrong-seq",
  "journal-wrong-prev",
  "journal-not-started",
  "journal-duplicate-run-started",
  "journal-duplicate-effect-start",
  "journal-finish-without-start",
  "journal-duplicate-finish",
  "journal-duplicate-run-changes",
  "journal-after-terminated",
  "journal-duplicate-run-spend",
  "journal-truncated",
  "journal-checkpoint-mismatch",
  "journal-tool-without-decision",
  "journal-tool-not-allowed",
  "journal-duplicate-decision",
  "journal-approval-without-ask",
  "journal-duplicate-approval",
  "journal-parked-with-open-effects",
] as const;
export type VerifyErrorCode = (typeof VERIFY_ERROR_CODES)[number];

export interface VerifyError {
  /** the seq the bad line stands at (its position in the chain, counted from 0) */
  seq: number | null;
  /** 1-based line number */
  line: number;
  code: string;
  reason: string;
}

export interface VerifyReport {
  ok: boolean;
  /** number of valid entries before the first error */
  entries: number;
  first_error?: VerifyError;
  /** hash of the last valid line (ZERO_HASH if none) */
  tail_hash: string;
  /** the verified prefix, parsed */
  valid: readonly JournalEntry[];
  /** the file ends in a partial line (crash mid-write) */
  incomplete_tail: boolean;
}

export interface Checkpoint {
  entries: number;
  tail_hash: string;
}

export interface VerifyOptions {
  /** bound on the journal's bytes (default limits.journalBytes) */
  maxBytes?: number;
  /** the run the journal must belong to; default: the first line's run_id */
  runId?: string;
  /** a checkpoint or receipt: the journal must hold at least this many entries, ending there in this hash */
  expect?: Checkpoint;
  limits?: Partial<Pick<Limits, "journalEntryBytes" | "noteBytes">>;
}

const NEWLINE = 0x0a;
const utf8 = new TextDecoder("utf-8", { fatal: true });

/** key_id → KeyObject, refusing records whose key_id is not the one their key derives. */
function trustedKeys(keys: readonly PublicKeyRecord[]): Map<string, KeyObject> {
  const map = new Map<string, KeyObject>();
  for (const record of keys) {
    const id = keyIdOf(parsePublicKey(record.public_key));
    if (record.key_id !== id) {
      throw new ValidationError("invalid-public-key", `key_id ${record.key_id} does not match its public key (${id})`);
    }
    map.set(id, publicKeyObject(record.public_key));
  }
  return map;
}

function checkCheckpoint(expect: Checkpoint): void {
  if (!Number.isSafeInteger(expect.entries) || expect.entries < 0 || !isHex64(expect.tail_hash)) {
    throw new ValidationError("invalid-checkpoint", "a checkpoint is {entries: integer >= 0, tail_hash: 64 lowercase hex}");
  }
}

/**
 * Byte length of the event inside a canonical entry: the event comes first and the fixed-format
 * fields after it start at the last `,"key_id":"` (validateEntry checks those fields before it
 * uses this length, so nothing of the event can sit after that mark).
 */
function canonicalEventBytes(canonical: string): number | undefined {
  const end = canonical.lastIndexOf(',"key_id":"');
  return canonical.startsWith('{"event":') && end > 9 ? Buffer.byteLength(canonical.slice(9, end)) : undefined;
}

class LineFault {
  constructor(readonly code: VerifyErrorCode | string, readonly reason: string) {}
}

export function verifyJournal(bytes: Uint8Array, keys: readonly PublicKeyRecord[], options: VerifyOptions = {}): VerifyReport {
  const entryLimit = options.limits?.journalEntryBytes ?? DEFAULT_LIMITS.journalEntryBytes;
  const noteLimits = { noteBytes: options.limits?.noteBytes ?? DEFAULT_LIMITS.noteBytes };
  const maxBytes = options.maxBytes ?? DEFAULT_LIMITS.journalBytes;
  const expect = options.expect;
  if (expect !== undefined) checkCheckpoint(expect);
  const trusted = trustedKeys(keys);
  const buf = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);

  const lifecycle = new RunLifecycle();
  const policyRule = new PolicyRule();
  const valid: JournalEntry[] = [];
  let runId = options.runId;
  let prev = ZERO_HASH;
  let offset = 0;

  const report = (error?: VerifyError, incompleteTail = false): VerifyReport => ({
    ok: error === undefined,
    entries: valid.length,
    ...(error !== undefined ? { first_error: error } : {}),
    tail_hash: prev,
    valid,
    incomplete_tail: incompleteTail,
  });
  const errorAt = (code: string, reason: string): VerifyError => ({ seq: valid.length, line: valid.length + 1, code, reason });

  /** Parses and checks one complete line (without its newline); returns the entry or a fault. */
  const checkLine = (body: Buffer): JournalEntry | LineFault => {
    let text: string;
    let parsed: unknown;
    try {
      text = utf8.decode(body);
      parsed = JSON.parse(text);
    } catch {
      return new LineFault("journal-bad-json", "not valid UTF-8 JSON");
    }
    if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) {
      return new LineFault("journal-bad-line", "a line is a JSON object {entry, sig}");
    }
    const line = parsed as Record<string, unknown>;
    const sig = line.sig;
    if (Object.keys(line).length !== 2 || typeof line.entry !== "object" || typeof sig !== "string") {
      return new LineFault("journal-bad-line", "a line is exactly {entry: object, sig: string}");
    }
    let canonical: string;
    try {
      canonical = canonicalJson(line.entry);
    } catch {
      return new LineFault("journal-non-canonical", "entry has no RFC 8785 form");
    }
    if (text !== lineText(canonical, sig)) {
      return new LineFault("journal-non-canonical", "line bytes differ from the canonical form of its entry");
    }
    let entry: JournalEntry;
    try {
      entry = validateEntry(line.entry, noteLimits, canonicalEventBytes(canonical));
    } catch (error) {
      if (isWardenError(error)) return new LineFault(error.code, error.message);
      throw error;
    }
    const key = trusted.get(entry.key_id);
    if (key === undefined) return new LineFault("journal-unknown-key", `signed by unknown key ${entry.key_id}`);
    const signature = decodeBase64Strict(sig, ED25519_SIGNATURE_BYTES);
    if (signature === undefined || !verifyWithKeyObject(key, signingMessage(canonical), signature)) {
      return new LineFault("journal-bad-signature", `signature does not verify with key ${entry.key_id}`);
    }
    return entry;
  };

  while (offset < buf.byteLength) {
    const newline = buf.indexOf(NEWLINE, offset);
    const end = newline === -1 ? buf.byteLength : newline + 1;
    if (end > maxBytes) {
      return report(errorAt("journal-too-large", `journal exceeds the limit of ${maxBytes} bytes`));
    }
    if (end - offset > entryLimit) {
      return report(errorAt("journal-entry-too-large", `line is ${end - offset} bytes, over the limit of ${entryLimit}`));
    }
    if (newline === -1) {
      if (expect !== undefined && valid.length < expect.entries) {
        return report(errorAt("journal-truncated", `journal ends in a partial line before checkpoint entry ${expect.entries}`), true);
      }
      return report(errorAt("journal-incomplete-line", "last line has no newline (partial write)"), true);
    }
    const checked = checkLine(buf.subarray(offset, newline));
    if (checked instanceof LineFault) return report(errorAt(checked.code, checked.reason));
    const entry = checked;
    if (runId === undefined) runId = entry.run_id;
    if (entry.run_id !== runId) return report(errorAt("journal-wrong-run-id", `run_id ${entry.run_id}, expected ${runId}`));
    if (entry.seq !== valid.length) return report(errorAt("journal-wrong-seq", `seq ${entry.seq}, expected ${valid.length}`));
    if (entry.prev !== prev) return report(errorAt("journal-wrong-prev", "prev is not the hash of the previous line"));
    const violation = lifecycle.check(entry.event);
    if (violation !== undefined) return report(errorAt(violation.code, violation.reason));
    lifecycle.apply(entry.event, entry.seq);
    const ungoverned = policyRule.next(entry.event);
    if (ungoverned !== undefined) return report(errorAt(ungoverned.code, ungoverned.reason));

    const hash = sha256Hex(buf.subarray(offset, end));
    if (expect !== undefined && valid.length + 1 === expect.entries && hash !== expect.tail_hash) {
      return report(errorAt("journal-checkpoint-mismatch", `entry ${entry.seq} does not hash to the checkpoint's tail_hash`));
    }
    valid.push(entry);
    prev = hash;
    offset = end;
  }
  if (expect !== undefined) {
    if (valid.length < expect.entries) {
      return report(errorAt("journal-truncated", `journal has ${valid.length} entries, the checkpoint ${expect.entries}`));
    }
    if (expect.entries === 0 && expect.tail_hash !== ZERO_HASH) {
      return report({ seq: null, line: 1, code: "journal-checkpoint-mismatch", reason: "a checkpoint at 0 entries has the zero hash" });
    }
  }
  return report();
}
