/**
 * Removes a tree without ever following a link: a symlink planted anywhere in it is unlinked
 * itself, never the file or directory it points at.
 *
 * The tree is written into by the agent that used it, which runs as the node's user and may leave
 * a process behind. Walking by path (`<dir>/<name>`) would let that process swap `<dir>` for a
 * symlink after it was listed, and every later unlink would land in the link's target. On Linux
 * the walk therefore goes by descriptor: each directory is opened O_NOFOLLOW and its entries are
 * reached through `/proc/self/fd/<fd>/<name>`, which names the directory that was opened, whatever
 * its path names by then. Elsewhere it walks by path.
 *
 * A walk holds one descriptor per level it is down, and an agent can nest directories deeper than
 * the node may hold descriptors (a loop of `mkdir d; cd d`): every other file the node opens would
 * then fail (EMFILE) while the walk lasts, and the removal itself too, leaving a home the next
 * start cannot sweep. So a walk goes at most MAX_DEPTH levels down; a directory deeper than that
 * is moved up into the top directory of the removal (a rename through the descriptors, which
 * moves the entry itself, never what a link names) and walked from there.
 */
import * as fs from "node:fs";
import * as fsp from "node:fs/promises";
import { join } from "node:path";
import { errnoCode } from "../core/errors.js";
import { DIR_NOFOLLOW, PROC_FD } from "./descriptor-paths.js";

/** Linux's O_PATH (the same on every architecture Node runs on); Node does not export it. */
const O_PATH = 0o10000000;

/**
 * How many times a tree is walked again when an entry appeared in it after it was listed. The
 * agent's leftover process can put one there at any moment (a swap is a rename and then a symlink,
 * two steps, and the walk may fall between them); a process that keeps adding entries for longer
 * wins, and the removal then fails (ENOTEMPTY) instead of looping for ever.
 */
const WALKS = 8;

/** Levels one walk goes down before it moves a deeper directory up (and descriptors it holds at most). */
const MAX_DEPTH = 64;
/** Walks of a top directory that moved something up, at most: a tree 6 million levels deep. */
const MOVING_WALKS = 100_000;

/** Removes `path` (file, link or directory tree). Missing is fine. */
export async function removeTree(path: string): Promise<void> {
  for (let walk = 1; ; walk++) {
    try {
      await removeOnce(path);
      return;
    } catch (error) {
      if (errnoCode(error) !== "ENOTEMPTY" || walk >= WALKS) throw error;
    }
  }
}

async function removeOnce(path: string): Promise<void> {
  const st = await lstatIfAny(path);
  if (st === undefined) return;
  if (!st.isDirectory()) {
    await fsp.unlink(path);
    return;
  }
  if (PROC_FD === undefined) return removeByPath(path, st.mode);
  await removeDirectory(path);
}

/** Removes the directory `path` was when lstat-ed; `path` may be under `/proc/self/fd/<fd>/`. */
function removeDirectory(path: string): Promise<void> {
  return emptiedThenRemoved(path, async (dir) => {
    // What was moved up into it is walked again, until a walk moves nothing (each walk removes
    // MAX_DEPTH levels of every chain it met: the tree shrinks). A process still adding chains
    // as deep could keep it going: past MOVING_WALKS the rmdir after fails (ENOTEMPTY) instead.
    const top = { dir, moved: 0 };
    for (let walk = 0; walk < MOVING_WALKS; walk++) {
      top.moved = 0;
      await emptyDirectory(dir, 0, top);
      if (top.moved === 0) break;
    }
  });
}

/**
 * Opens the directory at `path`, lets `empty` empty it through its descriptor, closes it and
 * removes it; an entry swapped for a link or a file since it was listed goes itself, nothing it names.
 */
async function emptiedThenRemoved(path: string, empty: (dir: fsp.FileHandle) => Promise<void>): Promise<void> {
  const dir = await openDirectory(path);
  if (dir === undefined) {
    await fsp.unlink(path);
    return;
  }
  try {
    await empty(dir);
  } finally {
    await dir.close();
  }
  await fsp.rmdir(path);
}

/** The top directory of a removal, where directories too deep to walk down to are moved. */
interface Top {
  readonly dir: fsp.FileHandle;
  moved: number;
}

let moves = 0;

/** Moves the directory at `entry` into the top directory under a name of its own. */
async function moveUp(entry: string, top: Top): Promise<void> {
  // Renaming a directory rewrites its `..`: it needs write permission on it (openDirectory gives it).
  const dir = await openDirectory(entry);
  if (dir === undefined) {
    await fsp.unlink(entry);
    return;
  }
  await dir.close();
  for (;;) {
    const name = `.warden-removing-${process.pid}-${++moves}`;
    try {
      await fsp.rename(entry, `${PROC_FD}/${top.dir.fd}/${name}`);
      top.moved++;
      return;
    } catch (error) {
      // The name is taken (the agent may have made one like it): another.
      if (errnoCode(error) !== "EEXIST" && errnoCode(error) !== "ENOTEMPTY") throw error;
    }
  }
}

/**
 * Opens a directory without following a final symlink; undefined when `path` is no directory
 * (any more). A tampered directory may have lost its owner bits: they are restored on the
 * directory itself, never through a path that could have been swapped (EPERM if it is not ours).
 */
async function openDirectory(path: string): Promise<fsp.FileHandle | undefined> {
  let dir: fsp.FileHandle;
  try {
    dir = await fsp.open(path, DIR_NOFOLLOW);
  } catch (error) {
    const code = errnoCode(error);
    if (code === "ELOOP" || code === "ENOTDIR") return undefined;
    if (code !== "EACCES") throw error;
    // No read permission: a handle that needs none (O_PATH), chmod through it, then reopen it.
    let handle: fsp.FileHandle;
    try {
      handle = await fsp.open(path, O_PATH | fs.constants.O_DIRECTORY | fs.constants.O_NOFOLLOW);
    } catch (again) {
      const code2 = errnoCode(again);
      if (code2 === "ELOOP" || code2 === "ENOTDIR") return undefined;
      throw again;
    }
    try {
      await fsp.chmod(`${PROC_FD}/${handle.fd}`, 0o700);
      dir = await fsp.open(`${PROC_FD}/${handle.fd}`, fs.constants.O_RDONLY | fs.constants.O_DIRECTORY);
    } finally {
      await handle.close();
    }
  }
  try {
    const st = await dir.stat();
    if ((st.mode & 0o700) !== 0o700) await dir.chmod(0o700);
  } catch (error) {
    await dir.close();
    throw error;
  }
  return dir;
}

async function emptyDirectory(dir: fsp.FileHandle, depth: number, top: Top): Promise<void> {
  const base = `${PROC_FD}/${dir.fd}`;
  for (const name of await fsp.readdir(base)) {
    const entry = `${base}/${name}`;
    const st = await lstatIfAny(entry);
    if (st === undefined) continue;
    if (!st.isDirectory()) await fsp.unlink(entry);
    else if (depth + 1 >= MAX_DEPTH) await moveUp(entry, top);
    else await removeSubdirectory(entry, depth + 1, top);
  }
}

/** removeDirectory for a directory below the top: what is too deep for this walk goes to the top. */
function removeSubdirectory(path: string, depth: number, top: Top): Promise<void> {
  return emptiedThenRemoved(path, (dir) => emptyDirectory(dir, depth, top));
}

async function lstatIfAny(path: string): Promise<fs.Stats | undefined> {
  try {
    return await fsp.lstat(path);
  } catch (error) {
    if (errnoCode(error) === "ENOENT") return undefined;
    throw error;
  }
}

async function removeByPath(path: string, mode: number): Promise<void> {
  if ((mode & 0o700) !== 0o700) await fsp.chmod(path, 0o700);
  for (const name of await fsp.readdir(path)) await removeOnce(join(path, name));
  await fsp.rmdir(path);
}
