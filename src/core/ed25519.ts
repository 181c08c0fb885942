/**
 * Ed25519 primitives shared by the journal, the transparency log and the witness: key ids, strict
 * public-key and signature sizes, verification through node:crypto. KeyObjects are cached because
 * building one from DER costs about as much as a verification.
 */
import { createHash, createPublicKey, verify, type KeyObject } from "node:crypto";
import { decodeBase64Strict } from "./base64.js";
import { ValidationError } from "./errors.js";

export const ED25519_PUBLIC_KEY_BYTES = 32;
export const ED25519_SIGNATURE_BYTES = 64;
/** DER header of an Ed25519 SubjectPublicKeyInfo; the raw key is the 32 bytes after it. */
const SPKI_ED25519_PREFIX = Buffer.from("302a300506032b6570032100", "hex");
const KEY_ID_RE = /^[0-9a-f]{16}$/;

export function isKeyId(value: unknown): value is string {
  return typeof value === "string" && KEY_ID_RE.test(value);
}

/** First 8 bytes of sha256 of the raw 32-byte public key, as 16 lowercase hex characters. */
export function keyIdOf(rawPublicKey: Uint8Array): string {
  if (rawPublicKey.byteLength !== ED25519_PUBLIC_KEY_BYTES) {
    throw new ValidationError("invalid-public-key", `an Ed25519 public key has 32 bytes, not ${rawPublicKey.byteLength}`);
  }
  return createHash("sha256").update(rawPublicKey).digest("hex").slice(0, 16);
}

/** The raw 32 bytes of a public key given as standard base64, or a ValidationError. */
export function parsePublicKey(publicKeyBase64: string): Buffer {
  const raw = decodeBase64Strict(publicKeyBase64, ED25519_PUBLIC_KEY_BYTES);
  if (raw === undefined) {
    throw new ValidationError("invalid-public-key", "a public key is standard base64 of 32 raw bytes");
  }
  return raw;
}

const PUBLIC_KEY_CACHE_LIMIT = 256;
const publicKeyCache = new Map<string, KeyObject>();

/** A cached KeyObject for a base64 public key; refuses bytes that are not an Ed25519 key. */
export function publicKeyObject(publicKeyBase64: string): KeyObject {
  const cached = publicKeyCache.get(publicKeyBase64);
  if (cached !== undefined) return cached;
  const raw = parsePublicKey(publicKeyBase64);
  let key: KeyObject;
  try {
    key = createPublicKey({ key: Buffer.concat([SPKI_ED25519_PREFIX, raw]), format: "der", type: "spki" });
  } catch (error) {
    throw new ValidationError("invalid-public-key", "not a valid Ed25519 public key", { cause: error });
  }
  if (publicKeyCache.size >= PUBLIC_KEY_CACHE_LIMIT) {
    const oldest = publicKeyCache.keys().next().value;
    if (oldest !== undefined) publicKeyCache.delete(oldest);
  }
  publicKeyCache.set(publicKeyBase64, key);
  return key;
}

/** True when `signature` is a valid Ed25519 signature of `message` by the key. */
export function verifyEd25519(publicKeyBase64: string, message: Uint8Array, signature: Uint8Array): boolean {
  if (signature.byteLength !== ED25519_SIGNATURE_BYTES) return false;
  return verify(null, message, publicKeyObject(publicKeyBase64), signature);
}

/** Same as verifyEd25519 with an already resolved KeyObject (the verifier's hot loop). */
export function verifyWithKeyObject(key: KeyObject, message: Uint8Array, signature: Uint8Array): boolean {
  if (signature.byteLength !== ED25519_SIGNATURE_BYTES) return false;
  return verify(null, message, key, signature);
}

/** The raw 32 bytes of an Ed25519 public KeyObject; refuses any other key type. */
export function rawPublicKeyOf(publicKey: KeyObject): Buffer {
  const spki = publicKey.export({ format: "der", type: "spki" });
  if (spki.byteLength !== SPKI_ED25519_PREFIX.byteLength + ED25519_PUBLIC_KEY_BYTES ||
      !spki.subarray(0, SPKI_ED25519_PREFIX.byteLength).equals(SPKI_ED25519_PREFIX)) {
    throw new ValidationError("invalid-private-key", "not an Ed25519 key");
  }
  return spki.subarray(SPKI_ED25519_PREFIX.byteLength);
}
