/**
 * How much room the file system holding a path has left. A write that fails on a full disk does
 * not always say so: SQLite reports growing its shared-memory or WAL file as a plain "disk I/O
 * error", which points an operator at hardware; an I/O error on a file system with (almost) no
 * room left is reported as the full disk it is.
 */
import { statfsSync } from "node:fs";

/** Below this many bytes available to an unprivileged writer, a file system is taken as full. */
const NEARLY_FULL_BYTES = 1024 * 1024;

/** True when the file system holding `path` has less than a mebibyte left (false when unknown). */
export function nearlyFull(path: string): boolean {
  const available = availableBytes(path);
  return available !== undefined && available < NEARLY_FULL_BYTES;
}

/** Bytes the file system holding `path` has available to an unprivileged writer; undefined when unknown. */
export function availableBytes(path: string): number | undefined {
  try {
    const st = statfsSync(path);
    return st.bavail * st.bsize;
  } catch {
    return undefined;
  }
}
