/**
 * The embedded journal store with a synchronous fast path for small reads. A cached replay reads
 * its run's journal (a few KB) to compare it with the stored seal; through the async path that
 * is four or five threadpool round trips, and on a busy machine each can wait its turn, which is
 * what a replay's tail latency is made of. A small private file is read here with four syscalls
 * instead (a few microseconds on the event loop). Large reads, and every read that fails, go
 * through the store's own async path, which also gives failures their meaning.
 *
 * A replayed journal is read again and again while nothing changes it, so a small journal that
 * had been left alone for a while before it was read is also remembered with its file's
 * identity, and for a short while answered after one lstat instead of open, fstat, read and
 * close. Why that still answers what the file holds now:
 * - Any change to a file through the filesystem (a write, truncate, chmod, link, rename over it,
 *   delete and re-create) sets its change time (ctime) to the current time, and no call lets a
 *   process set ctime to anything else. A file is remembered only if its ctime was at least
 *   SETTLED_FILE_MS older than the moment its identity was taken, so a change made after that
 *   moment gives it a different ctime, and the next read reads the file again in full.
 * - Whatever could change bytes without a new ctime (writes through a shared mapping that was
 *   dirtied before, a clock set back by an administrator, raw writes to the disk) is bounded by
 *   REMEMBERED_READ_MS: after it, the file is read again in full whatever its identity says.
 * The caller still checks the bytes it gets (a replay compares them with the seal), and a file
 * that no longer passes the storage rules (symlink, mode, owner, links) is never answered from
 * memory: those changes set ctime too, and the full read refuses them.
 */
import { lstatSync, type Stats } from "node:fs";
import { BoundedMap } from "../../../core/bounded-map.js";
import { readPrivateFileSync } from "../../../storage/secure-fs.js";
import { EmbeddedJournalStore, type EmbeddedJournalStoreOptions } from "./journal-store.js";

/** Reads up to this size may block the event loop. */
export const SMALL_READ_MAX_BYTES = 256 * 1024;
/** A file is remembered only if it had not changed for this long when it was read, ms. */
export const SETTLED_FILE_MS = 1000;
/** A remembered file is read again in full after this long, ms. */
export const REMEMBERED_READ_MS = 1000;
const REMEMBERED_FILES = 1024;
const REMEMBERED_BYTES = 16 * 1024 * 1024;

interface Remembered {
  /** the run's path (its run id was checked when it was first read) */
  readonly path: string;
  readonly stamp: Stats;
  readonly bytes: Buffer;
  /** wall-clock ms when the stamp was taken, before the bytes were read */
  readonly takenAt: number;
}

/** Every field of a file's identity that a change through the filesystem moves. */
function sameFile(a: Stats, b: Stats): boolean {
  return (
    a.ctimeMs === b.ctimeMs &&
    a.mtimeMs === b.mtimeMs &&
    a.ino === b.ino &&
    a.dev === b.dev &&
    a.size === b.size &&
    a.mode === b.mode &&
    a.uid === b.uid &&
    a.nlink === b.nlink
  );
}

export interface SmallReadJournalStoreOptions extends EmbeddedJournalStoreOptions {
  /** clock seam for tests (wall-clock ms, the clock file times are kept in) */
  readonly now?: () => number;
}

export class SmallReadJournalStore extends EmbeddedJournalStore {
  readonly #now: () => number;
  readonly #remembered = new BoundedMap<string, Remembered>(REMEMBERED_FILES, REMEMBERED_BYTES);

  constructor(dir: string, options: SmallReadJournalStoreOptions = {}) {
    super(dir, options);
    this.#now = options.now ?? Date.now;
  }

  override async read(runId: string, maxBytes: number): Promise<Uint8Array | undefined> {
    if (maxBytes <= SMALL_READ_MAX_BYTES) {
      try {
        return this.#readSmall(runId, maxBytes);
      } catch {
        // Missing, too large or unsafe: the async path answers (undefined or the right error).
        this.#remembered.delete(runId);
      }
    }
    return super.read(runId, maxBytes);
  }

  #readSmall(runId: string, maxBytes: number): Buffer {
    const known = this.#remembered.get(runId);
    const path = known?.path ?? this.pathOf(runId);
    const now = this.#now();
    const stamp = lstatSync(path);
    if (known !== undefined && sameFile(known.stamp, stamp) && stamp.size <= maxBytes) {
      const age = now - known.takenAt;
      if (age >= 0 && age < REMEMBERED_READ_MS) return known.bytes;
    }
    const bytes = readPrivateFileSync(path, maxBytes);
    this.#remembered.delete(runId);
    // The stamp was taken before the read: if the file changed in between, its ctime moved past
    // the stamp's and the next read misses.
    if (stamp.isFile() && stamp.ctimeMs <= now - SETTLED_FILE_MS && bytes.byteLength === stamp.size) {
      this.#remembered.set(runId, { path, stamp, bytes, takenAt: now }, bytes.byteLength);
    }
    return bytes;
  }
}
