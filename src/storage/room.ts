/**
 * How much room the file system holding a path has left. A write that fails on a full disk does
 * not always say so: SQLite reports growing its shared-memory or WAL file as a plain "disk I/O
 * error", which points an operator at hardware; an I/O error on a file system with (almost) no
 * room left is reported as the full disk it is.
 */
import { statfsSync } from "node:fs";

/** Below this many bytes available to an unprivileged writer, a file system is taken as full. */
const NEARLY_FULL_BYTES = 1024 * 1024;

/** True when the file system holding `path` has less than a mebibyte or no inode left (false when unknown). */
export function nearlyFull(path: string): boolean {
  const room = roomOf(path);
  return room !== undefined && (room.bytes < NEARLY_FULL_BYTES || room.files === 0);
}

export interface Room {
  /** bytes available to an unprivileged writer */
  readonly bytes: number;
  /** free inodes: files a writer may still create; undefined where the file system does not count them (btrfs) */
  readonly files: number | undefined;
}

/** What the file system holding `path` has left; undefined when unknown. */
export function roomOf(path: string): Room | undefined {
  try {
    const st = statfsSync(path);
    return { bytes: st.bavail * st.bsize, files: st.files > 0 ? st.ffree : undefined };
  } catch {
    return undefined;
  }
}
