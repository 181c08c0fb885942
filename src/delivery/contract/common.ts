/**
 * Shared pieces of the bundle contract checks: the error shape (every rule its own code, with the
 * component index and path) and strict decoding of the text files the contract reads.
 */
import { ValidationError, type ErrorDetails } from "../../core/errors.js";

/** Where a contract rule was broken: the component index and its path, and the field inside. */
export interface ContractWhere {
  readonly component: number;
  readonly path: string;
  readonly field?: string;
}

/**
 * Rules decidable from the manifest alone answer 400; rules about received bytes answer 422
 * (the request was well-formed, its content is not acceptable).
 */
export function contractError(
  code: string,
  rule: string,
  where: ContractWhere,
  status = 400,
  extra: ErrorDetails = {},
): never {
  const field = where.field === undefined ? "" : ` (${where.field})`;
  throw new ValidationError(code, `component ${where.component} ${JSON.stringify(where.path)}${field}: ${rule}`, {
    details: { ...where, ...extra },
    status,
  });
}

export const CONTENT_STATUS = 422;

const utf8 = new TextDecoder("utf-8", { fatal: true });

/** Decodes UTF-8 strictly (a leading BOM is dropped), refusing invalid bytes with their own code. */
export function decodeUtf8(bytes: Uint8Array, where: ContractWhere): string {
  try {
    return utf8.decode(bytes);
  } catch {
    return contractError("contract-not-utf8", "is not valid UTF-8 text", where, CONTENT_STATUS);
  }
}

/** Parses a JSON text file of the contract, refusing a syntax error with its own code. */
export function parseJsonFile(bytes: Uint8Array, where: ContractWhere): unknown {
  const text = decodeUtf8(bytes, where);
  try {
    return JSON.parse(text) as unknown;
  } catch (error) {
    const reason = error instanceof Error ? error.message : "syntax error";
    return contractError("contract-json-syntax", `is not valid JSON: ${reason}`, where, CONTENT_STATUS);
  }
}

/** Lower-case ASCII letters and digits in words joined by single '-' (no leading/trailing '-'). */
export const KEBAB_CASE_RE = /^[a-z0-9]+(?:-[a-z0-9]+)*$/;
