/**
 * The journal line, byte for byte (DESIGN.md "Journal"):
 *   {"entry":<E>,"sig":"<S>"}\n
 * E is the RFC 8785 form of the entry; S is standard base64 of the Ed25519 signature over
 * "warden-journal-v1\n" + E.
 */
import { canonicalJson } from "../core/canonical.js";
import { sha256Hex } from "../core/digest.js";
import { ValidationError } from "../core/errors.js";
import { DEFAULT_LIMITS, type Limits } from "../core/limits.js";
import { canonicalEvent as canonicalEventOf, fixedShapeEnvelope } from "./canonical-entry.js";
import { validateEntry } from "./schema.js";
import { JOURNAL_SIGNING_PREFIX, type JournalEntry, type SigningKey } from "./types.js";

const LINE_HEAD = '{"entry":';
const SIG_HEAD = ',"sig":"';
const LINE_END = '"}';
const SIGNING_PREFIX = Buffer.from(JOURNAL_SIGNING_PREFIX, "utf8");

/**
 * The bytes an entry's signature covers, in one allocation; `bodyBytes`, the entry's UTF-8 length,
 * when the caller knows it already.
 */
export function signingMessage(canonicalEntry: string, bodyBytes = Buffer.byteLength(canonicalEntry)): Buffer {
  const message = Buffer.allocUnsafe(SIGNING_PREFIX.byteLength + bodyBytes);
  SIGNING_PREFIX.copy(message, 0);
  const written = message.write(canonicalEntry, SIGNING_PREFIX.byteLength, "utf8");
  if (written !== bodyBytes) throw new RangeError(`signing message: entry is ${written} bytes of UTF-8, not ${bodyBytes}`);
  return message;
}

/** The line's text without its newline: what a canonical line must equal. */
export function lineText(canonicalEntry: string, signatureBase64: string): string {
  return LINE_HEAD + canonicalEntry + SIG_HEAD + signatureBase64 + LINE_END;
}

/**
 * RFC 8785 form of an entry. "event" sorts before every other entry field, so the canonical entry
 * is `{"event":` + the canonical event + the canonical rest without its opening brace; a caller
 * that already serialized the event (to bound a note) passes it instead of paying for it twice.
 */
export function canonicalEntry(entry: JournalEntry, canonicalEvent?: string): string {
  const event = canonicalEvent ?? canonicalEventOf(entry.event);
  const envelope = fixedShapeEnvelope(entry);
  if (envelope !== undefined) return `{"event":${event}${envelope}`;
  const { event: _event, ...rest } = entry;
  return `{"event":${event},${canonicalJson(rest).slice(1)}`;
}

/**
 * Signs an entry that has already passed validateEntry (the writer validates once, before its
 * order checks) and returns the exact line including "\n".
 */
export function encodeValidatedLine(entry: JournalEntry, key: SigningKey, canonicalEvent?: string): Buffer {
  if (entry.key_id !== key.key_id) {
    throw new ValidationError("journal-key-mismatch", `entry names key ${entry.key_id} but is signed by ${key.key_id}`);
  }
  const canonical = canonicalEntry(entry, canonicalEvent);
  return signedLine(canonical, key.sign(signingMessage(canonical)));
}

/** The exact line of an entry's canonical form and its signature, including "\n". */
export function signedLine(canonical: string, signature: Uint8Array): Buffer {
  return Buffer.from(lineText(canonical, Buffer.from(signature.buffer, signature.byteOffset, signature.byteLength).toString("base64")) + "\n", "utf8");
}

/** Bytes of a line beside its canonical entry: head, signature field (88 base64 chars), end, newline. */
export const LINE_OVERHEAD_BYTES = LINE_HEAD.length + SIG_HEAD.length + 88 + LINE_END.length + 1;

/** The exact DESIGN line of `entry` signed by `key`, including its newline. */
export function encodeLine(entry: JournalEntry, key: SigningKey, limits: Pick<Limits, "noteBytes"> = DEFAULT_LIMITS): Buffer {
  return encodeValidatedLine(validateEntry(entry, limits), key);
}

/** Lowercase hex sha256 of a line's bytes including its newline: the next entry's `prev`. */
export function lineHash(line: Uint8Array): string {
  return sha256Hex(line);
}
