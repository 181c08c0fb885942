/**
 * Failures the client reports. A node's RFC 9457 problem reply becomes a WardenHttpError with the
 * node's own stable `code`, so callers branch on the same codes the server documents; a node that
 * cannot be reached at all is a WardenConnectionError (`node-unreachable`), which push treats as
 * transient.
 */
import { WardenError, canonicalCode, type ErrorDetails } from "../core/errors.js";

/** The problem document a node answers with (DESIGN.md "HTTP API v1"): the fixed members plus any extension. */
export interface Problem {
  readonly type?: string;
  readonly title?: string;
  readonly status?: number;
  readonly detail?: string;
  readonly code: string;
  readonly [extension: string]: unknown;
}

function scalarDetails(problem: Problem): ErrorDetails {
  const details: Record<string, string | number | boolean | null> = {};
  for (const [key, value] of Object.entries(problem)) {
    if (key === "type" || key === "title" || key === "status" || key === "detail" || key === "code") continue;
    if (value === null || typeof value === "string" || typeof value === "number" || typeof value === "boolean") details[key] = value;
  }
  return details;
}

export class WardenHttpError extends WardenError {
  override readonly name: string = "WardenHttpError";
  /** The whole problem document, extensions included (e.g. `expected_offset`, `missing_bytes`). */
  readonly problem: Problem;
  readonly method: string;
  readonly path: string;

  constructor(status: number, problem: Problem, request: { method: string; path: string }) {
    const message = problem.detail ?? problem.title ?? `HTTP ${status}`;
    // A node of an earlier release may answer a code by its earlier name: the client speaks today's.
    super(canonicalCode(problem.code), message, status, { details: scalarDetails(problem) });
    this.problem = problem;
    this.method = request.method;
    this.path = request.path;
  }

  /** Where the node says the next chunk must start (`409 chunk-out-of-order`, `422 blob-digest-mismatch`). */
  get expectedOffset(): number | undefined {
    const value = this.problem.expected_offset;
    return typeof value === "number" && Number.isSafeInteger(value) && value >= 0 ? value : undefined;
  }
}

/** The request never got an HTTP answer: connection refused or reset, DNS failure, timeout. */
export class WardenConnectionError extends WardenError {
  override readonly name: string = "WardenConnectionError";
  readonly url: string;

  constructor(url: string, cause: unknown) {
    super("node-unreachable", `cannot reach the node at ${url}: ${causeText(cause)}`, 503, { cause, details: { url } });
    this.url = url;
  }
}

/** undici wraps the socket error as `cause` of a bare "fetch failed": name the real reason. */
function causeText(error: unknown): string {
  let current: unknown = error;
  for (let depth = 0; depth < 4 && current instanceof Error; depth++) {
    const next: unknown = (current as { cause?: unknown }).cause;
    if (!(next instanceof Error)) break;
    current = next;
  }
  if (current instanceof Error) {
    const code = (current as { code?: unknown }).code;
    return typeof code === "string" && !current.message.includes(code) ? `${current.message} (${code})` : current.message;
  }
  return String(current);
}
