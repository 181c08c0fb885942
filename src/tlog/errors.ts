/**
 * Failures of the transparency log's formats and proofs. Stable codes (DESIGN.md "Transparency").
 */
import { ConflictError, ValidationError } from "../core/errors.js";

/** A signed note, checkpoint, vkey, tile path or proof text that breaks its format (400). */
export function malformed(code: string, message: string): ValidationError {
  return new ValidationError(code, message);
}

/** A note that no trusted key signed, or that a trusted key's signature fails on (403 over the witness protocol). */
export function unverifiedNote(message: string): ValidationError {
  return new ValidationError("note-not-verified", message, { status: 403 });
}

/** Two views of a log that cannot both be true: a fork, a rollback, or a proof that does not verify. */
export function inconsistent(message: string, details: Record<string, string | number> = {}): ConflictError {
  return new ConflictError("tlog-inconsistent", message, { status: 422, details });
}
