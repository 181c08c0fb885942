/**
 * SSH public keys and certificates as OpenSSH encodes them (RFC 4253 §6.6, RFC 5656, RFC 8709,
 * PROTOCOL.certkeys, PROTOCOL.u2f), parsed from untrusted bytes, and the verification of an SSH
 * signature by such a key with Node's crypto. Supported: ssh-ed25519, ecdsa-sha2-nistp256/384/521,
 * ssh-rsa (signatures rsa-sha2-256/512 only, never SHA-1), sk-ssh-ed25519@openssh.com,
 * sk-ecdsa-sha2-nistp256@openssh.com, and the -cert-v01@openssh.com certificate of each.
 */
import { createHash, createPublicKey, verify as cryptoVerify, type KeyObject } from "node:crypto";
import { SshReader, SshWireError } from "./ssh-wire.js";

export const PLAIN_KEY_TYPES = [
  "ssh-ed25519",
  "ecdsa-sha2-nistp256",
  "ecdsa-sha2-nistp384",
  "ecdsa-sha2-nistp521",
  "ssh-rsa",
  "sk-ssh-ed25519@openssh.com",
  "sk-ecdsa-sha2-nistp256@openssh.com",
] as const;
export type PlainKeyType = (typeof PLAIN_KEY_TYPES)[number];

/** Smallest RSA modulus accepted, in bits (OpenSSH's own floor). */
const RSA_MIN_BITS = 1024;
const RSA_MAX_BITS = 16384;
/** U2F/FIDO flag: the user touched the key for this signature. */
export const SK_USER_PRESENT = 0x01;
export const SK_USER_VERIFIED = 0x04;

const CURVES: Readonly<Record<string, { name: string; jwk: string; size: number; hash: string }>> = {
  "ecdsa-sha2-nistp256": { name: "nistp256", jwk: "P-256", size: 32, hash: "sha256" },
  "ecdsa-sha2-nistp384": { name: "nistp384", jwk: "P-384", size: 48, hash: "sha384" },
  "ecdsa-sha2-nistp521": { name: "nistp521", jwk: "P-521", size: 66, hash: "sha512" },
  "sk-ecdsa-sha2-nistp256@openssh.com": { name: "nistp256", jwk: "P-256", size: 32, hash: "sha256" },
};

export function isPlainKeyType(type: string): type is PlainKeyType {
  return (PLAIN_KEY_TYPES as readonly string[]).includes(type);
}

/** `ssh-ed25519` → `ssh-ed25519-cert-v01@openssh.com`, `sk-ssh-ed25519@openssh.com` → `sk-ssh-ed25519-cert-v01@openssh.com`. */
export function certTypeOf(plain: PlainKeyType): string {
  return `${plain.replace(/@openssh\.com$/, "")}-cert-v01@openssh.com`;
}
const PLAIN_OF_CERT = new Map<string, PlainKeyType>(PLAIN_KEY_TYPES.map((t) => [certTypeOf(t), t]));

export interface SshCertificate {
  readonly serial: bigint;
  /** 1 user, 2 host */
  readonly certType: number;
  readonly keyId: string;
  readonly principals: readonly string[];
  /** seconds since the epoch; valid_before 2^64-1 means forever */
  readonly validAfter: bigint;
  readonly validBefore: bigint;
  readonly criticalOptions: readonly string[];
  /** the CA's plain key */
  readonly signatureKey: PlainKey;
}

export interface SkSignatureDetails {
  readonly flags: number;
  readonly counter: number;
}

/** A plain (not certificate) public key. */
export interface PlainKey {
  readonly type: PlainKeyType;
  /** its wire encoding */
  readonly blob: Uint8Array;
  /** `SHA256:` + unpadded base64 of sha256(blob), as `ssh-keygen -l` prints it */
  readonly fingerprint: string;
  /** the FIDO application of an sk key */
  readonly application?: string;
}

export interface SshPublicKey {
  /** the type on the wire (a certificate type for a certificate) */
  readonly type: string;
  readonly blob: Uint8Array;
  /** the key itself (a certificate's subject key) */
  readonly key: PlainKey;
  readonly cert?: SshCertificate;
  /** the bytes a certificate's CA signature covers, and that signature */
  readonly certSigned?: { readonly data: Uint8Array; readonly signature: Uint8Array };
}

export class SshKeyError extends Error {
  override readonly name = "SshKeyError";
  /** `unknown-type` for a key type warden does not support (its own code upstream) */
  readonly kind: "malformed" | "unknown-type";
  constructor(message: string, kind: "malformed" | "unknown-type" = "malformed") {
    super(message);
    this.kind = kind;
  }
}

export function fingerprintOf(plainBlob: Uint8Array): string {
  return `SHA256:${createHash("sha256").update(plainBlob).digest("base64").replace(/=+$/, "")}`;
}

/** Parses a public key or certificate blob; any malformation is an SshKeyError. */
export function parsePublicKey(blob: Uint8Array): SshPublicKey {
  try {
    const r = new SshReader(blob);
    const type = r.ascii("key type");
    if (isPlainKeyType(type)) {
      const fieldsStart = r.offset;
      const application = readKeyFields(r, type);
      r.end("the public key");
      return { type, blob, key: plainKey(type, blob, blob.subarray(fieldsStart), application) };
    }
    const plain = PLAIN_OF_CERT.get(type);
    if (plain === undefined) throw new SshKeyError(`key type ${JSON.stringify(type)} is not supported`, "unknown-type");
    r.string("certificate nonce");
    const fieldsStart = r.offset;
    const application = readKeyFields(r, plain);
    const fields = blob.subarray(fieldsStart, r.offset);
    const serial = r.uint64("certificate serial");
    const certType = r.uint32("certificate type");
    const keyId = r.utf8("certificate key id");
    const principals = readStringList(r.string("certificate principals"), "principal");
    const validAfter = r.uint64("certificate valid_after");
    const validBefore = r.uint64("certificate valid_before");
    const criticalOptions = readOptionNames(r.string("certificate critical options"));
    r.string("certificate extensions");
    r.string("certificate reserved");
    const signatureKeyBlob = r.string("certificate signature key");
    const signedEnd = r.offset;
    const signature = r.string("certificate signature");
    r.end("the certificate");
    const ca = parsePublicKey(signatureKeyBlob);
    if (ca.cert !== undefined) throw new SshKeyError("a certificate's CA key is itself a certificate");
    const plainBlob = Buffer.concat([lengthPrefixed(Buffer.from(plain, "latin1")), fields]);
    return {
      type,
      blob,
      key: plainKey(plain, plainBlob, fields, application),
      cert: { serial, certType, keyId, principals, validAfter, validBefore, criticalOptions, signatureKey: ca.key },
      certSigned: { data: blob.subarray(0, signedEnd), signature },
    };
  } catch (error) {
    if (error instanceof SshWireError) throw new SshKeyError(error.message);
    throw error;
  }
}

function lengthPrefixed(bytes: Uint8Array): Buffer {
  const b = Buffer.alloc(4 + bytes.byteLength);
  b.writeUInt32BE(bytes.byteLength);
  b.set(bytes, 4);
  return b;
}

/** Reads (and checks the shape of) a key's fields after its type; answers an sk key's application. */
function readKeyFields(r: SshReader, type: PlainKeyType): string | undefined {
  switch (type) {
    case "ssh-ed25519":
    case "sk-ssh-ed25519@openssh.com": {
      if (r.string("ed25519 public key").byteLength !== 32) throw new SshKeyError("an ed25519 public key is 32 bytes");
      return type === "sk-ssh-ed25519@openssh.com" ? r.utf8("sk application") : undefined;
    }
    case "ssh-rsa": {
      const e = r.mpint("rsa exponent");
      const n = r.mpint("rsa modulus");
      const bits = bitLength(n);
      if (bits < RSA_MIN_BITS || bits > RSA_MAX_BITS) throw new SshKeyError(`an RSA modulus of ${bits} bits is outside ${RSA_MIN_BITS}–${RSA_MAX_BITS}`);
      if (e.byteLength === 0 || e.byteLength > 8 || (e[e.byteLength - 1]! & 1) === 0) throw new SshKeyError("the RSA exponent is not a small odd number");
      return undefined;
    }
    default: {
      const curve = CURVES[type]!;
      if (r.ascii("ecdsa curve") !== curve.name) throw new SshKeyError(`the curve of ${type} is not ${curve.name}`);
      const q = r.string("ecdsa point");
      if (q.byteLength !== 1 + 2 * curve.size || q[0] !== 4) throw new SshKeyError("the ECDSA point is not an uncompressed point of its curve");
      return type === "sk-ecdsa-sha2-nistp256@openssh.com" ? r.utf8("sk application") : undefined;
    }
  }
}

function bitLength(magnitude: Uint8Array): number {
  if (magnitude.byteLength === 0) return 0;
  return (magnitude.byteLength - 1) * 8 + (32 - Math.clz32(magnitude[0]!));
}

function readStringList(bytes: Uint8Array, what: string): string[] {
  const r = new SshReader(bytes);
  const out: string[] = [];
  while (!r.done) out.push(r.utf8(what));
  return out;
}

/** Names of a certificate's critical options (name, data pairs). */
function readOptionNames(bytes: Uint8Array): string[] {
  const r = new SshReader(bytes);
  const out: string[] = [];
  while (!r.done) {
    out.push(r.ascii("critical option name"));
    r.string("critical option data");
  }
  return out;
}

function plainKey(type: PlainKeyType, blob: Uint8Array, _fields: Uint8Array, application: string | undefined): PlainKey {
  return { type, blob, fingerprint: fingerprintOf(blob), ...(application === undefined ? {} : { application }) };
}

/** Node KeyObjects of plain keys, by blob (a key verifies many signatures). */
const keyObjects = new Map<string, KeyObject>();
const KEY_OBJECT_CACHE = 4096;

function keyObjectOf(key: PlainKey): KeyObject {
  const id = Buffer.from(key.blob).toString("base64");
  const cached = keyObjects.get(id);
  if (cached !== undefined) return cached;
  const r = new SshReader(key.blob);
  r.ascii("key type");
  let jwk: Record<string, string>;
  if (key.type === "ssh-ed25519" || key.type === "sk-ssh-ed25519@openssh.com") {
    jwk = { kty: "OKP", crv: "Ed25519", x: b64url(r.string("ed25519 public key")) };
  } else if (key.type === "ssh-rsa") {
    const e = r.mpint("rsa exponent");
    jwk = { kty: "RSA", e: b64url(e), n: b64url(r.mpint("rsa modulus")) };
  } else {
    const curve = CURVES[key.type]!;
    r.ascii("ecdsa curve");
    const q = r.string("ecdsa point");
    jwk = { kty: "EC", crv: curve.jwk, x: b64url(q.subarray(1, 1 + curve.size)), y: b64url(q.subarray(1 + curve.size)) };
  }
  let object: KeyObject;
  try {
    object = createPublicKey({ key: jwk, format: "jwk" });
  } catch (error) {
    // A point off its curve, for one.
    throw new SshKeyError(`the ${key.type} key is not a valid public key: ${(error as Error).message}`);
  }
  if (keyObjects.size >= KEY_OBJECT_CACHE) keyObjects.delete(keyObjects.keys().next().value!);
  keyObjects.set(id, object);
  return object;
}

function b64url(bytes: Uint8Array): string {
  return Buffer.from(bytes).toString("base64url");
}

export class SshSignatureError extends Error {
  override readonly name = "SshSignatureError";
}

/**
 * Verifies an SSH signature (its wire encoding: string type, string blob, and for sk keys a flags
 * byte and a counter) by `key` over `data`. Throws SshSignatureError when it does not verify,
 * SshKeyError when the signature is malformed. Answers an sk signature's flags and counter.
 */
export function verifySshSignature(key: PlainKey, data: Uint8Array, signature: Uint8Array): SkSignatureDetails | undefined {
  let ok: boolean;
  let details: SkSignatureDetails | undefined;
  try {
    const r = new SshReader(signature);
    const sigType = r.ascii("signature type");
    const blob = r.string("signature blob");
    let signed: Uint8Array = data;
    if (key.type === "sk-ssh-ed25519@openssh.com" || key.type === "sk-ecdsa-sha2-nistp256@openssh.com") {
      if (sigType !== key.type) throw new SshKeyError(`a ${key.type} key cannot make a ${sigType} signature`);
      const flags = r.byte("sk flags");
      const counter = r.uint32("sk counter");
      details = { flags, counter };
      const counterBytes = Buffer.alloc(4);
      counterBytes.writeUInt32BE(counter);
      signed = Buffer.concat([sha256(Buffer.from(key.application ?? "", "utf8")), Uint8Array.of(flags), counterBytes, sha256(data)]);
    }
    r.end("the signature");
    const object = keyObjectOf(key);
    switch (key.type) {
      case "ssh-ed25519":
      case "sk-ssh-ed25519@openssh.com":
        if (key.type === "ssh-ed25519" && sigType !== "ssh-ed25519") throw new SshKeyError(`an ssh-ed25519 key cannot make a ${sigType} signature`);
        if (blob.byteLength !== 64) throw new SshKeyError("an ed25519 signature is 64 bytes");
        ok = cryptoVerify(null, signed, object, blob);
        break;
      case "ssh-rsa": {
        const hash = sigType === "rsa-sha2-512" ? "sha512" : sigType === "rsa-sha2-256" ? "sha256" : undefined;
        if (hash === undefined) throw new SshKeyError(`RSA signature type ${JSON.stringify(sigType)} is not accepted (rsa-sha2-256 or rsa-sha2-512)`);
        const size = Math.ceil((object.asymmetricKeyDetails?.modulusLength ?? 0) / 8);
        if (blob.byteLength > size || blob.byteLength === 0) throw new SshKeyError("the RSA signature is longer than the modulus");
        const padded = blob.byteLength === size ? blob : Buffer.concat([Buffer.alloc(size - blob.byteLength), blob]);
        ok = cryptoVerify(hash, signed, object, padded);
        break;
      }
      default: {
        const curve = CURVES[key.type]!;
        if (key.type !== "sk-ecdsa-sha2-nistp256@openssh.com" && sigType !== key.type) {
          throw new SshKeyError(`a ${key.type} key cannot make a ${sigType} signature`);
        }
        const rs = new SshReader(blob);
        const rPart = rs.mpint("ecdsa r");
        const sPart = rs.mpint("ecdsa s");
        rs.end("the ECDSA signature");
        if (rPart.byteLength > curve.size || sPart.byteLength > curve.size) throw new SshKeyError("an ECDSA signature value is larger than its curve");
        const p1363 = Buffer.alloc(2 * curve.size);
        p1363.set(rPart, curve.size - rPart.byteLength);
        p1363.set(sPart, 2 * curve.size - sPart.byteLength);
        ok = cryptoVerify(curve.hash, signed, { key: object, dsaEncoding: "ieee-p1363" }, p1363);
      }
    }
  } catch (error) {
    if (error instanceof SshWireError) throw new SshKeyError(error.message);
    throw error;
  }
  if (!ok) throw new SshSignatureError("the signature does not verify");
  return details;
}

function sha256(bytes: Uint8Array): Buffer {
  return createHash("sha256").update(bytes).digest();
}

/**
 * A certificate's own checks at time `at` (seconds): its CA signature verifies, it is a user
 * certificate, `at` lies in its validity window, and it carries no critical option (none is
 * defined for signing, and an unknown one must be refused).
 */
export function checkCertificate(key: SshPublicKey, at: number): "ok" | "expired" | "not-yet-valid" | "not-user" | "critical-option" {
  const cert = key.cert!;
  verifySshSignature(cert.signatureKey, key.certSigned!.data, key.certSigned!.signature);
  if (cert.certType !== 1) return "not-user";
  if (cert.criticalOptions.length > 0) return "critical-option";
  const now = BigInt(Math.floor(at));
  if (now < cert.validAfter) return "not-yet-valid";
  if (now >= cert.validBefore) return "expired";
  return "ok";
}
