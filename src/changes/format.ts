/**
 * The change-set format (DESIGN.md "Change sets"): a canonical-JSON manifest naming each changed
 * path with its old and new digests, plus blobs of the new contents and of a `git diff --binary`
 * patch. This module only parses, checks and serializes; it touches no file and runs no git, so the
 * node that writes a change set and any reader (the API, `warden apply`, the console) share one
 * definition of what a valid one is.
 */
import { canonicalJson } from "../core/canonical.js";
import { isDigest, sha256Digest, type Digest } from "../core/digest.js";
import { IntegrityError, ValidationError, type WardenErrorOptions } from "../core/errors.js";
import { firstDuplicateName } from "../core/json-duplicates.js";

export const CHANGE_SET_VERSION = 1 as const;
/** At most this many files in one change set. */
export const MAX_CHANGE_SET_FILES = 65_536;
/** At most this many bytes of manifest. */
export const MAX_MANIFEST_BYTES = 32 * 1024 * 1024;
/** The `files` list a `run.changes` event carries is cut to keep the event within this (the journal entry limit is 1 MiB). */
export const RUN_CHANGES_EVENT_BYTES = 256 * 1024;
const MAX_PATH_BYTES = 4096;

export type ChangeStatus = "added" | "modified" | "deleted" | "renamed";
export const CHANGE_STATUSES: readonly ChangeStatus[] = ["added", "modified", "deleted", "renamed"];
export type GitMode = "100644" | "100755" | "120000" | "160000";
export const GIT_MODES: readonly GitMode[] = ["100644", "100755", "120000", "160000"];
export const SYMLINK_MODE: GitMode = "120000";
export const GITLINK_MODE: GitMode = "160000";

export interface ChangedFile {
  readonly path: string;
  /** the path before the run; non-null exactly when `status` is `renamed` */
  readonly old_path: string | null;
  readonly status: ChangeStatus;
  readonly old_mode: GitMode | null;
  readonly new_mode: GitMode | null;
  /** git's object ids (hex), for cross-checking with git */
  readonly old_oid: string | null;
  readonly new_oid: string | null;
  readonly old_sha256: Digest | null;
  readonly new_sha256: Digest | null;
  readonly old_size: number | null;
  readonly new_size: number | null;
  readonly binary: boolean;
  readonly lines_added: number | null;
  readonly lines_deleted: number | null;
  /** the new side's target when `new_mode` is `120000` */
  readonly symlink_target: string | null;
}

export interface ChangeSetManifest {
  readonly v: typeof CHANGE_SET_VERSION;
  /** the commit id the run started from (lowercase hex) */
  readonly base: string;
  readonly files: readonly ChangedFile[];
  /** the `git diff --binary` patch, a blob like the others */
  readonly patch: { readonly sha256: Digest; readonly size: number };
}

/** A file as `run.changes` lists it. */
export interface RunChangesFile {
  readonly path: string;
  readonly old_path: string | null;
  readonly status: ChangeStatus;
  readonly old_sha256: Digest | null;
  readonly new_sha256: Digest | null;
  readonly lines_added: number | null;
  readonly lines_deleted: number | null;
}

export interface RunChangesRecorded {
  readonly type: "run.changes";
  readonly base: string;
  readonly change_set: Digest;
  readonly no_changes: boolean;
  readonly files_total: number;
  readonly files: readonly RunChangesFile[];
}
export interface RunChangesFailed {
  readonly type: "run.changes";
  readonly base: string;
  readonly error: { readonly code: string; readonly detail: string };
}
export type RunChangesEvent = RunChangesRecorded | RunChangesFailed;

/** The manifest's stored bytes break a rule of the format. */
export class ChangeSetMalformedError extends IntegrityError {
  override readonly name: string = "ChangeSetMalformedError";
  constructor(message: string, options: WardenErrorOptions = {}) {
    super("change-set-malformed", `change set malformed: ${message}`, { ...options, status: 500 });
  }
}

const COMMIT_RE = /^(?:[0-9a-f]{40}|[0-9a-f]{64})$/;
export function isCommitId(value: unknown): value is string {
  return typeof value === "string" && COMMIT_RE.test(value);
}

/** A path as a change set may name it: relative, normalized, never into a `.git` directory. */
export function changePathProblem(path: string): string | undefined {
  const bytes = Buffer.byteLength(path, "utf8");
  if (bytes === 0 || bytes > MAX_PATH_BYTES) return `is ${bytes} bytes (1–${MAX_PATH_BYTES})`;
  if (path.includes("\0")) return "holds NUL";
  if (/\p{Cs}/u.test(path)) return "is not Unicode text";
  for (const segment of path.split("/")) {
    if (segment === "" || segment === "." || segment === "..") return `has a segment ${JSON.stringify(segment)}`;
    if (segment.toLowerCase() === ".git") return "names a .git directory";
  }
  return undefined;
}

type Fields = Record<string, unknown>;

function object(value: unknown, what: string): Fields {
  if (typeof value !== "object" || value === null || Array.isArray(value)) throw new ChangeSetMalformedError(`${what} must be a JSON object`);
  return value as Fields;
}

function exactly(obj: Fields, names: readonly string[], what: string): void {
  for (const name of names) if (!Object.hasOwn(obj, name)) throw new ChangeSetMalformedError(`${what}: missing field ${name}`);
  for (const name of Object.keys(obj)) {
    if (!names.includes(name)) throw new ChangeSetMalformedError(`${what}: unknown field ${JSON.stringify(name)}`);
  }
}

function count(value: unknown): value is number {
  return typeof value === "number" && Number.isSafeInteger(value) && value >= 0;
}

const FILE_FIELDS = [
  "path", "old_path", "status", "old_mode", "new_mode", "old_oid", "new_oid", "old_sha256", "new_sha256",
  "old_size", "new_size", "binary", "lines_added", "lines_deleted", "symlink_target",
] as const;

function checkSide(f: Fields, side: "old" | "new", present: boolean, what: string): void {
  const mode = f[`${side}_mode`];
  const oid = f[`${side}_oid`];
  const sha = f[`${side}_sha256`];
  const size = f[`${side}_size`];
  if (!present) {
    if (mode !== null || oid !== null || sha !== null || size !== null) throw new ChangeSetMalformedError(`${what}: ${side}_* must be null for ${String(f.status)}`);
    return;
  }
  if (!GIT_MODES.includes(mode as GitMode)) throw new ChangeSetMalformedError(`${what}.${side}_mode must be one of ${GIT_MODES.join(", ")}`);
  if (!isCommitId(oid)) throw new ChangeSetMalformedError(`${what}.${side}_oid must be a git object id`);
  if (mode === GITLINK_MODE) {
    if (sha !== null || size !== null) throw new ChangeSetMalformedError(`${what}: a submodule entry has no ${side}_sha256 or ${side}_size`);
    return;
  }
  if (!isDigest(sha)) throw new ChangeSetMalformedError(`${what}.${side}_sha256 must be sha256: and 64 lowercase hex`);
  if (!count(size)) throw new ChangeSetMalformedError(`${what}.${side}_size must be a byte count`);
}

function checkFile(value: unknown, index: number): ChangedFile {
  const what = `files[${index}]`;
  const f = object(value, what);
  exactly(f, FILE_FIELDS, what);
  if (typeof f.path !== "string") throw new ChangeSetMalformedError(`${what}.path must be a string`);
  const pathProblem = changePathProblem(f.path);
  if (pathProblem !== undefined) throw new ChangeSetMalformedError(`${what}.path ${pathProblem}`);
  if (!CHANGE_STATUSES.includes(f.status as ChangeStatus)) throw new ChangeSetMalformedError(`${what}.status must be one of ${CHANGE_STATUSES.join(", ")}`);
  if (f.status === "renamed") {
    if (typeof f.old_path !== "string") throw new ChangeSetMalformedError(`${what}.old_path must be a string for a rename`);
    const oldProblem = changePathProblem(f.old_path);
    if (oldProblem !== undefined) throw new ChangeSetMalformedError(`${what}.old_path ${oldProblem}`);
    if (f.old_path === f.path) throw new ChangeSetMalformedError(`${what}: a rename to the same path`);
  } else if (f.old_path !== null) {
    throw new ChangeSetMalformedError(`${what}.old_path must be null unless renamed`);
  }
  checkSide(f, "old", f.status !== "added", what);
  checkSide(f, "new", f.status !== "deleted", what);
  if (typeof f.binary !== "boolean") throw new ChangeSetMalformedError(`${what}.binary must be a boolean`);
  const gitlink = f.old_mode === GITLINK_MODE || f.new_mode === GITLINK_MODE;
  if (f.binary || gitlink) {
    if (f.lines_added !== null || f.lines_deleted !== null) throw new ChangeSetMalformedError(`${what}: line counts must be null for a binary file or a submodule`);
  } else if (!count(f.lines_added) || !count(f.lines_deleted)) {
    throw new ChangeSetMalformedError(`${what}.lines_added and lines_deleted must be counts`);
  }
  if (f.new_mode === SYMLINK_MODE) {
    if (typeof f.symlink_target !== "string" || f.symlink_target.length === 0) throw new ChangeSetMalformedError(`${what}.symlink_target must be the link's target`);
    if (Buffer.byteLength(f.symlink_target, "utf8") !== f.new_size || sha256Digest(f.symlink_target) !== f.new_sha256) {
      throw new ChangeSetMalformedError(`${what}.symlink_target does not match new_sha256 and new_size`);
    }
  } else if (f.symlink_target !== null) {
    throw new ChangeSetMalformedError(`${what}.symlink_target must be null unless new_mode is ${SYMLINK_MODE}`);
  }
  return f as unknown as ChangedFile;
}

/** Checks a parsed manifest against every rule of the format; returns it typed. */
export function checkManifest(value: unknown): ChangeSetManifest {
  const m = object(value, "manifest");
  exactly(m, ["v", "base", "files", "patch"], "manifest");
  if (m.v !== CHANGE_SET_VERSION) throw new ChangeSetMalformedError(`v must be ${CHANGE_SET_VERSION}`);
  if (!isCommitId(m.base)) throw new ChangeSetMalformedError("base must be a commit id (40 or 64 lowercase hex)");
  if (!Array.isArray(m.files)) throw new ChangeSetMalformedError("files must be a list");
  if (m.files.length > MAX_CHANGE_SET_FILES) throw new ChangeSetMalformedError(`${m.files.length} files, over ${MAX_CHANGE_SET_FILES}`);
  let previous: Buffer | undefined;
  m.files.forEach((file, i) => {
    const f = checkFile(file, i);
    const key = Buffer.from(f.path, "utf8");
    if (previous !== undefined && Buffer.compare(previous, key) >= 0) {
      throw new ChangeSetMalformedError(`files[${i}].path is not after the previous path (UTF-8 byte order, no repeats)`);
    }
    previous = key;
  });
  const patch = object(m.patch, "patch");
  exactly(patch, ["sha256", "size"], "patch");
  if (!isDigest(patch.sha256)) throw new ChangeSetMalformedError("patch.sha256 must be sha256: and 64 lowercase hex");
  if (!count(patch.size)) throw new ChangeSetMalformedError("patch.size must be a byte count");
  return m as unknown as ChangeSetManifest;
}

/** The stored bytes and digest of a manifest; refuses one that breaks the format. */
export function serializeManifest(manifest: ChangeSetManifest): { bytes: Buffer; digest: Digest } {
  checkManifest(JSON.parse(JSON.stringify(manifest)) as unknown);
  const bytes = Buffer.from(canonicalJson(manifest), "utf8");
  if (bytes.length > MAX_MANIFEST_BYTES) throw new ValidationError("change-set-too-large", `change set manifest is ${bytes.length} bytes, over ${MAX_MANIFEST_BYTES}`, { status: 413 });
  return { bytes, digest: sha256Digest(bytes) };
}

/**
 * Parses a stored manifest and checks it is the one `expected` names: valid JSON with no
 * duplicate names, every rule of the format, the canonical bytes exactly, and the digest.
 */
export function parseManifest(bytes: Uint8Array, expected: Digest): ChangeSetManifest {
  const actual = sha256Digest(bytes);
  if (actual !== expected) {
    throw new IntegrityError("change-set-digest-mismatch", `change set bytes hash to ${actual}, not ${expected}`, { status: 500, details: { expected, actual } });
  }
  if (bytes.length > MAX_MANIFEST_BYTES) throw new ChangeSetMalformedError(`${bytes.length} bytes, over ${MAX_MANIFEST_BYTES}`);
  const text = Buffer.from(bytes).toString("utf8");
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    throw new ChangeSetMalformedError("not JSON", { cause: error });
  }
  const duplicate = firstDuplicateName(text);
  if (duplicate !== undefined) throw new ChangeSetMalformedError(`the name ${JSON.stringify(duplicate)} occurs twice in one object`);
  const manifest = checkManifest(value);
  if (canonicalJson(value) !== text) throw new ChangeSetMalformedError("bytes are not the canonical (RFC 8785) form");
  return manifest;
}

/** Checks a blob's bytes against the digest a manifest names for them. */
export function checkBlob(bytes: Uint8Array, digest: Digest, size?: number): void {
  const actual = sha256Digest(bytes);
  if (actual !== digest || (size !== undefined && bytes.length !== size)) {
    throw new IntegrityError("change-set-blob-tampered", `change set blob ${digest} holds other bytes (${actual}, ${bytes.length} bytes)`, { status: 500, details: { digest, actual } });
  }
}

/** Every blob a change set stores: each non-null new side's bytes and the patch, unique. */
export function manifestBlobs(manifest: ChangeSetManifest): { digest: Digest; size: number }[] {
  const out = new Map<Digest, number>();
  for (const f of manifest.files) {
    if (f.new_sha256 !== null && f.new_size !== null) out.set(f.new_sha256, f.new_size);
  }
  out.set(manifest.patch.sha256, manifest.patch.size);
  return [...out].map(([digest, size]) => ({ digest, size }));
}

/** The `run.changes` event of a stored change set, its `files` cut to fit RUN_CHANGES_EVENT_BYTES. */
export function runChangesEvent(manifest: ChangeSetManifest, digest: Digest): RunChangesRecorded {
  const all: RunChangesFile[] = manifest.files.map((f) => ({
    path: f.path, old_path: f.old_path, status: f.status, old_sha256: f.old_sha256, new_sha256: f.new_sha256,
    lines_added: f.lines_added, lines_deleted: f.lines_deleted,
  }));
  const event = (files: RunChangesFile[]): RunChangesRecorded => ({
    type: "run.changes", base: manifest.base, change_set: digest, no_changes: manifest.files.length === 0,
    files_total: manifest.files.length, files,
  });
  const whole = event(all);
  if (Buffer.byteLength(canonicalJson(whole)) <= RUN_CHANGES_EVENT_BYTES) return whole;
  // Sizes are additive per file (one comma each), so one pass finds the longest prefix that fits.
  let size = Buffer.byteLength(canonicalJson(event([])));
  let n = 0;
  for (const f of all) {
    size += Buffer.byteLength(canonicalJson(f)) + (n === 0 ? 0 : 1);
    if (size > RUN_CHANGES_EVENT_BYTES) break;
    n++;
  }
  return event(all.slice(0, n));
}

/** A blob the manifest names is not where it should be: the change set cannot be read whole. */
export function blobMissing(digest: Digest, options: WardenErrorOptions = {}): IntegrityError {
  return new IntegrityError("change-set-blob-missing", `change set blob ${digest} is not stored`, { ...options, status: 500, details: { digest } });
}
