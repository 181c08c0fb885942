/**
 * The exact shape of a journal entry and its events (DESIGN.md "Journal"). Both the writer and the
 * verifier go through here, so a journal the writer accepts is exactly one the verifier accepts.
 * Unknown fields are refused everywhere except inside `note` events, which are free JSON.
 */
import { canonicalDigest, canonicalJson } from "../core/canonical.js";
import { isDigest } from "../core/digest.js";
import { LimitError, ValidationError } from "../core/errors.js";
import type { Limits } from "../core/limits.js";
import { isKeyId } from "../core/ed25519.js";
import {
  EFFECT_KINDS,
  EFFECT_OUTCOMES,
  JOURNAL_VERSION,
  POLICY_DECISIONS,
  APPROVAL_DECISIONS,
  TERMINATION_REASONS,
  type JournalEntry,
  type JournalEvent,
} from "./types.js";

const UUID_RE = /^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$/;
const TS_RE = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})\.\d{3}Z$/;
const HEX64_RE = /^[0-9a-f]{64}$/;

export function isUuid(value: unknown): value is string {
  return typeof value === "string" && UUID_RE.test(value);
}

/**
 * A run id as warden makes them (crypto.randomUUID): a lowercase UUID. Run ids name files (journals,
 * captured outputs, stopped-agent records), so only this one spelling is taken where they do.
 */
export const RUN_ID_PATTERN = "[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}";
const RUN_ID_RE = new RegExp(`^${RUN_ID_PATTERN}$`);

export function isRunId(value: unknown): value is string {
  return typeof value === "string" && RUN_ID_RE.test(value);
}

/** The checks of a journal store's arguments, the same on every backend. */
export function assertJournalRunId(runId: string): void {
  if (!isUuid(runId)) throw new ValidationError("journal-bad-run-id", `run_id ${JSON.stringify(runId)} is not a UUID`);
}

export function assertJournalOffset(offset: number): void {
  if (!Number.isSafeInteger(offset) || offset < 0) throw new ValidationError("journal-bad-offset", `journal offset ${offset} is not a byte offset`);
}

/** Proleptic Gregorian, as JavaScript's Date and RFC 3339 count. */
const DAYS_IN_MONTH = [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31] as const;

/** RFC 3339 UTC with exactly three fraction digits, and a real instant (no Feb 30, no leap second). */
export function isJournalTimestamp(value: unknown): value is string {
  if (typeof value !== "string") return false;
  const m = TS_RE.exec(value);
  if (m === null) return false;
  const [year, month, day, hour, minute, second] = m.slice(1).map(Number) as [number, number, number, number, number, number];
  if (month < 1 || month > 12 || day < 1 || hour > 23 || minute > 59 || second > 59) return false;
  const leap = year % 4 === 0 && (year % 100 !== 0 || year % 400 === 0);
  return day <= (month === 2 && leap ? 29 : DAYS_IN_MONTH[month - 1]!);
}

/** The `ts` form of an instant; refuses instants outside years 0000–9999 (no RFC 3339 form). */
export function journalTimestamp(date: Date): string {
  const year = date.getUTCFullYear();
  if (!(year >= 0 && year <= 9999)) {
    throw new ValidationError("journal-bad-entry", "ts: clock gave an instant RFC 3339 cannot express");
  }
  return date.toISOString();
}

type Fields = Record<string, unknown>;

function plainObject(value: unknown, code: string, what: string): Fields {
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    throw new ValidationError(code, `${what} must be a JSON object`);
  }
  const proto: unknown = Object.getPrototypeOf(value);
  if (proto !== Object.prototype && proto !== null) throw new ValidationError(code, `${what} must be a plain object`);
  return value as Fields;
}

function onlyFields(obj: Fields, required: readonly string[], optional: readonly string[], code: string, what: string): void {
  for (const name of required) {
    if (!Object.hasOwn(obj, name)) throw new ValidationError(code, `${what}: missing field ${name}`);
  }
  for (const name of Object.keys(obj)) {
    if (!required.includes(name) && !optional.includes(name)) {
      throw new ValidationError(code, `${what}: unknown field ${JSON.stringify(name)}`);
    }
  }
}

function nonEmptyString(obj: Fields, name: string, code: string, what: string): void {
  const v = obj[name];
  if (typeof v !== "string" || v.length === 0) throw new ValidationError(code, `${what}.${name} must be a non-empty string`);
}

function oneOf(obj: Fields, name: string, allowed: readonly string[], code: string, what: string): void {
  const v = obj[name];
  if (typeof v !== "string" || !allowed.includes(v)) {
    throw new ValidationError(code, `${what}.${name} must be one of ${allowed.join(", ")}`);
  }
}

const BAD_EVENT = "journal-bad-event";

function countField(obj: Fields, name: string, what: string): void {
  const v = obj[name];
  if (typeof v !== "number" || !Number.isSafeInteger(v) || v < 0) throw new ValidationError(BAD_EVENT, `${what}.${name} must be a non-negative integer`);
}

/**
 * Checks an event's shape; returns it typed. Notes are bounded by `limits.noteBytes` of canonical
 * JSON; a caller that already holds the event's canonical form passes its byte length.
 */
export function validateEvent(value: unknown, limits: Pick<Limits, "noteBytes">, canonicalBytes?: number): JournalEvent {
  const ev = plainObject(value, BAD_EVENT, "event");
  const type = ev.type;
  switch (type) {
    case "run.started": {
      onlyFields(ev, ["type", "invocation", "agent"], ["provider", "bundle", "isolation", "policy", "base"], BAD_EVENT, type);
      if (Object.hasOwn(ev, "base") && !isCommitHex(ev.base)) throw new ValidationError(BAD_EVENT, `${type}.base must be a commit id (40 or 64 lowercase hex)`);
      const inv = plainObject(ev.invocation, BAD_EVENT, `${type}.invocation`);
      onlyFields(inv, ["scope", "id", "request_hash"], [], BAD_EVENT, `${type}.invocation`);
      nonEmptyString(inv, "scope", BAD_EVENT, `${type}.invocation`);
      nonEmptyString(inv, "id", BAD_EVENT, `${type}.invocation`);
      if (!isDigest(inv.request_hash)) {
        throw new ValidationError(BAD_EVENT, `${type}.invocation.request_hash must be sha256: and 64 lowercase hex`);
      }
      nonEmptyString(ev, "agent", BAD_EVENT, type);
      if (Object.hasOwn(ev, "provider")) nonEmptyString(ev, "provider", BAD_EVENT, type);
      if (Object.hasOwn(ev, "isolation")) checkIsolation(ev.isolation, type);
      if (Object.hasOwn(ev, "policy")) {
        const policy = plainObject(ev.policy, BAD_EVENT, `${type}.policy`);
        onlyFields(policy, ["schema", "digest"], [], BAD_EVENT, `${type}.policy`);
        nonEmptyString(policy, "schema", BAD_EVENT, `${type}.policy`);
        if (!isDigest(policy.digest)) throw new ValidationError(BAD_EVENT, `${type}.policy.digest must be sha256: and 64 lowercase hex`);
      }
      // `bundle` is free JSON; canonicalization of the whole entry checks it is JSON.
      break;
    }
    case "effect.started":
      onlyFields(ev, ["type", "effect_id", "kind", "name", "fingerprint"], [], BAD_EVENT, type);
      nonEmptyString(ev, "effect_id", BAD_EVENT, type);
      oneOf(ev, "kind", EFFECT_KINDS, BAD_EVENT, type);
      nonEmptyString(ev, "name", BAD_EVENT, type);
      nonEmptyString(ev, "fingerprint", BAD_EVENT, type);
      break;
    case "effect.finished":
      onlyFields(ev, ["type", "effect_id", "outcome"], ["detail"], BAD_EVENT, type);
      nonEmptyString(ev, "effect_id", BAD_EVENT, type);
      oneOf(ev, "outcome", EFFECT_OUTCOMES, BAD_EVENT, type);
      break;
    case "policy.decision": {
      onlyFields(ev, ["type", "call_id", "tool", "action", "decision", "policies", "fingerprint"], ["reason"], BAD_EVENT, type);
      nonEmptyString(ev, "call_id", BAD_EVENT, type);
      nonEmptyString(ev, "tool", BAD_EVENT, type);
      nonEmptyString(ev, "action", BAD_EVENT, type);
      oneOf(ev, "decision", POLICY_DECISIONS, BAD_EVENT, type);
      if (!Array.isArray(ev.policies) || !ev.policies.every((p) => typeof p === "string" && p !== "")) {
        throw new ValidationError(BAD_EVENT, `${type}.policies must be a list of policy ids`);
      }
      if (!isDigest(ev.fingerprint)) throw new ValidationError(BAD_EVENT, `${type}.fingerprint must be sha256: and 64 lowercase hex`);
      if (Object.hasOwn(ev, "reason") && typeof ev.reason !== "string") throw new ValidationError(BAD_EVENT, `${type}.reason must be a string`);
      break;
    }
    case "run.parked": {
      onlyFields(ev, ["type", "call_id", "tool", "policies", "deadline", "session", "workspace"], [], BAD_EVENT, type);
      for (const name of ["call_id", "tool", "session", "workspace"]) nonEmptyString(ev, name, BAD_EVENT, type);
      if (!Array.isArray(ev.policies) || !ev.policies.every((p) => typeof p === "string" && p !== "")) {
        throw new ValidationError(BAD_EVENT, `${type}.policies must be a list of policy ids`);
      }
      if (!isJournalTimestamp(ev.deadline)) {
        throw new ValidationError(BAD_EVENT, `${type}.deadline must be an RFC 3339 UTC timestamp with milliseconds`);
      }
      break;
    }
    case "policy.approval": {
      onlyFields(ev, ["type", "call_id", "decision", "by"], ["reason"], BAD_EVENT, type);
      nonEmptyString(ev, "call_id", BAD_EVENT, type);
      oneOf(ev, "decision", APPROVAL_DECISIONS, BAD_EVENT, type);
      const by = plainObject(ev.by, BAD_EVENT, `${type}.by`);
      onlyFields(by, ["name", "role"], [], BAD_EVENT, `${type}.by`);
      nonEmptyString(by, "name", BAD_EVENT, `${type}.by`);
      nonEmptyString(by, "role", BAD_EVENT, `${type}.by`);
      if (Object.hasOwn(ev, "reason") && typeof ev.reason !== "string") throw new ValidationError(BAD_EVENT, `${type}.reason must be a string`);
      break;
    }
    case "note": {
      const bytes = canonicalBytes ?? Buffer.byteLength(canonicalJson(ev));
      if (bytes > limits.noteBytes) {
        throw new LimitError("journal-note-too-large", `note is ${bytes} bytes canonical, over the limit of ${limits.noteBytes}`);
      }
      break;
    }
    case "run.spend": {
      onlyFields(ev, ["type", "tokens", "cost_usd_micros", "turns", "wall_ms", "prices"], ["breached"], BAD_EVENT, type);
      const tokens = plainObject(ev.tokens, BAD_EVENT, `${type}.tokens`);
      onlyFields(tokens, ["input", "output"], [], BAD_EVENT, `${type}.tokens`);
      for (const [obj, name, what] of [[tokens, "input", `${type}.tokens`], [tokens, "output", `${type}.tokens`], [ev, "cost_usd_micros", type], [ev, "turns", type], [ev, "wall_ms", type]] as const) {
        countField(obj, name, what);
      }
      if (!isDigest(ev.prices)) throw new ValidationError(BAD_EVENT, `${type}.prices must be sha256: and 64 lowercase hex`);
      if (Object.hasOwn(ev, "breached")) nonEmptyString(ev, "breached", BAD_EVENT, type);
      break;
    }
    case "run.changes":
      checkRunChanges(ev, type);
      break;
    case "run.terminated":
      onlyFields(ev, ["type", "reason"], ["result_hash"], BAD_EVENT, type);
      oneOf(ev, "reason", TERMINATION_REASONS, BAD_EVENT, type);
      if (Object.hasOwn(ev, "result_hash") && !isDigest(ev.result_hash)) {
        throw new ValidationError(BAD_EVENT, `${type}.result_hash must be sha256: and 64 lowercase hex`);
      }
      break;
    default:
      throw new ValidationError(BAD_EVENT, `event.type ${JSON.stringify(type)} is not a journal event type`);
  }
  return ev as unknown as JournalEvent;
}

const BAD_ENTRY = "journal-bad-entry";
const ENTRY_FIELDS = ["v", "run_id", "seq", "prev", "ts", "key_id", "event"] as const;

/** Checks an entry's envelope and event; returns it typed. */
export function validateEntry(value: unknown, limits: Pick<Limits, "noteBytes">, canonicalEventBytes?: number): JournalEntry {
  const e = plainObject(value, BAD_ENTRY, "entry");
  onlyFields(e, ENTRY_FIELDS, [], BAD_ENTRY, "entry");
  if (e.v !== JOURNAL_VERSION) throw new ValidationError(BAD_ENTRY, `entry.v must be ${JOURNAL_VERSION}`);
  if (!isUuid(e.run_id)) throw new ValidationError(BAD_ENTRY, "entry.run_id must be a UUID");
  if (typeof e.seq !== "number" || !Number.isSafeInteger(e.seq) || e.seq < 0) {
    throw new ValidationError(BAD_ENTRY, "entry.seq must be a non-negative integer");
  }
  if (typeof e.prev !== "string" || !HEX64_RE.test(e.prev)) {
    throw new ValidationError(BAD_ENTRY, "entry.prev must be 64 lowercase hex digits");
  }
  if (!isJournalTimestamp(e.ts)) {
    throw new ValidationError(BAD_ENTRY, "entry.ts must be RFC 3339 UTC with milliseconds (2026-01-02T03:04:05.678Z)");
  }
  if (!isKeyId(e.key_id)) throw new ValidationError(BAD_ENTRY, "entry.key_id must be 16 lowercase hex digits");
  validateEvent(e.event, limits, canonicalEventBytes);
  return e as unknown as JournalEntry;
}

const COMMIT_RE = /^(?:[0-9a-f]{40}|[0-9a-f]{64})$/;
function isCommitHex(value: unknown): boolean {
  return typeof value === "string" && COMMIT_RE.test(value);
}

const CHANGE_STATUSES = ["added", "modified", "deleted", "renamed"];
const CHANGE_FILE_FIELDS = ["path", "old_path", "status", "old_sha256", "new_sha256", "lines_added", "lines_deleted"];

function nullOr(value: unknown, test: (v: unknown) => boolean): boolean {
  return value === null || test(value);
}
function isCount(value: unknown): boolean {
  return typeof value === "number" && Number.isSafeInteger(value) && value >= 0;
}

/** `run.changes` (DESIGN.md "Change sets"): a change set's digest and files, or why there is none. */
function checkRunChanges(ev: Fields, type: string): void {
  if (!isCommitHex(ev.base)) throw new ValidationError(BAD_EVENT, `${type}.base must be a commit id (40 or 64 lowercase hex)`);
  if (Object.hasOwn(ev, "error")) {
    onlyFields(ev, ["type", "base", "error"], [], BAD_EVENT, type);
    const error = plainObject(ev.error, BAD_EVENT, `${type}.error`);
    onlyFields(error, ["code", "detail"], [], BAD_EVENT, `${type}.error`);
    nonEmptyString(error, "code", BAD_EVENT, `${type}.error`);
    if (typeof error.detail !== "string") throw new ValidationError(BAD_EVENT, `${type}.error.detail must be a string`);
    return;
  }
  onlyFields(ev, ["type", "base", "change_set", "no_changes", "files_total", "files"], [], BAD_EVENT, type);
  if (!isDigest(ev.change_set)) throw new ValidationError(BAD_EVENT, `${type}.change_set must be sha256: and 64 lowercase hex`);
  if (!isCount(ev.files_total)) throw new ValidationError(BAD_EVENT, `${type}.files_total must be a count`);
  if (ev.no_changes !== (ev.files_total === 0)) throw new ValidationError(BAD_EVENT, `${type}.no_changes must be true exactly when files_total is 0`);
  if (!Array.isArray(ev.files) || ev.files.length > (ev.files_total as number)) {
    throw new ValidationError(BAD_EVENT, `${type}.files must be a list of at most files_total files`);
  }
  ev.files.forEach((value: unknown, i: number) => {
    const what = `${type}.files[${i}]`;
    const f = plainObject(value, BAD_EVENT, what);
    onlyFields(f, CHANGE_FILE_FIELDS, [], BAD_EVENT, what);
    nonEmptyString(f, "path", BAD_EVENT, what);
    oneOf(f, "status", CHANGE_STATUSES, BAD_EVENT, what);
    const ok =
      nullOr(f.old_path, (v) => typeof v === "string" && v.length > 0) &&
      nullOr(f.old_sha256, isDigest) &&
      nullOr(f.new_sha256, isDigest) &&
      nullOr(f.lines_added, isCount) &&
      nullOr(f.lines_deleted, isCount);
    if (!ok) throw new ValidationError(BAD_EVENT, `${what}: old_path, digests or line counts of the wrong form`);
  });
}

/** `{profile: {kind, …}, digest}` where digest is the sha256 of the profile's canonical JSON. */
function checkIsolation(value: unknown, type: string): void {
  const iso = plainObject(value, BAD_EVENT, `${type}.isolation`);
  onlyFields(iso, ["profile", "digest"], [], BAD_EVENT, `${type}.isolation`);
  const profile = plainObject(iso.profile, BAD_EVENT, `${type}.isolation.profile`);
  if (profile.kind !== "bubblewrap" && profile.kind !== "none") throw new ValidationError(BAD_EVENT, `${type}.isolation.profile.kind must be bubblewrap or none`);
  if (!isDigest(iso.digest) || iso.digest !== canonicalDigest(profile)) {
    throw new ValidationError(BAD_EVENT, `${type}.isolation.digest must be the sha256 of the profile's canonical JSON`);
  }
}
