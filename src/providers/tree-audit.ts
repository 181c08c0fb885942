/**
 * Re-checks a materialized tree against exactly what was written (G8: tampered bytes on disk are
 * detected, never launched). The walk never follows a link: every entry is lstat-ed, every file
 * is opened O_NOFOLLOW and checked on its descriptor, so a file swapped for a symlink or a hard
 * link to something else is caught, not read through.
 */
import * as fs from "node:fs";
import * as fsp from "node:fs/promises";
import { join } from "node:path";
import { DigestStream } from "../core/digest.js";
import { IntegrityError, errnoCode } from "../core/errors.js";
import { DIR_NOFOLLOW, entryOf, heldAt, locationOf } from "../storage/descriptor-paths.js";
import type { ExpectedTree } from "./types.js";

export const TREE_DIR_MODE = 0o700;
export const TREE_FILE_MODE = 0o600;

function drift(code: string, path: string, rule: string): never {
  throw new IntegrityError(code, `materialized tree changed at ${JSON.stringify(path)}: ${rule}`, {
    details: { path },
    status: 500,
  });
}

function euid(): number {
  return typeof process.geteuid === "function" ? process.geteuid() : -1;
}

function checkCommon(rel: string, st: fs.Stats): void {
  if (st.isSymbolicLink()) drift("materialization-symlink", rel, "is a symbolic link");
  if (euid() >= 0 && st.uid !== euid()) drift("materialization-owner-changed", rel, `owned by uid ${st.uid}`);
}

function checkDir(rel: string, st: fs.Stats): void {
  checkCommon(rel, st);
  if (!st.isDirectory()) drift("materialization-not-directory", rel, "is not a directory");
  if ((st.mode & 0o7777) !== TREE_DIR_MODE) drift("materialization-mode-changed", rel, `mode ${(st.mode & 0o7777).toString(8)}, want 700`);
}

function checkFile(rel: string, st: fs.Stats, byteLen: number): void {
  checkCommon(rel, st);
  if (!st.isFile()) drift("materialization-not-regular", rel, "is not a regular file");
  if ((st.mode & 0o7777) !== TREE_FILE_MODE) drift("materialization-mode-changed", rel, `mode ${(st.mode & 0o7777).toString(8)}, want 600`);
  if (st.nlink !== 1) drift("materialization-hard-link", rel, `has ${st.nlink} links`);
  if (st.size !== byteLen) drift("materialization-content-changed", rel, `is ${st.size} bytes, want ${byteLen}`);
}

async function hashFile(abs: string, rel: string, byteLen: number): Promise<string> {
  let fh: fsp.FileHandle;
  try {
    fh = await fsp.open(abs, fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW);
  } catch (error) {
    if (errnoCode(error) === "ELOOP") drift("materialization-symlink", rel, "is a symbolic link");
    throw error;
  }
  try {
    // Check the descriptor we read from, so a swap after the walk's lstat cannot slip through.
    checkFile(rel, await fh.stat(), byteLen);
    const hash = new DigestStream();
    const buf = Buffer.alloc(64 * 1024);
    for (;;) {
      const { bytesRead } = await fh.read(buf, 0, buf.length, null);
      if (bytesRead === 0) break;
      hash.update(buf.subarray(0, bytesRead));
    }
    if (hash.length !== byteLen) drift("materialization-content-changed", rel, `read ${hash.length} bytes, want ${byteLen}`);
    return hash.digest();
  } finally {
    await fh.close();
  }
}

/**
 * Opens directory `rel` without following a link; a symlink or non-directory there is drift.
 * Raw descriptors, opened and closed synchronously (cheap calls): the last check of `auditTree`
 * is then the last thing it does, with no await between it and its answer.
 */
function openDir(abs: string, rel: string): number {
  try {
    return fs.openSync(abs, DIR_NOFOLLOW);
  } catch (error) {
    const code = errnoCode(error);
    if (code === "ELOOP") drift("materialization-symlink", rel, "is a symbolic link");
    if (code === "ENOTDIR") drift("materialization-not-directory", rel, "is not a directory");
    if (code === "EACCES") drift("materialization-mode-changed", rel, "cannot be read any more");
    if (code === "ENOENT") drift("materialization-missing-entry", rel, "directory vanished while checked");
    throw error;
  }
}

/**
 * Throws an IntegrityError (its code names the drift) unless `dir` holds exactly `expected`:
 * the same directories and files, nothing else, modes 0700/0600, owned by us, single-linked,
 * and every file's bytes matching its digest and length.
 *
 * The tree belongs to an agent that may leave a process behind, which can swap a directory for
 * a symlink mid-walk; a walk by path would then read (and approve) files outside the tree. So
 * each directory is opened O_NOFOLLOW and checked on its descriptor, its entries are reached
 * through that descriptor (storage/descriptor-paths), and at the end every directory must still
 * be at its own path: a tree that passes was the expected tree, all in place, at that moment.
 */
export async function auditTree(dir: string, expected: ExpectedTree): Promise<void> {
  const wantDirs = new Set(expected.dirs);
  const seenFiles = new Set<string>();
  const opened = new Map<string, number>();
  const walk = async (rel: string, fd: number): Promise<void> => {
    checkDir(rel === "" ? "." : rel, fs.fstatSync(fd));
    const byPath = rel === "" ? dir : join(dir, rel);
    const listed = await fsp.readdir(entryOf(fd, "", byPath));
    for (const name of listed.sort()) {
      const childRel = rel === "" ? name : `${rel}/${name}`;
      const entry = entryOf(fd, name, join(byPath, name));
      let st: fs.Stats;
      try {
        st = await fsp.lstat(entry);
      } catch (error) {
        if (errnoCode(error) === "ENOENT") drift("materialization-missing-entry", childRel, "vanished while checked");
        throw error;
      }
      if (st.isDirectory() && wantDirs.has(childRel)) {
        checkDir(childRel, st);
        const child = openDir(entry, childRel);
        opened.set(childRel, child);
        await walk(childRel, child);
        continue;
      }
      const want = expected.files.get(childRel);
      if (want === undefined) {
        if (st.isSymbolicLink()) drift("materialization-symlink", childRel, "is a symbolic link that was never written");
        drift("materialization-extra-entry", childRel, "was never written");
      }
      const digest = await hashFile(entry, childRel, want.byte_len);
      if (digest !== want.digest) drift("materialization-content-changed", childRel, "bytes differ from the verified blob");
      seenFiles.add(childRel);
    }
  };
  try {
    let st: fs.Stats;
    try {
      st = await fsp.lstat(dir);
    } catch (error) {
      if (errnoCode(error) === "ENOENT") drift("materialization-missing", ".", "the session directory is gone");
      throw error;
    }
    checkDir(".", st);
    const top = openDir(dir, ".");
    opened.set("", top);
    // Ancestors of the root may be links (a home under a linked /home): the kernel's name is the base.
    const location = locationOf(top, dir);
    await walk("", top);
    for (const d of wantDirs) if (!opened.has(d)) drift("materialization-missing-entry", d, "directory is missing");
    for (const f of expected.files.keys()) if (!seenFiles.has(f)) drift("materialization-missing-entry", f, "file is missing");
    for (const [rel, fd] of opened) {
      if (!heldAt(fd, rel === "" ? location : join(location, rel))) drift("materialization-moved", rel === "" ? "." : rel, "was moved or replaced while checked");
    }
  } finally {
    for (const fd of opened.values()) fs.closeSync(fd);
  }
}
