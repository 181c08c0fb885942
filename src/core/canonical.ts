import canonicalizeImpl from "canonicalize";
import { ValidationError } from "./errors.js";
import { sha256Digest, type Digest } from "./digest.js";

/** Any value RFC 8785 can serialize. */
export type JsonValue = null | boolean | number | string | JsonValue[] | { [key: string]: JsonValue };

// canonicalize's typings vary between versions; pin the shape we rely on.
const canonicalize = canonicalizeImpl as unknown as (input: unknown) => string | undefined;

/**
 * RFC 8785 (JCS) serialization. Refuses values JSON cannot represent faithfully (undefined,
 * functions, non-finite numbers, bigint) instead of silently dropping them, because a hash over a
 * silently altered value would not identify the caller's request.
 */
export function canonicalJson(value: unknown): string {
  assertJson(value, "$", 0);
  const out = canonicalize(value);
  if (out === undefined) throw new ValidationError("invalid-json", "value has no JSON form");
  return out;
}

export function canonicalDigest(value: unknown): Digest {
  return sha256Digest(canonicalJson(value));
}

/** A lone UTF-16 surrogate: JSON.parse accepts `"\\ud800"`, but it has no UTF-8 form and RFC 8785 refuses it. */
const LONE_SURROGATE_RE = /\p{Cs}/u;

function assertString(value: string, path: string): void {
  if (LONE_SURROGATE_RE.test(value)) throw new ValidationError("invalid-json", `${path}: a string holds a lone surrogate (not Unicode text)`);
}

function assertJson(value: unknown, path: string, depth: number): void {
  if (depth > 64) throw new ValidationError("invalid-json", `${path}: nesting deeper than 64`);
  switch (typeof value) {
    case "string":
      assertString(value, path);
      return;
    case "boolean":
      return;
    case "number":
      if (!Number.isFinite(value)) throw new ValidationError("invalid-json", `${path}: non-finite number`);
      return;
    case "object": {
      if (value === null) return;
      if (Array.isArray(value)) {
        value.forEach((v, i) => assertJson(v, `${path}[${i}]`, depth + 1));
        return;
      }
      const proto = Object.getPrototypeOf(value);
      if (proto !== Object.prototype && proto !== null) {
        throw new ValidationError("invalid-json", `${path}: not a plain object`);
      }
      for (const [k, v] of Object.entries(value)) {
        assertString(k, path);
        assertJson(v, `${path}.${k}`, depth + 1);
      }
      return;
    }
    default:
      throw new ValidationError("invalid-json", `${path}: ${typeof value} is not JSON`);
  }
}

/**
 * A tool call's fingerprint, as the runner (from the CLI's event stream) and the decision point
 * (from the CLI's hook input) both take it, so the two agree on one call: the canonical digest,
 * else, for a value RFC 8785 serialization refuses (nested too deep: a model's input is anyone's),
 * the digest of its JSON text, which still identifies it.
 */
export function callFingerprint(value: unknown): Digest {
  try {
    return canonicalDigest(value);
  } catch {
    return sha256Digest(JSON.stringify(value) ?? "null");
  }
}
