/**
 * Every failure warden reports is a WardenError with a stable machine `code` (kebab-case) and an
 * HTTP status that the server maps it to. Subclasses group failures by what a caller can do about
 * them; the `code` says exactly which rule was broken. Codes are part of the public contract: never
 * rename one, add a new one instead.
 */
/** Extra members of an error (a problem document's, over HTTP): scalars, a list of strings, or a list of items (e.g. every problem of a review). */
export type ErrorDetails = Readonly<Record<string, string | number | boolean | null | undefined | readonly string[] | readonly ErrorItem[]>>;
/** One item of a list in an error's details: named strings. */
export type ErrorItem = Readonly<Record<string, string>>;

export interface WardenErrorOptions {
  readonly details?: ErrorDetails;
  readonly cause?: unknown;
}

/**
 * Earlier names of codes: one failure has one code, and a code once answered stays accepted
 * under its earlier name (codes are never renamed out from under a client). Keyed by the earlier
 * name; listed in docs/errors.md beside the code it names.
 */
export const CODE_ALIASES: Readonly<Record<string, string>> = {
  "invalid-invocation-id": "invocation-id-invalid",
};

/** The code a code names today: itself, or the code an earlier name stands for. */
export function canonicalCode(code: string): string {
  return Object.hasOwn(CODE_ALIASES, code) ? (CODE_ALIASES[code] ?? code) : code;
}

export class WardenError extends Error {
  override readonly name: string = "WardenError";
  /** Stable machine-readable code, e.g. `unsafe-storage-symlink`. */
  readonly code: string;
  /** HTTP status the server answers with. */
  readonly status: number;
  readonly details: ErrorDetails;

  constructor(code: string, message: string, status = 500, options: WardenErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.code = code;
    this.status = status;
    this.details = options.details ?? {};
  }

  /** Whether this error is the failure `code` names, by its code or an earlier name of it. */
  hasCode(code: string): boolean {
    return canonicalCode(code) === canonicalCode(this.code);
  }

  /**
   * The same failure with more details: same class, code, status, message, cause and stack (a
   * caller that adds where it happened, e.g. a blob pack's frame, keeps the error's own members).
   */
  withDetails(extra: ErrorDetails): this {
    const copy = Object.create(Object.getPrototypeOf(this) as object) as this;
    Object.defineProperties(copy, Object.getOwnPropertyDescriptors(this));
    Object.defineProperty(copy, "details", { value: { ...this.details, ...extra }, enumerable: true, writable: false, configurable: true });
    return copy;
  }

  toJSON(): { code: string; message: string; status: number; details: ErrorDetails } {
    return { code: this.code, message: this.message, status: this.status, details: this.details };
  }
}

/** The input is malformed or breaks a documented rule (400/422 family). */
export class ValidationError extends WardenError {
  override readonly name: string = "ValidationError";
  constructor(code: string, message: string, options: WardenErrorOptions & { status?: number } = {}) {
    super(code, message, options.status ?? 400, options);
  }
}

/** The request contradicts what is already stored (409/422 family). Nothing was written. */
export class ConflictError extends WardenError {
  override readonly name: string = "ConflictError";
  constructor(code: string, message: string, options: WardenErrorOptions & { status?: number } = {}) {
    super(code, message, options.status ?? 409, options);
  }
}

export class NotFoundError extends WardenError {
  override readonly name: string = "NotFoundError";
  constructor(code: string, message: string, options: WardenErrorOptions = {}) {
    super(code, message, 404, options);
  }
}

/** A size or capacity limit was reached (G11). New work is refused; nothing was deleted. */
export class LimitError extends WardenError {
  override readonly name: string = "LimitError";
  constructor(code: string, message: string, options: WardenErrorOptions & { status?: number } = {}) {
    super(code, message, options.status ?? 413, options);
  }
}

/** Stored state is not safe to use (G10): symlink, hard link, foreign owner, loose mode, bad name. */
export class UnsafeStorageError extends WardenError {
  override readonly name: string = "UnsafeStorageError";
  readonly path: string;
  constructor(code: string, path: string, rule: string, options: WardenErrorOptions = {}) {
    super(code, `unsafe storage at ${path}: ${rule}`, 500, {
      ...options,
      details: { path, rule, ...(options.details ?? {}) },
    });
    this.path = path;
  }
}

/** Stored or received bytes do not match their digest, length or signature (G5, G8). */
export class IntegrityError extends WardenError {
  override readonly name: string = "IntegrityError";
  constructor(code: string, message: string, options: WardenErrorOptions & { status?: number } = {}) {
    super(code, message, options.status ?? 422, options);
  }
}

/** The backing store failed (I/O error, database gone). The operation may be retried. */
export class StorageError extends WardenError {
  override readonly name: string = "StorageError";
  constructor(code: string, message: string, options: WardenErrorOptions = {}) {
    super(code, message, 503, options);
  }
}

/** A caller is not allowed to do this (401/403). */
export class AuthError extends WardenError {
  override readonly name: string = "AuthError";
  constructor(code: "unauthorized" | "forbidden", message: string) {
    super(code, message, code === "unauthorized" ? 401 : 403);
  }
}

export function isWardenError(value: unknown): value is WardenError {
  return value instanceof WardenError;
}

/** Node's errno code of an fs error, or undefined. */
export function errnoCode(error: unknown): string | undefined {
  if (typeof error === "object" && error !== null && "code" in error) {
    const code = (error as { code: unknown }).code;
    return typeof code === "string" ? code : undefined;
  }
  return undefined;
}

/**
 * Codes of storage with no room left: a file system's or quota's errno, and SQLite's own code for
 * a database that could not grow (better-sqlite3 sets it as the error's `code`). Every layer that
 * maps raw failures (the delivery service's guard included) then answers 507 capacity-exhausted.
 */
const FULL_ERRNOS = new Set(["ENOSPC", "EDQUOT", "SQLITE_FULL"]);

export function isStorageFull(error: unknown): boolean {
  const code = errnoCode(error);
  return code !== undefined && FULL_ERRNOS.has(code);
}

/**
 * Storage with no room left, on any backend and for any write (a database, a chunk, a blob): new
 * work is refused as exhausted capacity (G11), and what the failed write began was rolled back or
 * dropped, so nothing stored was deleted or half-written.
 */
export function storageFull(doing: string, cause: unknown): LimitError {
  const detail = cause instanceof Error ? ` (${cause.message})` : "";
  return new LimitError("capacity-exhausted", `could not ${doing}: storage is full${detail}`, { status: 507, cause });
}
