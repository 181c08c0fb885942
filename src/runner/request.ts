/**
 * The invocation request (DESIGN.md "HTTP API v1": `{provider, prompt, bundle?, workspace?,
 * timeout_s?}`), checked completely before a claim is opened for it, so a request that could
 * never run does not burn its idempotency id.
 */
import type { JsonValue } from "../core/canonical.js";
import { ValidationError } from "../core/errors.js";
import { checkInvocationId } from "../invocations/identity.js";
import { isPlainObject } from "../delivery/plain-object.js";
import { isProviderName, type BundleRef, type ProviderName } from "../providers/types.js";
import { parseBudget, type Budget } from "./spend.js";

export interface InvokeRequest {
  readonly provider: ProviderName;
  readonly prompt: string;
  readonly bundle?: BundleRef;
  readonly workspace?: string;
  /** a git workspace's ref or commit the run starts from (DESIGN.md "Change sets") */
  readonly base?: string;
  readonly timeout_s?: number;
  /** lowers the node's per-run budget (spend.ts) */
  readonly budget?: Budget;
}

export interface RequestBounds {
  readonly maxPromptBytes: number;
  readonly maxTimeoutS: number;
}

const REQUEST_FIELDS = ["provider", "prompt", "bundle", "workspace", "base", "timeout_s", "budget"];
const BUNDLE_FIELDS = ["bundle_id", "revision"];

/**
 * A broken rule of a well-formed request is 422; a request of the wrong shape (not an object, an
 * unknown field) is 400, as the HTTP route's schema answers it before this check is reached, so
 * that a code has one status whichever door the request came in by.
 */
function bad(code: string, message: string, field: string, status: 400 | 422 = 422): never {
  throw new ValidationError(code, message, { details: { field }, status });
}

function onlyFields(value: Record<string, unknown>, allowed: readonly string[], prefix: string): void {
  for (const key of Object.keys(value)) {
    if (!allowed.includes(key)) bad("invoke-request-unknown-field", `unknown field ${JSON.stringify(prefix + key)}`, prefix + key, 400);
  }
}

/** A prompt travels as one argv element of the provider CLI. */
function checkPrompt(prompt: unknown, bounds: RequestBounds): string {
  if (typeof prompt !== "string" || prompt.length === 0) bad("invoke-prompt-invalid", "prompt must be a non-empty string", "prompt");
  if (prompt.includes("\0")) bad("invoke-prompt-invalid", "prompt must not contain NUL (it is passed as a process argument)", "prompt");
  const bytes = Buffer.byteLength(prompt, "utf8");
  if (bytes > bounds.maxPromptBytes) {
    bad("invoke-prompt-too-large", `prompt is ${bytes} bytes, over the limit of ${bounds.maxPromptBytes}`, "prompt");
  }
  return prompt;
}

/** Parses untrusted input into a request, refusing each broken rule with its own code. */
export function parseInvokeRequest(input: unknown, bounds: RequestBounds): InvokeRequest {
  if (!isPlainObject(input)) bad("invoke-request-invalid", "request must be a JSON object", "", 400);
  onlyFields(input, REQUEST_FIELDS, "");
  const provider = input.provider;
  if (!isProviderName(provider)) bad("provider-unknown", `provider must be one of claude, codex, kimi`, "provider");
  const prompt = checkPrompt(input.prompt, bounds);
  let bundle: BundleRef | undefined;
  if (input.bundle !== undefined) {
    const b = input.bundle;
    if (!isPlainObject(b)) bad("invoke-bundle-invalid", "bundle must be {bundle_id, revision}", "bundle");
    onlyFields(b, BUNDLE_FIELDS, "bundle.");
    if (typeof b.bundle_id !== "string" || typeof b.revision !== "string") {
      bad("invoke-bundle-invalid", "bundle.bundle_id and bundle.revision must be strings", "bundle");
    }
    bundle = { bundle_id: b.bundle_id, revision: b.revision };
  }
  const workspace = input.workspace;
  if (workspace !== undefined && (typeof workspace !== "string" || workspace.length === 0)) {
    bad("invoke-workspace-invalid", "workspace must be a non-empty string", "workspace");
  }
  const base = input.base;
  if (base !== undefined && typeof base !== "string") bad("invoke-base-invalid", "base must be a string (a git ref or commit)", "base");
  const timeout = input.timeout_s;
  if (timeout !== undefined && (typeof timeout !== "number" || !Number.isSafeInteger(timeout) || timeout < 1 || timeout > bounds.maxTimeoutS)) {
    bad("invoke-timeout-invalid", `timeout_s must be an integer 1–${bounds.maxTimeoutS}`, "timeout_s");
  }
  const budget = input.budget === undefined ? undefined : parseBudget(input.budget, "budget");
  return {
    provider,
    prompt,
    ...(budget === undefined ? {} : { budget }),
    ...(bundle === undefined ? {} : { bundle }),
    ...(workspace === undefined ? {} : { workspace }),
    ...(base === undefined ? {} : { base }),
    ...(timeout === undefined ? {} : { timeout_s: timeout }),
  };
}

/** A request's identity as the claim store hashes it (its canonical JSON is the request identity). */
export function requestJson(request: InvokeRequest): JsonValue {
  return JSON.parse(JSON.stringify(request)) as JsonValue;
}

/**
 * An invocation as it travels from the door it came in by (the HTTP route, the library's
 * `Warden.start`) to its claim: parsed once, its id in canonical (lowercase) form.
 */
export interface ParsedInvocation {
  readonly scope: string;
  readonly id: string;
  readonly request: InvokeRequest;
}

/** Parses an invocation's id and request once, at its door; everything after takes the result. */
export function parseInvocation(scope: string, id: unknown, input: unknown, bounds: RequestBounds): ParsedInvocation {
  return { scope, id: checkInvocationId(id), request: parseInvokeRequest(input, bounds) };
}

/** What a submission (`respond-async`) carries beside its request: not part of the request identity. */
export interface QueueOptions {
  /** higher runs first (−1000…1000, default 0) */
  readonly priority: number;
  /** how long it may wait queued, s (default: the node's `queue.deadlineS`) */
  readonly deadline_s?: number;
  /** labels the node that runs it must have */
  readonly labels: Readonly<Record<string, string>>;
}

export const QUEUE_FIELDS = ["priority", "deadline_s", "labels"] as const;
export const MAX_PRIORITY = 1000;
export const MAX_DEADLINE_S = 30 * 24 * 3600;
const MAX_LABELS = 32;
const MAX_LABEL_BYTES = 128;

function badQueue(message: string, field: string): never {
  throw new ValidationError("queue-request-invalid", message, { details: { field }, status: 422 });
}

/**
 * Splits a submission's body into the request (checked by parseInvokeRequest, its identity) and
 * its queue options, checked here: each broken rule is `queue-request-invalid` naming the field.
 */
export function splitQueueOptions(input: unknown): { readonly request: unknown; readonly options: QueueOptions } {
  if (!isPlainObject(input)) return { request: input, options: { priority: 0, labels: {} } };
  const { priority, deadline_s, labels, ...request } = input;
  if (priority !== undefined && (typeof priority !== "number" || !Number.isSafeInteger(priority) || Math.abs(priority) > MAX_PRIORITY)) {
    badQueue(`priority must be an integer −${MAX_PRIORITY}…${MAX_PRIORITY}`, "priority");
  }
  if (deadline_s !== undefined && (typeof deadline_s !== "number" || !Number.isSafeInteger(deadline_s) || deadline_s < 1 || deadline_s > MAX_DEADLINE_S)) {
    badQueue(`deadline_s must be an integer 1–${MAX_DEADLINE_S}`, "deadline_s");
  }
  const checked: Record<string, string> = {};
  if (labels !== undefined) {
    if (!isPlainObject(labels)) badQueue("labels must be an object of strings", "labels");
    const entries = Object.entries(labels);
    if (entries.length > MAX_LABELS) badQueue(`at most ${MAX_LABELS} labels`, "labels");
    for (const [name, value] of entries) {
      if (name.length === 0 || Buffer.byteLength(name, "utf8") > MAX_LABEL_BYTES || typeof value !== "string" || Buffer.byteLength(value, "utf8") > MAX_LABEL_BYTES) {
        badQueue(`label ${JSON.stringify(name)}: names and values are strings of 1–${MAX_LABEL_BYTES} bytes (values may be empty)`, `labels.${name}`);
      }
      checked[name] = value;
    }
  }
  return {
    request,
    options: { priority: (priority as number | undefined) ?? 0, labels: checked, ...(deadline_s === undefined ? {} : { deadline_s: deadline_s as number }) },
  };
}
