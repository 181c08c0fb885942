/**
 * OpenSSH's SSHSIG format (PROTOCOL.sshsig): the armored signature `ssh-keygen -Y sign` writes,
 * parsed from untrusted text and verified in-process. Parsing never throws anything but
 * `SigningError` with a stable code.
 */
import { createHash } from "node:crypto";
import { parsePublicKey, SshKeyError, SshSignatureError, verifySshSignature, type SkSignatureDetails, type SshPublicKey } from "./ssh-key.js";
import { SshReader, SshWireError, SshWriter } from "./ssh-wire.js";
import { signatureInvalid, signatureMalformed, SIGNATURE_MAX_BYTES } from "./signing-errors.js";

const BEGIN = "-----BEGIN SSH SIGNATURE-----";
const END = "-----END SSH SIGNATURE-----";
const MAGIC = "SSHSIG";
const VERSION = 1;
const HASHES = new Set(["sha256", "sha512"]);

export interface Sshsig {
  readonly publicKey: SshPublicKey;
  readonly namespace: string;
  readonly hashAlgorithm: "sha256" | "sha512";
  /** the signature's wire encoding */
  readonly signature: Uint8Array;
  /** the decoded blob (what the armor carries) */
  readonly blob: Uint8Array;
}

/** Decodes the armor: header, base64 lines, footer (whitespace around them tolerated). */
export function decodeArmor(text: string): Uint8Array {
  if (text.length > SIGNATURE_MAX_BYTES) throw signatureMalformed(`the signature is longer than ${SIGNATURE_MAX_BYTES} characters`);
  const trimmed = text.trim();
  if (!trimmed.startsWith(BEGIN)) throw signatureMalformed(`the signature does not start with ${BEGIN}`);
  if (!trimmed.endsWith(END)) throw signatureMalformed(`the signature does not end with ${END} (truncated?)`);
  const body = trimmed.slice(BEGIN.length, trimmed.length - END.length).replace(/[\r\n \t]/g, "");
  if (body.length === 0 || !/^[A-Za-z0-9+/]+={0,2}$/.test(body) || body.length % 4 !== 0) {
    throw signatureMalformed("the signature's body is not base64");
  }
  return Buffer.from(body, "base64");
}

export function encodeArmor(blob: Uint8Array): string {
  const b64 = Buffer.from(blob).toString("base64");
  const lines = b64.match(/.{1,70}/g) ?? [];
  return `${BEGIN}\n${lines.join("\n")}\n${END}\n`;
}

/** Parses an armored SSHSIG (code `bundle-signature-malformed`, or `bundle-signature-key-unsupported`). */
export function parseSshsig(armored: string): Sshsig {
  const blob = decodeArmor(armored);
  try {
    const r = new SshReader(blob);
    if (Buffer.from(r.raw(6, "magic preamble")).toString("latin1") !== MAGIC) throw signatureMalformed("the blob does not start with SSHSIG");
    const version = r.uint32("version");
    if (version !== VERSION) throw signatureMalformed(`SSHSIG version ${version} is not supported (1)`);
    const keyBlob = r.string("public key");
    const namespace = r.ascii("namespace");
    if (namespace === "") throw signatureMalformed("the namespace is empty");
    r.string("reserved");
    const hashAlgorithm = r.ascii("hash algorithm");
    if (!HASHES.has(hashAlgorithm)) throw signatureMalformed(`hash algorithm ${JSON.stringify(hashAlgorithm)} is not sha256 or sha512`);
    const signature = r.string("signature");
    r.end("the SSHSIG blob");
    return { publicKey: parseKey(keyBlob), namespace, hashAlgorithm: hashAlgorithm as "sha256" | "sha512", signature, blob };
  } catch (error) {
    if (error instanceof SshWireError) throw signatureMalformed(error.message);
    throw error;
  }
}

function parseKey(blob: Uint8Array): SshPublicKey {
  try {
    return parsePublicKey(blob);
  } catch (error) {
    if (error instanceof SshKeyError) throw signatureMalformed(`its public key: ${error.message}`, error.kind === "unknown-type" ? "bundle-signature-key-unsupported" : undefined);
    throw error;
  }
}

/** The bytes an SSHSIG signature covers (PROTOCOL.sshsig §3). */
export function sshsigSignedData(namespace: string, hashAlgorithm: "sha256" | "sha512", message: Uint8Array): Buffer {
  const digest = createHash(hashAlgorithm).update(message).digest();
  return new SshWriter().raw(MAGIC).string(namespace).string("").string(hashAlgorithm).string(digest).bytes();
}

/**
 * Verifies `sig` over `message` in `namespace`: `bundle-signature-invalid` when the namespace
 * differs or the signature does not verify (another message, another key, altered bytes).
 */
export function verifySshsig(sig: Sshsig, message: Uint8Array, namespace: string): SkSignatureDetails | undefined {
  if (sig.namespace !== namespace) throw signatureInvalid(`the signature is for namespace ${JSON.stringify(sig.namespace)}, not ${JSON.stringify(namespace)}`);
  try {
    return verifySshSignature(sig.publicKey.key, sshsigSignedData(namespace, sig.hashAlgorithm, message), sig.signature);
  } catch (error) {
    if (error instanceof SshSignatureError) throw signatureInvalid("the signature does not verify over this bundle's statement with its key");
    if (error instanceof SshKeyError) throw signatureMalformed(error.message);
    throw error;
  }
}
