/**
 * Computes and stores a worktree's change set against its base (DESIGN.md "Change sets"): stage
 * everything into the worktree's own index, let git say what differs (raw, numstat, patch), hash
 * each new side's bytes as git stored them, store the blobs, then the manifest.
 */
import { sha256Digest } from "../core/digest.js";
import { isWardenError, ValidationError } from "../core/errors.js";
import { DEFAULT_LIMITS } from "../core/limits.js";
import { git, objectSizes, readObjects } from "./git.js";
import { runObjectsEnv, type Worktree } from "./worktrees.js";
import type { ChangeStore } from "./store.js";
import {
  changePathProblem,
  GITLINK_MODE,
  MAX_CHANGE_SET_FILES,
  SYMLINK_MODE,
  type ChangedFile,
  type ChangeSetManifest,
  type ChangeStatus,
  type GitMode,
} from "./format.js";
import type { Digest } from "../core/digest.js";

interface RawEntry {
  oldMode: string;
  newMode: string;
  oldOid: string;
  newOid: string;
  letter: string;
  path: string;
  oldPath: string | null;
}

const DIFF_COMMON = ["--cached", "-z", "-M", "--no-color", "--no-ext-diff", "--no-textconv", "--full-index"];

function utf8(bytes: Buffer, what: string): string {
  const text = bytes.toString("utf8");
  if (!Buffer.from(text, "utf8").equals(bytes)) {
    throw new ValidationError("change-set-path-not-utf8", `${what} ${JSON.stringify(text)} is not UTF-8: a change set cannot name it`, { status: 422 });
  }
  return text;
}

/** `git diff --raw -z`: `:<old mode> <new mode> <old oid> <new oid> <status>\0<path>\0[<new path>\0]`. */
function parseRaw(out: Buffer): RawEntry[] {
  const parts: Buffer[] = [];
  let at = 0;
  while (at < out.length) {
    const nul = out.indexOf(0, at);
    const end = nul === -1 ? out.length : nul;
    parts.push(out.subarray(at, end));
    at = end + 1;
  }
  const entries: RawEntry[] = [];
  for (let i = 0; i < parts.length; ) {
    const head = parts[i++]!.toString("latin1");
    if (!head.startsWith(":")) throw new ValidationError("git-output-unexpected", `git diff --raw: ${JSON.stringify(head.slice(0, 80))}`, { status: 500 });
    const [oldMode, newMode, oldOid, newOid, status] = head.slice(1).split(" ") as [string, string, string, string, string];
    const letter = status.charAt(0);
    const first = utf8(parts[i++]!, "path");
    if (letter === "R" || letter === "C") {
      const second = utf8(parts[i++]!, "path");
      entries.push({ oldMode, newMode, oldOid, newOid, letter, path: second, oldPath: first });
    } else {
      entries.push({ oldMode, newMode, oldOid, newOid, letter, path: first, oldPath: null });
    }
  }
  return entries;
}

/** `git diff --numstat -z`: `<added>\t<deleted>\t<path>\0` or, renamed, `<added>\t<deleted>\t\0<old>\0<new>\0`; by new path. */
function parseNumstat(out: Buffer): Map<string, { added: number; deleted: number } | "binary"> {
  const text = out.toString("utf8");
  const parts = text.split("\0");
  const counts = new Map<string, { added: number; deleted: number } | "binary">();
  for (let i = 0; i < parts.length; ) {
    const head = parts[i++]!;
    if (head === "") continue;
    const [a, d, path] = head.split("\t") as [string, string, string];
    let key = path;
    if (path === "") {
      i++; // the old path
      key = parts[i++]!;
    }
    counts.set(key, a === "-" ? "binary" : { added: Number(a), deleted: Number(d) });
  }
  return counts;
}

const ZERO_OID = /^0+$/;

/** How many blobs are written at once. */
const BLOB_BATCH = 16;

function status(letter: string): ChangeStatus {
  switch (letter) {
    case "A":
      return "added";
    case "D":
      return "deleted";
    case "R":
      return "renamed";
    default:
      // M (content or mode), T (type: file ↔ symlink ↔ submodule)
      return "modified";
  }
}

/**
 * What a run changed in `wt` against `base`, stored in `store`; the manifest and its digest. The
 * contents it reads are held in memory: `maxBytes` bounds them (both sides), and the patch to twice
 * that, checked from git's object sizes before any content is read.
 */
export async function computeChangeSet(wt: Worktree, base: string, store: ChangeStore, maxBytes = DEFAULT_LIMITS.changeSetBytes): Promise<{ manifest: ChangeSetManifest; digest: Digest }> {
  const env = runObjectsEnv(wt);
  const target = { gitDir: wt.adminDir, workTree: wt.path, env };
  // The worktree's index is the node's alone (the agent never sees the repository's .git).
  await git({ ...target, args: ["add", "--all", "--", "."] });
  const [raw, numstat] = await Promise.all([
    git({ ...target, args: ["diff", ...DIFF_COMMON, "--raw", "--no-abbrev", base, "--"] }),
    git({ ...target, args: ["diff", ...DIFF_COMMON, "--numstat", base, "--"] }),
  ]);
  const entries = parseRaw(raw);
  if (entries.length > MAX_CHANGE_SET_FILES) {
    throw new ValidationError("change-set-too-large", `the run changed ${entries.length} files, over ${MAX_CHANGE_SET_FILES}`, { status: 413 });
  }
  const counts = parseNumstat(numstat);
  const blobOids = entries.flatMap((e) => [
    ...(ZERO_OID.test(e.oldOid) || e.oldMode === GITLINK_MODE ? [] : [e.oldOid]),
    ...(ZERO_OID.test(e.newOid) || e.newMode === GITLINK_MODE ? [] : [e.newOid]),
  ]);
  const sizes = await objectSizes(wt.adminDir, blobOids, env);
  const total = [...sizes.values()].reduce((sum, n) => sum + n, 0);
  if (total > maxBytes) {
    throw new ValidationError("change-set-too-large", `the run's changed files hold ${total} bytes (both sides), over ${maxBytes} (limits.changeSetBytes)`, { status: 413 });
  }
  const patch = await git({
    ...target,
    args: ["diff", "--cached", "-M", "--binary", "--full-index", "--no-color", "--no-ext-diff", "--no-textconv", "--src-prefix=a/", "--dst-prefix=b/", base, "--"],
    maxOutputBytes: 2 * maxBytes,
  }).catch((error: unknown) => {
    if (isWardenError(error) && error.code === "git-output-too-large") {
      throw new ValidationError("change-set-too-large", `the run's patch is over ${2 * maxBytes} bytes (twice limits.changeSetBytes)`, { status: 413 });
    }
    throw error;
  });
  const objects = await readObjects(wt.adminDir, blobOids, env);
  const files: ChangedFile[] = [];
  const newBlobs: Buffer[] = [];
  for (const e of entries) {
    const st = status(e.letter);
    for (const p of [e.path, ...(e.oldPath === null ? [] : [e.oldPath])]) {
      const problem = changePathProblem(p);
      if (problem !== undefined) throw new ValidationError("change-set-path-invalid", `path ${JSON.stringify(p)} ${problem}`, { status: 422 });
    }
    const side = (present: boolean, mode: string, oid: string) => {
      if (!present) return { mode: null, oid: null, sha: null, size: null, bytes: undefined };
      if (mode === GITLINK_MODE) return { mode: mode as GitMode, oid, sha: null, size: null, bytes: undefined };
      const bytes = objects.get(oid)!;
      return { mode: mode as GitMode, oid, sha: sha256Digest(bytes), size: bytes.length, bytes };
    };
    const before = side(st !== "added", e.oldMode, e.oldOid);
    const after = side(st !== "deleted", e.newMode, e.newOid);
    const gitlink = before.mode === GITLINK_MODE || after.mode === GITLINK_MODE;
    const count = counts.get(e.path);
    const binary = count === "binary";
    const lines = gitlink || binary || count === undefined ? null : count;
    if (after.bytes !== undefined) newBlobs.push(after.bytes);
    files.push({
      path: e.path,
      old_path: st === "renamed" ? e.oldPath : null,
      status: st,
      old_mode: before.mode,
      new_mode: after.mode,
      old_oid: before.oid,
      new_oid: after.oid,
      old_sha256: before.sha,
      new_sha256: after.sha,
      old_size: before.size,
      new_size: after.size,
      binary,
      lines_added: lines === null ? null : lines.added,
      lines_deleted: lines === null ? null : lines.deleted,
      symlink_target: after.mode === SYMLINK_MODE && after.bytes !== undefined ? utf8(after.bytes, "symlink target") : null,
    });
  }
  files.sort((a, b) => Buffer.compare(Buffer.from(a.path, "utf8"), Buffer.from(b.path, "utf8")));
  // One after another, each blob waited for its own fsyncs (file and directory); in batches the
  // file system folds them into fewer commits (bounded: a change set may name 65,536 files, each an
  // open file). The manifest is still published only once every blob it names is durable.
  const patchDigest = await store.putBlob(patch);
  for (let i = 0; i < newBlobs.length; i += BLOB_BATCH) await Promise.all(newBlobs.slice(i, i + BLOB_BATCH).map((b) => store.putBlob(b)));
  const manifest: ChangeSetManifest = { v: 1, base, files, patch: { sha256: patchDigest, size: patch.length } };
  const { digest } = await store.putManifest(manifest);
  return { manifest, digest };
}

