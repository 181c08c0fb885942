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
 * Throws an IntegrityError (its code names the drift) unless `dir` holds exactly `expected`:
 * the same directories and files, nothing else, modes 0700/0600, owned by us, single-linked,
 * and every file's bytes matching its digest and length.
 */
export async function auditTree(dir: string, expected: ExpectedTree): Promise<void> {
  let top: fs.Stats;
  try {
    top = await fsp.lstat(dir);
  } catch (error) {
    if (errnoCode(error) === "ENOENT") drift("materialization-missing", ".", "the session directory is gone");
    throw error;
  }
  checkDir(".", top);
  const wantDirs = new Set(expected.dirs);
  const seenDirs = new Set<string>();
  const seenFiles = new Set<string>();
  const walk = async (rel: string): Promise<void> => {
    const abs = rel === "" ? dir : join(dir, rel);
    for (const name of (await fsp.readdir(abs)).sort()) {
      const childRel = rel === "" ? name : `${rel}/${name}`;
      const st = await fsp.lstat(join(dir, childRel));
      if (st.isDirectory() && !st.isSymbolicLink() && wantDirs.has(childRel)) {
        checkDir(childRel, st);
        seenDirs.add(childRel);
        await walk(childRel);
        continue;
      }
      const want = expected.files.get(childRel);
      if (want === undefined) {
        if (st.isSymbolicLink()) drift("materialization-symlink", childRel, "is a symbolic link that was never written");
        drift("materialization-extra-entry", childRel, "was never written");
      }
      const digest = await hashFile(join(dir, childRel), childRel, want.byte_len);
      if (digest !== want.digest) drift("materialization-content-changed", childRel, "bytes differ from the verified blob");
      seenFiles.add(childRel);
    }
  };
  await walk("");
  for (const d of wantDirs) if (!seenDirs.has(d)) drift("materialization-missing-entry", d, "directory is missing");
  for (const f of expected.files.keys()) if (!seenFiles.has(f)) drift("materialization-missing-entry", f, "file is missing");
}
