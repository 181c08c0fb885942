/**
 * DSSE (Dead Simple Signing Envelope, secure-systems-lab/dsse v1.0) with the node's Ed25519 key:
 * the signature is over PAE(payloadType, payload), never over the JSON around it, so a verifier
 * needs no canonical form of the envelope. DESIGN.md "Attestations" gives the bytes.
 */
import { canonicalJson } from "../core/canonical.js";
import { ValidationError } from "../core/errors.js";
import { decodeBase64Strict } from "../core/base64.js";
import { verifyEd25519 } from "../core/ed25519.js";
import type { PublicKeyRecord, SigningKey } from "../journal/types.js";

/** The payload type of an in-toto Statement in DSSE (in-toto Attestation Framework, envelope layer). */
export const IN_TOTO_PAYLOAD_TYPE = "application/vnd.in-toto+json";

export interface DsseSignature {
  /** the warden key id of the signing key (16 lowercase hex), as `GET /v1/keys` names it */
  readonly keyid: string;
  /** standard base64 (padded) of the 64-byte Ed25519 signature of PAE(payloadType, payload) */
  readonly sig: string;
}

export interface DsseEnvelope {
  /** standard base64 (padded) of the payload bytes */
  readonly payload: string;
  readonly payloadType: string;
  readonly signatures: readonly DsseSignature[];
}

/**
 * Pre-Authentication Encoding: `"DSSEv1" SP LEN(type) SP type SP LEN(body) SP body`, LEN the
 * byte length in ASCII decimal without leading zeros. Binding the type stops a signature over one
 * kind of payload from being read as another.
 */
export function pae(payloadType: string, payload: Uint8Array): Buffer {
  const type = Buffer.from(payloadType, "utf8");
  return Buffer.concat([Buffer.from(`DSSEv1 ${type.byteLength} `, "ascii"), type, Buffer.from(` ${payload.byteLength} `, "ascii"), payload]);
}

/** An envelope of `payload` signed by `key` (one signature). */
export function signEnvelope(payloadType: string, payload: Uint8Array, key: SigningKey): DsseEnvelope {
  const sig = Buffer.from(key.sign(pae(payloadType, payload))).toString("base64");
  return { payload: Buffer.from(payload).toString("base64"), payloadType, signatures: [{ keyid: key.key_id, sig }] };
}

/** The envelope's bytes as warden serves and prints them: its RFC 8785 serialization. */
export function envelopeJson(envelope: DsseEnvelope): string {
  return canonicalJson(envelope);
}

export interface VerifiedEnvelope {
  readonly payloadType: string;
  readonly payload: Buffer;
  /** the key whose signature verified */
  readonly key_id: string;
}

const MAX_SIGNATURES = 16;

/**
 * Checks an envelope against trusted keys: well formed, and at least one signature by a trusted
 * key verifies over PAE. Signatures by keys not trusted are skipped (DSSE allows several signers);
 * one by a trusted key that does not verify fails the envelope, as does one that names no key.
 */
export function verifyEnvelope(envelope: unknown, keys: readonly PublicKeyRecord[], expectedType = IN_TOTO_PAYLOAD_TYPE): VerifiedEnvelope {
  const e = parseEnvelope(envelope);
  if (e.payloadType !== expectedType) {
    throw new ValidationError("attestation-payload-type", `the envelope's payloadType is ${JSON.stringify(e.payloadType)}, not ${expectedType}`, { status: 422 });
  }
  const payload = decodeBase64Strict(e.payload);
  if (payload === undefined) throw malformed("payload is not standard padded base64");
  const message = pae(e.payloadType, payload);
  let verifiedBy: string | undefined;
  for (const s of e.signatures) {
    const key = keys.find((k) => k.key_id === s.keyid);
    if (key === undefined) continue;
    const sig = decodeBase64Strict(s.sig);
    if (sig === undefined || !verifyEd25519(key.public_key, message, sig)) {
      throw new ValidationError("attestation-signature-invalid", `the signature by key ${s.keyid} does not verify over the envelope's payload`, { status: 422, details: { key_id: s.keyid } });
    }
    verifiedBy ??= s.keyid;
  }
  if (verifiedBy === undefined) {
    throw new ValidationError("attestation-unknown-key", `no signature of the envelope is by a trusted key (signed by ${e.signatures.map((s) => s.keyid).join(", ") || "nobody"})`, { status: 422 });
  }
  return { payloadType: e.payloadType, payload, key_id: verifiedBy };
}

function parseEnvelope(value: unknown): DsseEnvelope {
  if (typeof value !== "object" || value === null || Array.isArray(value)) throw malformed("an envelope is a JSON object");
  const o = value as Record<string, unknown>;
  for (const k of Object.keys(o)) if (k !== "payload" && k !== "payloadType" && k !== "signatures") throw malformed(`unknown member ${JSON.stringify(k)}`);
  if (typeof o.payload !== "string" || typeof o.payloadType !== "string") throw malformed("payload and payloadType are strings");
  if (!Array.isArray(o.signatures) || o.signatures.length === 0 || o.signatures.length > MAX_SIGNATURES) throw malformed(`signatures is a list of 1–${MAX_SIGNATURES}`);
  const signatures = o.signatures.map((s: unknown): DsseSignature => {
    if (typeof s !== "object" || s === null || Array.isArray(s)) throw malformed("a signature is an object {keyid, sig}");
    const { keyid, sig, ...rest } = s as Record<string, unknown>;
    if (typeof keyid !== "string" || typeof sig !== "string" || Object.keys(rest).length > 0) throw malformed("a signature is exactly {keyid, sig}, both strings");
    return { keyid, sig };
  });
  return { payload: o.payload, payloadType: o.payloadType, signatures };
}

function malformed(why: string): ValidationError {
  return new ValidationError("attestation-malformed", `not a DSSE envelope: ${why}`);
}
