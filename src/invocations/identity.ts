/**
 * Validation of an invocation's identity (scope, id, request, agent) and of result payloads,
 * against the configured bounds (G11). Everything here runs before any write, so an over-limit
 * or malformed input is refused with nothing stored.
 */
import { canonicalJson } from "../core/canonical.js";
import { sha256Digest, type Digest } from "../core/digest.js";
import { LimitError, ValidationError } from "../core/errors.js";
import type { Limits } from "../core/limits.js";
import { isRunId, isUuid } from "../journal/schema.js";

// C0 controls and DEL: identities end up in logs, headers and file listings.
const CONTROL_RE = /[\u0000-\u001f\u007f]/;
// A lone surrogate has no UTF-8 form: two different strings would hash alike.
const LONE_SURROGATE_RE = /\p{Cs}/u;
/** agent and operator names, bytes */
export const NAME_MAX_BYTES = 256;

/** Refuses an empty, over-long or control-character scope. */
export function checkScope(scope: unknown, limits: Pick<Limits, "scopeBytes">): string {
  if (typeof scope !== "string" || scope.length === 0) {
    throw new ValidationError("invalid-scope", "scope must be a non-empty string");
  }
  const bytes = Buffer.byteLength(scope, "utf8");
  if (bytes > limits.scopeBytes) {
    throw new LimitError("scope-too-large", `scope is ${bytes} bytes, over the limit of ${limits.scopeBytes}`, {
      details: { limit: limits.scopeBytes },
    });
  }
  if (CONTROL_RE.test(scope) || LONE_SURROGATE_RE.test(scope)) {
    throw new ValidationError("invalid-scope", "scope must be well-formed text without control characters");
  }
  return scope;
}

/** An invocation id is a UUID (the Idempotency-Key), in canonical lowercase form. */
export function checkInvocationId(id: unknown): string {
  if (typeof id !== "string") throw new ValidationError("invocation-id-invalid", "invocation id must be a UUID string");
  // An id that came through a door (parseInvocation) is canonical already: checked, not lowercased again.
  const canonical: boolean = isRunId(id);
  if (canonical) return id;
  const lower = id.toLowerCase();
  if (!isUuid(lower)) throw new ValidationError("invocation-id-invalid", "invocation id must be a UUID");
  return lower;
}

/** Agent or operator name: 1–256 bytes of text without control characters. */
export function checkName(value: unknown, what: "agent" | "operator"): string {
  const code = what === "agent" ? "invalid-agent" : "invalid-operator";
  if (typeof value !== "string" || value.length === 0) throw new ValidationError(code, `${what} must be a non-empty string`);
  if (Buffer.byteLength(value, "utf8") > NAME_MAX_BYTES || CONTROL_RE.test(value) || LONE_SURROGATE_RE.test(value)) {
    throw new ValidationError(code, `${what} must be at most ${NAME_MAX_BYTES} bytes of text without control characters`);
  }
  return value;
}

/** The request hash (sha256 of the canonical JSON of the request identity), bounded. */
export function requestHashOf(request: unknown, limits: Pick<Limits, "requestBytes">): Digest {
  const canonical = canonicalJson(request);
  const bytes = Buffer.byteLength(canonical, "utf8");
  if (bytes > limits.requestBytes) {
    throw new LimitError("request-too-large", `request identity is ${bytes} bytes, over the limit of ${limits.requestBytes}`, {
      details: { limit: limits.requestBytes },
    });
  }
  return sha256Digest(canonical);
}

/** A result payload's canonical JSON and digest, bounded. */
export function canonicalResult(result: unknown, limits: Pick<Limits, "resultBytes">): { payload: string; hash: Digest } {
  const payload = canonicalJson(result);
  const bytes = Buffer.byteLength(payload, "utf8");
  if (bytes > limits.resultBytes) {
    throw new LimitError("result-too-large", `result is ${bytes} bytes, over the limit of ${limits.resultBytes}`, {
      details: { limit: limits.resultBytes },
    });
  }
  return { payload, hash: sha256Digest(payload) };
}
