/**
 * Ed25519 signing keys of the journal (DESIGN.md "Keys"): generating and loading private keys and
 * the record a verifier trusts. The primitives (key ids, encodings, verification) live in core/ and
 * are re-exported here for the journal's public surface.
 */
import { createPrivateKey, createPublicKey, generateKeyPairSync, sign, type KeyObject } from "node:crypto";
import { decodeBase64Strict } from "../core/base64.js";
import {
  ED25519_PUBLIC_KEY_BYTES,
  ED25519_SIGNATURE_BYTES,
  isKeyId,
  keyIdOf,
  parsePublicKey,
  publicKeyObject,
  rawPublicKeyOf,
  verifyEd25519,
  verifyWithKeyObject,
} from "../core/ed25519.js";
import { ValidationError } from "../core/errors.js";
import { sharedSigner } from "./signer.js";
import type { PublicKeyRecord, SigningKey } from "./types.js";

export {
  decodeBase64Strict,
  ED25519_PUBLIC_KEY_BYTES,
  ED25519_SIGNATURE_BYTES,
  isKeyId,
  keyIdOf,
  parsePublicKey,
  publicKeyObject,
  verifyEd25519,
  verifyWithKeyObject,
};

/** The record a verifier trusts, with `key_id` derived from the key itself. */
export function publicKeyRecord(publicKeyBase64: string): PublicKeyRecord {
  return { key_id: keyIdOf(parsePublicKey(publicKeyBase64)), public_key: publicKeyBase64 };
}

function signingKeyOf(privateKey: KeyObject): SigningKey {
  if (privateKey.asymmetricKeyType !== "ed25519") {
    throw new ValidationError("invalid-private-key", `expected an Ed25519 key, got ${privateKey.asymmetricKeyType ?? "none"}`);
  }
  const raw = rawPublicKeyOf(createPublicKey(privateKey));
  return Object.freeze({
    key_id: keyIdOf(raw),
    public_key: raw.toString("base64"),
    sign: (message: Uint8Array): Uint8Array => sign(null, message, privateKey),
    signAsync: (message: Uint8Array): Promise<Uint8Array> => sharedSigner().sign(privateKey, message),
  });
}

export function generateSigningKey(): { key: SigningKey; privatePkcs8: Uint8Array } {
  const { privateKey } = generateKeyPairSync("ed25519");
  const privatePkcs8 = privateKey.export({ format: "der", type: "pkcs8" });
  return { key: signingKeyOf(privateKey), privatePkcs8 };
}

export function signingKeyFromPkcs8(pkcs8: Uint8Array): SigningKey {
  let privateKey: KeyObject;
  try {
    privateKey = createPrivateKey({ key: Buffer.from(pkcs8), format: "der", type: "pkcs8" });
  } catch (error) {
    throw new ValidationError("invalid-private-key", "not a PKCS#8 private key", { cause: error });
  }
  return signingKeyOf(privateKey);
}
