/**
 * C2SP tlog-cosignature (c2sp.org/tlog-cosignature) Ed25519 `cosignature/v1`: a note signature of
 * type 0x04 whose bytes are timestamp (u64 big-endian, POSIX seconds) || Ed25519 signature over
 * `cosignature/v1\ntime <timestamp>\n` + the checkpoint's note text.
 */
import { decodeBase64Strict } from "../core/base64.js";
import { ED25519_PUBLIC_KEY_BYTES, ED25519_SIGNATURE_BYTES, verifyEd25519 } from "../core/ed25519.js";
import type { SigningKey } from "../journal/types.js";
import { malformed } from "./errors.js";
import { ed25519NoteVerifier, isKeyName, noteKeyId, SIG_COSIGNATURE_V1, SIG_ED25519, signatureLine, type NoteVerifier } from "./note.js";

const TIMESTAMP_BYTES = 8;

export function cosignedMessage(text: string, timestamp: number): Buffer {
  return Buffer.from(`cosignature/v1\ntime ${timestamp}\n${text}`, "utf8");
}

/** The timestamp a cosignature carries, or undefined when the bytes are not one. */
export function cosignatureTimestamp(signature: Uint8Array): number | undefined {
  if (signature.byteLength !== TIMESTAMP_BYTES + ED25519_SIGNATURE_BYTES) return undefined;
  const t = Buffer.from(signature).readBigUInt64BE(0);
  return t > BigInt(Number.MAX_SAFE_INTEGER) ? undefined : Number(t);
}

export function cosignatureVerifier(name: string, publicKeyBase64: string): NoteVerifier {
  const raw = decodeBase64Strict(publicKeyBase64, ED25519_PUBLIC_KEY_BYTES);
  if (raw === undefined || !isKeyName(name)) throw malformed("note-vkey-invalid", "a cosigner is a key name and standard base64 of a 32-byte Ed25519 key");
  return {
    name,
    keyId: noteKeyId(name, SIG_COSIGNATURE_V1, raw),
    type: SIG_COSIGNATURE_V1,
    publicKey: publicKeyBase64,
    verify: (text, signature) => {
      const timestamp = cosignatureTimestamp(signature);
      return timestamp !== undefined && verifyEd25519(publicKeyBase64, cosignedMessage(text, timestamp), signature.subarray(TIMESTAMP_BYTES));
    },
  };
}

/** Verifiers for both types a policy or a witness names by vkey. */
export function verifierFor(name: string, type: number, publicKey: string): NoteVerifier | undefined {
  if (type === SIG_ED25519) return ed25519NoteVerifier(name, publicKey);
  if (type === SIG_COSIGNATURE_V1) return cosignatureVerifier(name, publicKey);
  return undefined;
}

/** The signature line a witness named `name` adds to a checkpoint's note text at `timestamp`. */
export function cosign(name: string, key: Pick<SigningKey, "public_key" | "sign">, text: string, timestamp: number): string {
  const keyId = noteKeyId(name, SIG_COSIGNATURE_V1, Buffer.from(key.public_key, "base64"));
  const ts = Buffer.alloc(TIMESTAMP_BYTES);
  ts.writeBigUInt64BE(BigInt(timestamp));
  return signatureLine(name, keyId, Buffer.concat([ts, key.sign(cosignedMessage(text, timestamp))]));
}
