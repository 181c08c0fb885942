/**
 * The secure filesystem every backend stores through (G10). Rules, enforced on every open:
 * - directories: real directories (never symlinks), owned by the effective user, mode 0700 exactly
 *   in group/other bits (no bit of 0o077 set);
 * - files: opened with O_NOFOLLOW, then checked on the open descriptor (fstat, so a swap between
 *   check and use cannot slip through): regular, owned by us, no group/other bits, exactly one
 *   link, within a size bound;
 * - writes are durable: data fsynced, then the parent directory fsynced;
 * - publication is create-new: a target that exists is never overwritten.
 * Every refusal is an UnsafeStorageError naming the path and the rule, and nothing is modified.
 */
import * as fs from "node:fs";
import * as fsp from "node:fs/promises";
import { randomBytes } from "node:crypto";
import { basename, dirname, join, resolve } from "node:path";
import { UnsafeStorageError, StorageError, LimitError, errnoCode } from "../core/errors.js";

const { O_NOFOLLOW, O_DIRECTORY, O_RDONLY, O_WRONLY, O_RDWR, O_CREAT, O_EXCL, O_APPEND } = fs.constants;

export const PRIVATE_DIR_MODE = 0o700;
export const PRIVATE_FILE_MODE = 0o600;
const STICKY_BIT = 0o1000;

// geteuid is a system call, and every private file open checks ownership with it. warden never
// changes its uid, so the first answer stays right for the life of the process.
let cachedEuid: number | undefined;
function euid(): number {
  cachedEuid ??= typeof process.geteuid === "function" ? process.geteuid() : -1;
  return cachedEuid;
}

/** Checks a directory's lstat result against the private-directory rules. */
export function checkDirStats(path: string, st: fs.Stats): void {
  if (st.isSymbolicLink()) throw new UnsafeStorageError("unsafe-storage-symlink", path, "is a symbolic link");
  if (!st.isDirectory()) throw new UnsafeStorageError("unsafe-storage-not-directory", path, "is not a directory");
  checkOwnerAndMode(path, st, "700");
}

/** Ours, and nothing for group or other: the rule shared by private files and directories. */
function checkOwnerAndMode(path: string, st: fs.Stats, wanted: "600" | "700"): void {
  if (euid() >= 0 && st.uid !== euid()) {
    throw new UnsafeStorageError("unsafe-storage-owner", path, `owned by uid ${st.uid}, not ${euid()}`);
  }
  if ((st.mode & 0o077) !== 0) {
    throw new UnsafeStorageError(
      "unsafe-storage-mode",
      path,
      `mode ${(st.mode & 0o777).toString(8)} grants group/other access (want ${wanted})`,
    );
  }
}

/** Checks a file's stat result (from fstat of an O_NOFOLLOW descriptor, or lstat). */
export function checkFileStats(path: string, st: fs.Stats, maxBytes?: number): void {
  if (st.isSymbolicLink()) throw new UnsafeStorageError("unsafe-storage-symlink", path, "is a symbolic link");
  if (!st.isFile()) throw new UnsafeStorageError("unsafe-storage-not-regular", path, "is not a regular file");
  checkOwnerAndMode(path, st, "600");
  if (st.nlink !== 1) {
    throw new UnsafeStorageError("unsafe-storage-hard-link", path, `has ${st.nlink} hard links (want exactly 1)`);
  }
  if (maxBytes !== undefined && st.size > maxBytes) {
    throw new LimitError("file-too-large", `${path} is ${st.size} bytes, over the limit of ${maxBytes}`, {
      details: { path, size: st.size, limit: maxBytes },
      status: 500,
    });
  }
}

/** Maps an fs error from an O_NOFOLLOW open to a typed error. ELOOP means a symlink was planted. */
function openError(path: string, error: unknown): Error {
  const code = errnoCode(error);
  if (code === "EEXIST" && isSymlink(path)) {
    // O_CREAT|O_EXCL refuses any existing name, a planted symlink included: say which it was.
    return new UnsafeStorageError("unsafe-storage-symlink", path, "is a symbolic link");
  }
  if (code === "ELOOP") return new UnsafeStorageError("unsafe-storage-symlink", path, "is a symbolic link");
  if (code === "ENOTDIR") return new UnsafeStorageError("unsafe-storage-not-directory", path, "a parent is not a directory");
  return error instanceof Error ? error : new StorageError("storage-io", String(error));
}

function isSymlink(path: string): boolean {
  try {
    return fs.lstatSync(path).isSymbolicLink();
  } catch {
    return false;
  }
}

/**
 * Makes sure `path` is a private directory. Creates it (mode 0700, parents too when `recursive`)
 * when missing and `create` is set; an existing directory is validated, never chmod-ed.
 */
export function ensurePrivateDirSync(path: string, options: { create?: boolean; recursive?: boolean } = {}): void {
  let st: fs.Stats;
  try {
    st = fs.lstatSync(path);
  } catch (error) {
    if (errnoCode(error) !== "ENOENT" || options.create === false) throw openError(path, error);
    try {
      fs.mkdirSync(path, { mode: PRIVATE_DIR_MODE, recursive: options.recursive ?? false });
    } catch (mkdirError) {
      if (errnoCode(mkdirError) !== "EEXIST") throw openError(path, options.recursive === true ? realMkdirError(path, mkdirError) : mkdirError);
    }
    st = fs.lstatSync(path);
    if (st.isDirectory() && (st.mode & 0o777) !== PRIVATE_DIR_MODE && st.uid === euid()) {
      // mkdir applies the umask; the directory is ours and brand new, so fixing its mode is safe.
      fs.chmodSync(path, PRIVATE_DIR_MODE);
      st = fs.lstatSync(path);
    }
    if (!options.recursive) syncDirSync(dirname(path));
  }
  checkDirStats(path, st);
}

/**
 * Node's recursive mkdir reports ENOENT for every failure it meets below an existing directory
 * that is not EACCES, EPERM or ENOTDIR (EROFS, ENOSPC, EDQUOT…): a home on a read-only or full file system
 * would read "no such file". One plain mkdir under the nearest existing ancestor names the cause.
 */
function realMkdirError(path: string, error: unknown): unknown {
  if (errnoCode(error) !== "ENOENT") return error;
  let child = path;
  let parent = dirname(child);
  while (parent !== child && !fs.existsSync(parent)) {
    child = parent;
    parent = dirname(child);
  }
  try {
    fs.mkdirSync(child, { mode: PRIVATE_DIR_MODE });
    fs.rmdirSync(child); // only a probe: the caller's mkdir failed for another reason
  } catch (probeError) {
    if (errnoCode(probeError) !== "EEXIST") return probeError;
  }
  return error;
}

export async function ensurePrivateDir(path: string, options: { create?: boolean; recursive?: boolean } = {}): Promise<void> {
  ensurePrivateDirSync(path, options);
}

/**
 * Checks that nobody but us and root can replace `path` by renaming a directory above it: each
 * existing ancestor (by name, and where symlinks lead) must be owned by us or root, and writable
 * by group or others only with the sticky bit (as /tmp is). A state directory under a directory
 * another user controls can be renamed away and replaced while the node runs, and every later
 * write by path then lands in that user's directory (OpenSSH's StrictModes rule). Nothing is
 * created or modified.
 */
export function checkAncestorsSync(path: string): void {
  const lexical: string[] = [];
  for (let dir = dirname(resolve(path)); ; dir = dirname(dir)) {
    lexical.push(dir);
    if (dirname(dir) === dir) break;
  }
  const existing = lexical.find((dir) => fs.existsSync(dir));
  const real: string[] = [];
  if (existing !== undefined) {
    for (let dir = fs.realpathSync(existing); ; dir = dirname(dir)) {
      real.push(dir);
      if (dirname(dir) === dir) break;
    }
  }
  for (const dir of new Set([...lexical, ...real])) {
    let st: fs.Stats;
    try {
      st = fs.statSync(dir);
    } catch (error) {
      if (errnoCode(error) === "ENOENT") continue;
      throw openError(dir, error);
    }
    if (euid() >= 0 && st.uid !== 0 && st.uid !== euid() && !unmappedOwner(st.uid)) {
      throw new UnsafeStorageError("unsafe-storage-ancestor-owner", dir, `owned by uid ${st.uid}, who could replace ${path}`);
    }
    const othersWrite = (st.mode & 0o002) !== 0 || ((st.mode & 0o020) !== 0 && !isPrivateGroup(st.gid, st.uid));
    if (othersWrite && (st.mode & STICKY_BIT) === 0) {
      const rule = `mode ${(st.mode & 0o777).toString(8)} lets others rename ${path} away (no sticky bit)`;
      throw new UnsafeStorageError("unsafe-storage-ancestor-writable", dir, rule);
    }
  }
}

/**
 * True when `uid` is the overflow uid a user namespace shows for an owner it does not map: inside
 * one (bubblewrap, Flatpak, `unshare -r`, a rootless container), `/`, `/tmp` and `/home` are
 * owned by the host's root, which is never mapped there, and every home would be refused. Who that
 * owner is cannot be known from inside; it is taken as root (the mode check still applies).
 */
function unmappedOwner(uid: number): boolean {
  try {
    if (/^\s*0\s+0\s+4294967295\s*$/.test(fs.readFileSync("/proc/self/uid_map", "utf8"))) return false; // the initial namespace
    return uid === Number(fs.readFileSync("/proc/sys/kernel/overflowuid", "utf8").trim());
  } catch {
    return false;
  }
}

/**
 * True when `gid` is the private group of user `uid` (user-private groups, the default of Debian
 * and Ubuntu, where the login umask is 002 and every directory a user makes is group-writable):
 * it is that user's primary group, no other user has it as theirs, and it lists no other member.
 * Only /etc/passwd and /etc/group are read; a group found in neither is not known to be private.
 */
function isPrivateGroup(gid: number, uid: number): boolean {
  let passwd: string;
  let group: string;
  try {
    passwd = fs.readFileSync("/etc/passwd", "utf8");
    group = fs.readFileSync("/etc/group", "utf8");
  } catch {
    return false;
  }
  const users = passwd.split("\n").map((line) => line.split(":"));
  const owner = users.find((f) => f.length >= 4 && Number(f[2]) === uid);
  if (owner === undefined || Number(owner[3]) !== gid) return false;
  if (users.some((f) => f.length >= 4 && Number(f[3]) === gid && Number(f[2]) !== uid)) return false;
  const entry = group.split("\n").map((line) => line.split(":")).find((f) => f.length >= 4 && Number(f[2]) === gid);
  if (entry === undefined) return false;
  return entry[3]!.split(",").every((member) => member.trim() === "" || member.trim() === owner[0]);
}

/** Validates an existing directory without creating anything. */
export function checkPrivateDirSync(path: string): void {
  let st: fs.Stats;
  try {
    st = fs.lstatSync(path);
  } catch (error) {
    throw openError(path, error);
  }
  checkDirStats(path, st);
}

export function syncDirSync(path: string): void {
  const fd = fs.openSync(path, O_RDONLY | O_DIRECTORY);
  try {
    fs.fsyncSync(fd);
  } finally {
    fs.closeSync(fd);
  }
}

export async function syncDir(path: string): Promise<void> {
  const fh = await fsp.open(path, O_RDONLY | O_DIRECTORY);
  try {
    await fh.sync();
  } finally {
    await fh.close();
  }
}

/** `read-append`: reads anywhere, writes only at the end (a journal taken up again). */
export type OpenMode = "read" | "append" | "readwrite" | "read-append";

function flagsFor(mode: OpenMode): number {
  switch (mode) {
    case "read":
      return O_RDONLY | O_NOFOLLOW;
    case "append":
      return O_WRONLY | O_APPEND | O_NOFOLLOW;
    case "readwrite":
      return O_RDWR | O_NOFOLLOW;
    case "read-append":
      return O_RDWR | O_APPEND | O_NOFOLLOW;
  }
}

/** Opens an existing private file and validates it on the descriptor. */
export async function openPrivateFile(
  path: string,
  mode: OpenMode = "read",
  maxBytes?: number,
): Promise<fsp.FileHandle> {
  let fh: fsp.FileHandle;
  try {
    fh = await fsp.open(path, flagsFor(mode));
  } catch (error) {
    throw openError(path, error);
  }
  try {
    checkFileStats(path, await fh.stat(), maxBytes);
    return fh;
  } catch (error) {
    await fh.close();
    throw error;
  }
}

export function openPrivateFileSync(path: string, mode: OpenMode = "read", maxBytes?: number): number {
  return openCheckedSync(path, mode, maxBytes).fd;
}

/** openPrivateFileSync, also answering the descriptor's checked stats. */
function openCheckedSync(path: string, mode: OpenMode, maxBytes: number | undefined): { fd: number; size: number } {
  let fd: number;
  try {
    fd = fs.openSync(path, flagsFor(mode));
  } catch (error) {
    throw openError(path, error);
  }
  try {
    const st = fs.fstatSync(fd);
    checkFileStats(path, st, maxBytes);
    return { fd, size: st.size };
  } catch (error) {
    fs.closeSync(fd);
    throw error;
  }
}

/** Creates a new private file (0600, O_EXCL|O_NOFOLLOW): fails with EEXIST rather than reuse. */
export async function createPrivateFile(path: string, mode: "append" | "readwrite" = "readwrite"): Promise<fsp.FileHandle> {
  const access = mode === "append" ? O_WRONLY | O_APPEND : O_RDWR;
  try {
    return await fsp.open(path, access | O_CREAT | O_EXCL | O_NOFOLLOW, PRIVATE_FILE_MODE);
  } catch (error) {
    throw openError(path, error);
  }
}

/**
 * Like createPrivateFile, as a raw descriptor (no FileHandle bookkeeping, for hot paths that close
 * it themselves). "read-append" reads anywhere and writes only at the end.
 */
export function createPrivateFd(path: string, mode: "append" | "readwrite" | "read-append"): Promise<number> {
  const access = mode === "append" ? O_WRONLY | O_APPEND : mode === "read-append" ? O_RDWR | O_APPEND : O_RDWR;
  return new Promise((resolve, reject) => {
    fs.open(path, access | O_CREAT | O_EXCL | O_NOFOLLOW, PRIVATE_FILE_MODE, (error, fd) => {
      if (error === null) resolve(fd);
      else reject(openError(path, error));
    });
  });
}

export function createPrivateFileSync(path: string, mode: "append" | "readwrite" = "readwrite"): number {
  const access = mode === "append" ? O_WRONLY | O_APPEND : O_RDWR;
  try {
    return fs.openSync(path, access | O_CREAT | O_EXCL | O_NOFOLLOW, PRIVATE_FILE_MODE);
  } catch (error) {
    throw openError(path, error);
  }
}

/** Reads a whole private file, refusing one over `maxBytes`. */
export async function readPrivateFile(path: string, maxBytes: number): Promise<Buffer> {
  const fh = await openPrivateFile(path, "read", maxBytes);
  try {
    return await fh.readFile();
  } finally {
    await fh.close();
  }
}

export function readPrivateFileSync(path: string, maxBytes: number): Buffer {
  const { fd, size } = openCheckedSync(path, "read", maxBytes);
  try {
    if (size === 0) return fs.readFileSync(fd);
    // The size the checks saw, read directly: readFileSync(fd) would fstat the descriptor again.
    // Like readFileSync, bytes appended after the fstat are not read.
    const buffer = Buffer.allocUnsafeSlow(size);
    let read = 0;
    while (read < size) {
      const n = fs.readSync(fd, buffer, read, size - read, read);
      if (n === 0) break;
      read += n;
    }
    return read === size ? buffer : buffer.subarray(0, read);
  } finally {
    fs.closeSync(fd);
  }
}

/** A unique temp name in the same directory, recognisable at start-up recovery. */
export function tempPathFor(target: string): string {
  return join(dirname(target), `.tmp-${basename(target)}.${randomBytes(8).toString("hex")}`);
}

export const TEMP_PREFIX = ".tmp-";

/**
 * Atomically publishes `data` at `target` if and only if `target` does not exist yet (G7):
 * write a private temp file, fsync it, link(2) it to the target (EEXIST if taken — link never
 * replaces), unlink the temp, fsync the directory. Returns false when the target already existed;
 * the temp file is removed either way.
 */
export async function publishNewFile(target: string, data: Uint8Array | string): Promise<boolean> {
  const temp = tempPathFor(target);
  const fh = await createPrivateFile(temp);
  try {
    await fh.writeFile(data);
    await fh.sync();
  } catch (error) {
    // A full disk fails here: the half-written temp must not stay behind, taking room.
    await fh.close();
    await fsp.rm(temp, { force: true });
    throw error;
  }
  await fh.close();
  return publishTempFile(temp, target);
}

/** Publishes an already written and fsynced temp file create-new; see publishNewFile. */
export async function publishTempFile(temp: string, target: string): Promise<boolean> {
  let created = true;
  try {
    await fsp.link(temp, target);
  } catch (error) {
    if (errnoCode(error) !== "EEXIST") {
      await fsp.rm(temp, { force: true });
      throw openError(target, error);
    }
    created = false;
  }
  // force: a reader may already have removed the temp name, taking it for a crashed publisher's
  // (the key store does after a long wait); the target is published either way.
  await fsp.rm(temp, { force: true });
  await syncDir(dirname(target));
  return created;
}

export function publishNewFileSync(target: string, data: Uint8Array | string): boolean {
  const temp = tempPathFor(target);
  const fd = createPrivateFileSync(temp);
  try {
    fs.writeFileSync(fd, data);
    fs.fsyncSync(fd);
  } catch (error) {
    // A full disk fails here: the half-written temp must not stay behind, taking room.
    fs.closeSync(fd);
    fs.rmSync(temp, { force: true });
    throw error;
  }
  fs.closeSync(fd);
  let created = true;
  try {
    fs.linkSync(temp, target);
  } catch (error) {
    if (errnoCode(error) !== "EEXIST") {
      fs.rmSync(temp, { force: true });
      throw openError(target, error);
    }
    created = false;
  }
  fs.rmSync(temp, { force: true });
  syncDirSync(dirname(target));
  return created;
}

/**
 * Validates every entry under a private root without changing anything: directories and files
 * must pass the private rules; `accept(relativePath, isDir)` may refuse names the caller does not
 * own (return a rule text to refuse). Refuses the first offender with an UnsafeStorageError.
 */
export function auditPrivateTreeSync(
  root: string,
  accept?: (relativePath: string, isDirectory: boolean) => string | undefined,
  maxEntries = 1_000_000,
): void {
  checkPrivateDirSync(root);
  let seen = 0;
  const walk = (dir: string, rel: string): void => {
    let entries: fs.Dirent[];
    try {
      entries = fs.readdirSync(dir, { withFileTypes: true });
    } catch (error) {
      if (dir !== root && errnoCode(error) === "ENOENT") return; // removed by its owner meanwhile
      throw error;
    }
    for (const entry of entries) {
      if (++seen > maxEntries) {
        throw new UnsafeStorageError("unsafe-storage-too-many-entries", root, `more than ${maxEntries} entries`);
      }
      const path = join(dir, entry.name);
      const relPath = rel === "" ? entry.name : `${rel}/${entry.name}`;
      // Another process may rename or remove an entry between readdir and lstat (a lock file being
      // published, say). What no longer exists cannot be unsafe: skip it rather than fail start-up.
      const st = fs.lstatSync(path, { throwIfNoEntry: false });
      if (st === undefined) continue;
      const refusal = accept?.(relPath, st.isDirectory());
      if (refusal !== undefined) throw new UnsafeStorageError("unsafe-storage-name", path, refusal);
      if (st.isDirectory()) {
        checkDirStats(path, st);
        walk(path, relPath);
      } else {
        checkFileStats(path, st);
      }
    }
  };
  walk(root, "");
}

/**
 * Checks several paths against the private rules at once, without changing anything, and refuses
 * them all in one error: an operator who made the home with `mkdir` and its files under a umask of
 * 022 learns every problem from one start instead of one per restart. A path that does not exist
 * is skipped (whoever creates it creates it private).
 */
export function checkPrivatePathsSync(paths: readonly { readonly path: string; readonly kind: "directory" | "file" }[]): void {
  const problems: UnsafeStorageError[] = [];
  for (const { path, kind } of paths) {
    const st = fs.lstatSync(path, { throwIfNoEntry: false });
    if (st === undefined) continue;
    try {
      if (kind === "directory") checkDirStats(path, st);
      else checkFileStats(path, st);
    } catch (error) {
      if (!(error instanceof UnsafeStorageError)) throw error;
      problems.push(error);
    }
  }
  const [first, ...rest] = problems;
  if (first === undefined) return;
  if (rest.length === 0) throw first;
  const ruleOf = (e: UnsafeStorageError): string => String(e.details.rule ?? e.message);
  // Modes alone (a home made under umask 022) keep their code; a mix is named as such, with each part's code.
  const modes = problems.every((e) => e.code === "unsafe-storage-mode");
  const code = modes ? "unsafe-storage-mode" : "unsafe-storage-several";
  const rule = problems.map((e, i) => `${i === 0 ? "" : `at ${e.path}: `}${ruleOf(e)}${modes ? "" : ` (${e.code})`}`).join("; ");
  throw new UnsafeStorageError(code, first.path, rule, {
    // Not `problems`: the one line already names each, and the CLI would print them all again.
    details: { unsafe: problems.map((e) => ({ code: e.code, path: e.path, rule: ruleOf(e) })) },
  });
}
