/**
 * RFC 8785 forms of journal entries, built by hand for the shapes the invocation handle writes on
 * every run (run.started without a bundle, effect.started, effect.finished without detail,
 * run.terminated) and for the entry envelope. Every field of those shapes is a string (or the
 * integer seq and v), so the canonical form is the fields in sorted key order with each string as
 * JSON.stringify writes it — which is exactly how `canonicalize` writes strings. Anything else
 * (notes, free JSON fields, unexpected keys or types, any UTF-16 surrogate) returns undefined and
 * the caller takes canonicalJson, so the result is always canonicalJson's. A property test pins the
 * equality.
 */
import { canonicalJson } from "../core/canonical.js";
import type { JournalEntry } from "./types.js";

type Fields = Record<string, unknown>;

/** Surrogates take the general path, which refuses lone ones. */
const SURROGATE = /[\uD800-\uDFFF]/;

/** The JSON form of own string field `name`, or undefined when it is not a plain string. */
function text(obj: Fields, name: string): string | undefined {
  if (!Object.hasOwn(obj, name)) return undefined;
  const value = obj[name];
  return typeof value === "string" && !SURROGATE.test(value) ? JSON.stringify(value) : undefined;
}

function plain(value: unknown): Fields | undefined {
  if (typeof value !== "object" || value === null || Array.isArray(value)) return undefined;
  const proto: unknown = Object.getPrototypeOf(value);
  return proto === Object.prototype || proto === null ? (value as Fields) : undefined;
}

function fieldCount(obj: Fields): number {
  return Object.keys(obj).length;
}

function runStarted(e: Fields): string | undefined {
  const n = fieldCount(e);
  const provider = text(e, "provider");
  if (n !== (provider === undefined ? 3 : 4)) return undefined;
  const inv = plain(e.invocation);
  if (!Object.hasOwn(e, "invocation") || inv === undefined || fieldCount(inv) !== 3) return undefined;
  const agent = text(e, "agent");
  const id = text(inv, "id");
  const requestHash = text(inv, "request_hash");
  const scope = text(inv, "scope");
  if (agent === undefined || id === undefined || requestHash === undefined || scope === undefined) return undefined;
  return (
    `{"agent":${agent},"invocation":{"id":${id},"request_hash":${requestHash},"scope":${scope}}` +
    `${provider === undefined ? "" : `,"provider":${provider}`},"type":"run.started"}`
  );
}

function effectStarted(e: Fields): string | undefined {
  if (fieldCount(e) !== 5) return undefined;
  const effectId = text(e, "effect_id");
  const fingerprint = text(e, "fingerprint");
  const kind = text(e, "kind");
  const name = text(e, "name");
  if (effectId === undefined || fingerprint === undefined || kind === undefined || name === undefined) return undefined;
  return `{"effect_id":${effectId},"fingerprint":${fingerprint},"kind":${kind},"name":${name},"type":"effect.started"}`;
}

function effectFinished(e: Fields): string | undefined {
  if (fieldCount(e) !== 3) return undefined;
  const effectId = text(e, "effect_id");
  const outcome = text(e, "outcome");
  if (effectId === undefined || outcome === undefined) return undefined;
  return `{"effect_id":${effectId},"outcome":${outcome},"type":"effect.finished"}`;
}

function runTerminated(e: Fields): string | undefined {
  const resultHash = text(e, "result_hash");
  if (fieldCount(e) !== (resultHash === undefined ? 2 : 3)) return undefined;
  const reason = text(e, "reason");
  if (reason === undefined) return undefined;
  return `{"reason":${reason}${resultHash === undefined ? "" : `,"result_hash":${resultHash}`},"type":"run.terminated"}`;
}

/** The RFC 8785 form of an event of one of the fixed shapes; undefined for any other value. */
export function fixedShapeEvent(event: unknown): string | undefined {
  const e = plain(event);
  if (e === undefined || !Object.hasOwn(e, "type")) return undefined;
  switch (e.type) {
    case "run.started":
      return runStarted(e);
    case "effect.started":
      return effectStarted(e);
    case "effect.finished":
      return effectFinished(e);
    case "run.terminated":
      return runTerminated(e);
    default:
      return undefined;
  }
}

/** RFC 8785 form of an event: the hand-built one for the fixed shapes, canonicalJson otherwise. */
export function canonicalEvent(event: unknown): string {
  return fixedShapeEvent(event) ?? canonicalJson(event);
}

/**
 * The entry's envelope fields in RFC 8785 form, after `"event":<E>` (so without an opening brace):
 * `,"key_id":…,"prev":…,"run_id":…,"seq":…,"ts":…,"v":1}`. "event" sorts before every other
 * field. Undefined unless every field has the type a valid entry gives it.
 */
export function fixedShapeEnvelope(entry: JournalEntry): string | undefined {
  const e = plain(entry);
  if (e === undefined || fieldCount(e) !== 7 || e.v !== 1 || !Number.isSafeInteger(e.seq) || !Object.hasOwn(e, "event")) return undefined;
  const keyId = text(e, "key_id");
  const prev = text(e, "prev");
  const runId = text(e, "run_id");
  const ts = text(e, "ts");
  if (keyId === undefined || prev === undefined || runId === undefined || ts === undefined) return undefined;
  return `,"key_id":${keyId},"prev":${prev},"run_id":${runId},"seq":${JSON.stringify(e.seq)},"ts":${ts},"v":1}`;
}
