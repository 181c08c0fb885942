/**
 * Naming files through the directory a descriptor holds rather than through a path. A process of
 * the same user can swap a directory for a symlink between two calls; a path resolved again at
 * each call then leads wherever the link points, while `/proc/self/fd/<fd>/<name>` names an entry
 * of the directory that was opened, wherever it has been moved since. Linux only: elsewhere
 * callers go by path (and `heldAt` cannot tell).
 */
import * as fs from "node:fs";
import { resolve } from "node:path";

/** Where Linux names what a descriptor opened; undefined where there is no such place. */
export const PROC_FD: string | undefined = process.platform === "linux" && fs.existsSync("/proc/self/fd") ? "/proc/self/fd" : undefined;

/** A directory opened without following a final symlink (ELOOP or ENOTDIR if it is none). */
export const DIR_NOFOLLOW = fs.constants.O_RDONLY | fs.constants.O_DIRECTORY | fs.constants.O_NOFOLLOW;

/**
 * `name` in the directory descriptor `fd` holds (the directory itself when `name` is empty);
 * `byPath`, the same entry by path, where there is no /proc.
 */
export function entryOf(fd: number, name: string, byPath: string): string {
  if (PROC_FD === undefined) return byPath;
  return name === "" ? `${PROC_FD}/${fd}` : `${PROC_FD}/${fd}/${name}`;
}

/**
 * Where what descriptor `fd` holds is now, as an absolute path free of symlinks (the kernel's
 * name for it); `byPath`, made absolute, where there is no /proc.
 */
export function locationOf(fd: number, byPath: string): string {
  return PROC_FD === undefined ? resolve(byPath) : fs.readlinkSync(`${PROC_FD}/${fd}`);
}

/**
 * Whether descriptor `fd` holds what `path` (absolute, free of symlinks) names by its own path:
 * false once a directory on the way was renamed or swapped for a symlink. Always true without
 * /proc (nothing to compare).
 */
export function heldAt(fd: number, path: string): boolean {
  return PROC_FD === undefined || fs.readlinkSync(`${PROC_FD}/${fd}`) === path;
}
