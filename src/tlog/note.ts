/**
 * C2SP signed-note (c2sp.org/signed-note@v1.0.0): text ending in a newline, a blank line, then
 * signature lines `— <name> base64(keyid[4] || signature)`. Key ids and verifier keys ("vkeys")
 * as the spec recommends: SHA-256(name || 0x0A || type || public key)[:4]. Two signature types
 * are used: 0x01 (Ed25519 over the note text: the log's checkpoints) and 0x04 (tlog-cosignature
 * cosignature/v1: witnesses), see cosignature.ts.
 */
import { createHash } from "node:crypto";
import { decodeBase64Strict } from "../core/base64.js";
import { ED25519_PUBLIC_KEY_BYTES, verifyEd25519 } from "../core/ed25519.js";
import type { SigningKey } from "../journal/types.js";
import { malformed, unverifiedNote } from "./errors.js";

export const SIG_ED25519 = 0x01;
export const SIG_COSIGNATURE_V1 = 0x04;
const EM_DASH = "\u2014";
/** The spec asks verifiers to accept at least 16; more is refused as a size bound. */
export const MAX_NOTE_SIGNATURES = 64;
export const MAX_NOTE_BYTES = 64 * 1024;

export interface NoteSignature {
  readonly name: string;
  /** the uint32 key id, big-endian */
  readonly keyId: number;
  /** the signature bytes after the key id */
  readonly signature: Buffer;
}

export interface Note {
  /** the text, including its final newline */
  readonly text: string;
  readonly signatures: readonly NoteSignature[];
}

/** A key a verifier trusts: its name, id and how to check one of its signatures over a note text. */
export interface NoteVerifier {
  readonly name: string;
  readonly keyId: number;
  readonly type: number;
  /** standard base64 of the raw 32-byte Ed25519 public key */
  readonly publicKey: string;
  verify(text: string, signature: Buffer): boolean;
}

export interface NoteSigner {
  readonly name: string;
  readonly keyId: number;
  sign(text: string): Buffer;
}

export function noteKeyId(name: string, type: number, publicKey: Uint8Array): number {
  const digest = createHash("sha256").update(name, "utf8").update(Buffer.from([0x0a, type])).update(publicKey).digest();
  return digest.readUInt32BE(0);
}

/** Key names are non-empty and contain no Unicode space and no `+`. */
export function isKeyName(name: string): boolean {
  return name.length > 0 && !/[\s+\p{Zs}]/u.test(name) && !/[\u0000-\u001f\u007f]/.test(name);
}

function checkKeyName(name: string): string {
  if (!isKeyName(name)) throw malformed("note-key-name-invalid", `a note key name is non-empty and has no spaces and no "+": ${JSON.stringify(name)}`);
  return name;
}

/** `<name>+<hex key id>+base64(type || public key)`. */
export function formatVkey(name: string, type: number, publicKeyBase64: string): string {
  const raw = Buffer.from(publicKeyBase64, "base64");
  const id = noteKeyId(checkKeyName(name), type, raw);
  return `${name}+${id.toString(16).padStart(8, "0")}+${Buffer.concat([Buffer.from([type]), raw]).toString("base64")}`;
}

/** The Ed25519 (type 0x01) signer for a node key under `name`. */
export function ed25519NoteSigner(name: string, key: Pick<SigningKey, "public_key" | "sign">): NoteSigner {
  const keyId = noteKeyId(checkKeyName(name), SIG_ED25519, Buffer.from(key.public_key, "base64"));
  return { name, keyId, sign: (text) => Buffer.from(key.sign(Buffer.from(text, "utf8"))) };
}

export function ed25519NoteVerifier(name: string, publicKeyBase64: string): NoteVerifier {
  const raw = decodeBase64Strict(publicKeyBase64, ED25519_PUBLIC_KEY_BYTES);
  if (raw === undefined) throw malformed("note-vkey-invalid", "an Ed25519 public key is standard base64 of 32 bytes");
  return {
    name: checkKeyName(name),
    keyId: noteKeyId(name, SIG_ED25519, raw),
    type: SIG_ED25519,
    publicKey: publicKeyBase64,
    verify: (text, signature) => verifyEd25519(publicKeyBase64, Buffer.from(text, "utf8"), signature),
  };
}

/** Parses a vkey of a type `verifierFor` knows (0x01 here; cosignature.ts adds 0x04). */
export function parseVkey(vkey: string, verifierFor: (name: string, type: number, publicKey: string) => NoteVerifier | undefined = defaultVerifierFor): NoteVerifier {
  // The name has no "+", the id is 8 hex digits; the base64 key may contain "+".
  const match = /^([^+]+)\+([^+]*)\+(.*)$/s.exec(vkey.trim());
  if (match === null) throw malformed("note-vkey-invalid", "a verifier key is <name>+<hex id>+<base64 key>");
  const [, name, idHex, keyText] = match as unknown as [string, string, string, string];
  const material = decodeBase64Strict(keyText);
  if (!isKeyName(name) || !/^[0-9a-f]{8}$/.test(idHex) || material === undefined || material.byteLength !== 1 + ED25519_PUBLIC_KEY_BYTES) {
    throw malformed("note-vkey-invalid", "a verifier key is <name>+<8 hex digits>+base64(type || 32-byte Ed25519 key)");
  }
  const type = material[0]!;
  const verifier = verifierFor(name, type, material.subarray(1).toString("base64"));
  if (verifier === undefined) throw malformed("note-vkey-invalid", `signature type 0x${type.toString(16).padStart(2, "0")} is not supported`);
  if (verifier.keyId !== Number.parseInt(idHex, 16)) throw malformed("note-vkey-invalid", "the verifier key's id does not match its name and key");
  return verifier;
}

function defaultVerifierFor(name: string, type: number, publicKey: string): NoteVerifier | undefined {
  return type === SIG_ED25519 ? ed25519NoteVerifier(name, publicKey) : undefined;
}

export function signatureLine(name: string, keyId: number, signature: Uint8Array): string {
  const id = Buffer.alloc(4);
  id.writeUInt32BE(keyId >>> 0);
  return `${EM_DASH} ${name} ${Buffer.concat([id, signature]).toString("base64")}\n`;
}

export function signNote(text: string, signers: readonly NoteSigner[]): string {
  checkText(text);
  return `${text}\n${signers.map((s) => signatureLine(s.name, s.keyId, s.sign(text))).join("")}`;
}

function checkText(text: string): void {
  if (!text.endsWith("\n")) throw malformed("note-malformed", "a note's text ends with a newline");
  if (/[\u0000-\u0009\u000b-\u001f]/.test(text)) throw malformed("note-malformed", "a note contains no control characters other than newline");
}

/** Parses one signature line (without its newline). */
export function parseSignatureLine(line: string): NoteSignature {
  const match = /^\u2014 (\S+) (\S+)$/u.exec(line);
  const bytes = match === null ? undefined : decodeBase64Strict(match[2]!);
  if (match === null || bytes === undefined || bytes.byteLength < 5 || !isKeyName(match[1]!)) {
    throw malformed("note-malformed", "a signature line is \"\u2014 <name> base64(key id || signature)\"");
  }
  return { name: match[1]!, keyId: bytes.readUInt32BE(0), signature: bytes.subarray(4) };
}

export function parseNote(input: string | Uint8Array): Note {
  const bytes = typeof input === "string" ? Buffer.from(input, "utf8") : Buffer.from(input);
  if (bytes.byteLength > MAX_NOTE_BYTES) throw malformed("note-malformed", `a note has at most ${MAX_NOTE_BYTES} bytes`);
  let note: string;
  try {
    note = new TextDecoder("utf-8", { fatal: true }).decode(bytes);
  } catch {
    throw malformed("note-malformed", "a note is valid UTF-8");
  }
  if (/[\u0000-\u0009\u000b-\u001f]/.test(note)) throw malformed("note-malformed", "a note contains no control characters other than newline");
  const split = note.lastIndexOf("\n\n");
  if (split < 0 || !note.endsWith("\n")) throw malformed("note-malformed", "a note is text, a blank line, and signature lines");
  const text = note.slice(0, split + 1);
  const lines = note.slice(split + 2, -1).split("\n");
  if (lines.length > MAX_NOTE_SIGNATURES) throw malformed("note-malformed", `a note has at most ${MAX_NOTE_SIGNATURES} signatures`);
  return { text, signatures: lines.map(parseSignatureLine) };
}

export function formatNote(note: Note): string {
  return `${note.text}\n${note.signatures.map((s) => signatureLine(s.name, s.keyId, s.signature)).join("")}`;
}

/**
 * Verifies `note` with `verifiers` (signed-note §Signatures): signatures of unknown keys are
 * ignored; one from a known key that fails rejects the note; at least one must verify. Returns the
 * verifiers whose signatures verified.
 */
export function openNote(note: Note, verifiers: readonly NoteVerifier[]): NoteVerifier[] {
  const verified: NoteVerifier[] = [];
  for (const sig of note.signatures) {
    const verifier = verifiers.find((v) => v.name === sig.name && v.keyId === sig.keyId);
    if (verifier === undefined) continue;
    if (!verifier.verify(note.text, sig.signature)) throw unverifiedNote(`the signature of ${sig.name} on the note does not verify`);
    if (!verified.includes(verifier)) verified.push(verifier);
  }
  if (verified.length === 0) throw unverifiedNote("the note carries no signature of a trusted key");
  return verified;
}
