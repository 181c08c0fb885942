/**
 * Applying a verified change set to a directory (DESIGN.md "Applying a change set"): every check
 * first — each new blob against its digest, each old side against the target's bytes and mode, no
 * path through a symlink or out of the root — and only then any write. No git is needed: the
 * manifest names every file's bytes by sha256, and the blobs are those bytes.
 */
import { createHash, randomBytes } from "node:crypto";
import * as fs from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { sha256Digest, type Digest } from "../core/digest.js";
import { ConflictError, ValidationError, errnoCode } from "../core/errors.js";
import { GITLINK_MODE, SYMLINK_MODE, checkBlob, type ChangeSetManifest, type ChangedFile, type GitMode } from "./format.js";

export interface ApplyOptions {
  /** the directory to change: a checkout of the change set's base */
  readonly root: string;
  /** the bytes of a blob the manifest names (checked here against the digest, whoever serves them) */
  readonly blob: (digest: Digest, size: number) => Promise<Uint8Array>;
}

export interface ApplyReport {
  readonly written: number;
  readonly removed: number;
  readonly files: readonly { readonly path: string; readonly old_path: string | null; readonly status: ChangedFile["status"] }[];
}

/** A file of the target, as git would record it: its mode and the sha256 of its bytes (a symlink: of its target). */
interface TargetFile {
  readonly mode: GitMode;
  readonly sha256: Digest;
}

function mismatch(path: string, why: string): ConflictError {
  return new ConflictError("apply-target-mismatch", `${path}: ${why}; the target is not the change set's base there, nothing was written`, { details: { path } });
}

function isDirectory(p: string): boolean | undefined {
  try {
    const st = fs.lstatSync(p);
    if (st.isSymbolicLink()) return false;
    return st.isDirectory();
  } catch (error) {
    if (errnoCode(error) === "ENOENT") return undefined;
    throw error;
  }
}

async function readTarget(root: string, path: string): Promise<TargetFile | undefined> {
  const full = join(root, path);
  let st: fs.Stats;
  try {
    st = fs.lstatSync(full);
  } catch (error) {
    if (errnoCode(error) === "ENOENT" || errnoCode(error) === "ENOTDIR") return undefined;
    throw error;
  }
  if (st.isSymbolicLink()) return { mode: SYMLINK_MODE, sha256: sha256Digest(fs.readlinkSync(full, { encoding: "buffer" })) };
  if (!st.isFile()) throw mismatch(path, "is not a file");
  const hash = createHash("sha256");
  for await (const chunk of fs.createReadStream(full)) hash.update(chunk as Buffer);
  return { mode: (st.mode & 0o100) !== 0 ? "100755" : "100644", sha256: `sha256:${hash.digest("hex")}` };
}

/**
 * Every existing ancestor of `path` under the root must be a real directory (a symlink there
 * would carry the write outside the root), or a file this change set removes.
 */
function checkAncestors(root: string, path: string, removed: ReadonlySet<string>): void {
  const segments = path.split("/");
  for (let i = 1; i < segments.length; i++) {
    const prefix = segments.slice(0, i).join("/");
    const dir = isDirectory(join(root, prefix));
    if (dir === undefined) return;
    if (dir) continue;
    if (removed.has(prefix)) return;
    if (fs.lstatSync(join(root, prefix)).isSymbolicLink()) {
      throw new ConflictError("apply-path-escapes", `${path}: ${prefix} is a symlink in the target; nothing is written through one`, { details: { path, at: prefix } });
    }
    throw mismatch(path, `${prefix} is a file, not a directory`);
  }
}

/** Checks the target against the manifest's old sides (nothing written). */
async function checkTarget(root: string, manifest: ChangeSetManifest): Promise<void> {
  const removed = new Set<string>();
  for (const f of manifest.files) {
    if (f.old_mode === GITLINK_MODE || f.new_mode === GITLINK_MODE) {
      throw new ValidationError("apply-submodule-unsupported", `${f.path}: a submodule entry (mode ${GITLINK_MODE}) is not applied by warden; update the submodule with git`, { status: 422, details: { path: f.path } });
    }
    if (f.status === "deleted") removed.add(f.path);
    if (f.status === "renamed" && f.old_path !== null) removed.add(f.old_path);
  }
  for (const f of manifest.files) {
    const oldPath = f.status === "renamed" ? f.old_path! : f.path;
    if (f.status !== "added") {
      checkAncestors(root, oldPath, new Set());
      const found = await readTarget(root, oldPath);
      if (found === undefined) throw mismatch(oldPath, "is missing");
      if (found.mode !== f.old_mode) throw mismatch(oldPath, `has mode ${found.mode}, the change set's base ${f.old_mode}`);
      if (found.sha256 !== f.old_sha256) throw mismatch(oldPath, `holds ${found.sha256}, the change set's base ${f.old_sha256}`);
    }
    if (f.status === "added" || f.status === "renamed") {
      checkAncestors(root, f.path, removed);
      if (!removed.has(f.path) && (await readTargetExists(root, f.path))) {
        throw new ConflictError("apply-target-exists", `${f.path}: the change set adds it, and the target already has it; nothing was written`, { details: { path: f.path } });
      }
    }
  }
}

async function readTargetExists(root: string, path: string): Promise<boolean> {
  try {
    fs.lstatSync(join(root, path));
    return true;
  } catch (error) {
    if (errnoCode(error) === "ENOENT" || errnoCode(error) === "ENOTDIR") return false;
    throw error;
  }
}

function fsyncDir(dir: string): void {
  const fd = fs.openSync(dir, "r");
  try {
    fs.fsyncSync(fd);
  } finally {
    fs.closeSync(fd);
  }
}

/** Removes directories left empty by a removal, up to (not including) the root. */
function pruneEmptyDirs(root: string, path: string): void {
  let dir = dirname(path);
  while (dir !== "." && dir !== "") {
    try {
      fs.rmdirSync(join(root, dir));
    } catch {
      return; // not empty (or already gone): stop here
    }
    dir = dirname(dir);
  }
}

/**
 * Applies `manifest` (already checked against the digest the journal signs) to `options.root`.
 * Order: the target's old sides, then every new blob fetched and checked into a private staging
 * directory; only when all of that holds is the target changed — removals, then each new file
 * written beside its place, fsynced and renamed over it, then its directory fsynced.
 */
export async function applyChangeSet(manifest: ChangeSetManifest, options: ApplyOptions): Promise<ApplyReport> {
  const root = fs.realpathSync(options.root);
  if (!fs.statSync(root).isDirectory()) throw new ValidationError("apply-target-invalid", `${options.root} is not a directory`);
  await checkTarget(root, manifest);
  const staging = fs.mkdtempSync(join(tmpdir(), "warden-apply-"));
  try {
    const staged = new Map<Digest, string>();
    for (const f of manifest.files) {
      if (f.new_sha256 === null || f.new_mode === SYMLINK_MODE || staged.has(f.new_sha256)) continue;
      const bytes = await options.blob(f.new_sha256, f.new_size ?? 0);
      checkBlob(bytes, f.new_sha256, f.new_size ?? undefined);
      const file = join(staging, String(staged.size));
      fs.writeFileSync(file, bytes, { mode: 0o600 });
      staged.set(f.new_sha256, file);
    }
    let removed = 0;
    let written = 0;
    for (const f of manifest.files) {
      const gone = f.status === "deleted" ? f.path : f.status === "renamed" ? f.old_path : null;
      if (gone === null) continue;
      fs.unlinkSync(join(root, gone));
      fsyncDir(dirname(join(root, gone)));
      pruneEmptyDirs(root, gone);
      removed++;
    }
    for (const f of manifest.files) {
      if (f.status === "deleted" || f.new_mode === null) continue;
      const full = join(root, f.path);
      fs.mkdirSync(dirname(full), { recursive: true });
      const temp = join(dirname(full), `.warden-apply-${randomBytes(6).toString("hex")}`);
      if (f.new_mode === SYMLINK_MODE) {
        fs.symlinkSync(f.symlink_target!, temp);
      } else {
        fs.copyFileSync(staged.get(f.new_sha256!)!, temp);
        fs.chmodSync(temp, f.new_mode === "100755" ? 0o755 : 0o644);
        const fd = fs.openSync(temp, "r");
        try {
          fs.fsyncSync(fd);
        } finally {
          fs.closeSync(fd);
        }
      }
      fs.renameSync(temp, full);
      fsyncDir(dirname(full));
      written++;
    }
    return { written, removed, files: manifest.files.map((f) => ({ path: f.path, old_path: f.old_path, status: f.status })) };
  } finally {
    fs.rmSync(staging, { recursive: true, force: true });
  }
}
