/**
 * The errors of bundle signatures and trust policy, each with its own stable code (DESIGN.md
 * "Bundle signatures"). Every refusal happens before anything is stored.
 */
import { IntegrityError, LimitError, ValidationError, WardenError, type ErrorDetails } from "../core/errors.js";

/** Largest armored signature accepted (a 16384-bit RSA certificate fits several times). */
export const SIGNATURE_MAX_BYTES = 64 * 1024;
/** Most signatures one revision carries. */
export const SIGNATURES_MAX = 16;
/** Largest allowed_signers file read. */
export const ALLOWED_SIGNERS_MAX_BYTES = 16 * 1024 * 1024;

export type SigningErrorCode =
  | "bundle-signature-malformed"
  | "bundle-signature-key-unsupported"
  | "bundle-signature-invalid"
  | "bundle-signature-required"
  | "bundle-signer-untrusted"
  | "bundle-signer-expired"
  | "bundle-signer-not-yet-valid"
  | "bundle-signer-revoked";

export function signatureMalformed(reason: string, code: "bundle-signature-malformed" | "bundle-signature-key-unsupported" = "bundle-signature-malformed"): ValidationError {
  return new ValidationError(code, `the bundle signature is malformed: ${reason}`, { details: { reason } });
}

export function signatureInvalid(reason: string, details: ErrorDetails = {}): IntegrityError {
  return new IntegrityError("bundle-signature-invalid", `the bundle signature is not valid: ${reason}`, { details: { reason, ...details } });
}

export function tooManySignatures(count: number): LimitError {
  return new LimitError("bundle-signatures-too-many", `a revision carries at most ${SIGNATURES_MAX} signatures (${count} given or stored)`, {
    status: 422,
    details: { count, limit: SIGNATURES_MAX },
  });
}

/** A refusal by the trust policy (422 at commit; `bundle-signer-revoked` at materialization and run start). */
export function policyRefusal(code: SigningErrorCode, message: string, details: ErrorDetails): IntegrityError {
  return new IntegrityError(code, message, { details });
}

/** The operator's allowed_signers file cannot be used: the policy fails closed. */
export function allowedSignersInvalid(path: string, line: number, reason: string): WardenError {
  return new WardenError("allowed-signers-invalid", `allowed_signers ${path}${line > 0 ? `:${line}` : ""}: ${reason}`, 500, { details: { path, line, reason } });
}
