/**
 * Descriptor I/O of the embedded delivery stores. Opening, closing, linking and unlinking are
 * cheap syscalls done synchronously (a round trip through the I/O threads costs more than the
 * call, especially on a busy machine), and so is appending a small piece (a copy into the page
 * cache); reading, writing large pieces and syncing go to the I/O threads, so hashing on this
 * thread overlaps with them.
 */
import * as fs from "node:fs";
import { PRIVATE_FILE_MODE, createPrivateFileSync } from "../../../storage/secure-fs.js";

export function writeAll(fd: number, bytes: Uint8Array): Promise<void> {
  return new Promise((resolve, reject) => {
    const step = (offset: number): void => {
      if (offset >= bytes.byteLength) {
        resolve();
        return;
      }
      fs.write(fd, bytes, offset, bytes.byteLength - offset, null, (error, written) => {
        if (error !== null) reject(error);
        else step(offset + written);
      });
    };
    step(0);
  });
}

/**
 * fsyncs a directory: opening and closing here, only the fsync on the I/O threads (a commit
 * syncs a hundred shard directories; three round trips each would queue behind one another).
 */
export async function syncDirectory(path: string): Promise<void> {
  const fd = fs.openSync(path, fs.constants.O_RDONLY | fs.constants.O_DIRECTORY | fs.constants.O_NOFOLLOW);
  try {
    await new Promise<void>((resolve, reject) => fs.fsync(fd, (error) => (error === null ? resolve() : reject(error))));
  } finally {
    fs.closeSync(fd);
  }
}

/**
 * Creates a new private file for appending (0600, create-new, no symlink) on the I/O threads: a
 * file creation waits on the file system's journal, and the caller has work to overlap with it.
 * A failure is reported by `createPrivateFileSync` trying again, which names what went wrong (a
 * planted symlink, a parent that is not a directory) the same way everywhere.
 */
export function createAppendFile(path: string): Promise<number> {
  const { O_WRONLY, O_APPEND, O_CREAT, O_EXCL, O_NOFOLLOW } = fs.constants;
  return new Promise((resolve, reject) =>
    fs.open(path, O_WRONLY | O_APPEND | O_CREAT | O_EXCL | O_NOFOLLOW, PRIVATE_FILE_MODE, (error, fd) => {
      try {
        resolve(error === null ? fd : createPrivateFileSync(path, "append"));
      } catch (retryError) {
        reject(retryError);
      }
    }),
  );
}

/**
 * Writes `pieces` in order on the I/O threads, in one writev(2) each time (several when the kernel
 * takes fewer bytes than offered).
 */
export function writevAll(fd: number, pieces: readonly Uint8Array[]): Promise<void> {
  return new Promise((resolve, reject) => {
    const step = (rest: readonly Uint8Array[]): void => {
      if (rest.length === 0) {
        resolve();
        return;
      }
      fs.writev(fd, rest as Uint8Array[], null, (error, written) => {
        if (error !== null) reject(error);
        else step(after(rest, written));
      });
    };
    step(pieces);
  });
}

/** What is left of `pieces` once their first `bytes` are written. */
function after(pieces: readonly Uint8Array[], bytes: number): readonly Uint8Array[] {
  let index = 0;
  while (index < pieces.length && bytes >= pieces[index]!.byteLength) bytes -= pieces[index++]!.byteLength;
  if (index === pieces.length) return [];
  return [pieces[index]!.subarray(bytes), ...pieces.slice(index + 1)];
}

export function writeAllSync(fd: number, bytes: Uint8Array): void {
  for (let offset = 0; offset < bytes.byteLength; ) offset += fs.writeSync(fd, bytes, offset, bytes.byteLength - offset);
}

export function datasync(fd: number): Promise<void> {
  return new Promise((resolve, reject) => fs.fdatasync(fd, (error) => (error === null ? resolve() : reject(error))));
}

/**
 * Reads `length` bytes at `position`; fewer only if the file ends first. With `into` (at least
 * `length` bytes) the bytes land there, and the result is a view of it.
 */
export function readExactly(fd: number, position: number, length: number, into?: Uint8Array): Promise<Buffer> {
  const buffer = into === undefined ? Buffer.allocUnsafe(length) : Buffer.from(into.buffer, into.byteOffset, length);
  return new Promise((resolve, reject) => {
    const step = (filled: number): void => {
      if (filled >= length) {
        resolve(buffer);
        return;
      }
      fs.read(fd, buffer, filled, length - filled, position + filled, (error, read) => {
        if (error !== null) reject(error);
        else if (read === 0) resolve(buffer.subarray(0, filled));
        else step(filled + read);
      });
    };
    step(0);
  });
}

export function lstatOrUndefined(path: string): fs.Stats | undefined {
  return fs.lstatSync(path, { throwIfNoEntry: false });
}

/**
 * Runs at most `limit` jobs at once, the rest in arrival order. An fdatasync holds an I/O thread
 * for as long as the disk takes (libuv has four unless the process asked for more, as
 * bin/warden.cjs does): bounding them keeps threads free for the writes and reads that the event
 * loop waits on. When a caller is about to wait for every job queued (a commit, for the syncs of
 * its stage), `hurry` lets more run at once until the queue is empty: nothing is being written
 * for that stage any more, and fdatasyncs that run together share the file system's journal
 * commits.
 */
export class BoundedRunner {
  readonly #base: number;
  #limit: number;
  readonly #waiting: Array<() => void> = [];
  #running = 0;

  constructor(limit: number) {
    this.#base = limit;
    this.#limit = limit;
  }

  async run<T>(job: () => Promise<T>): Promise<T> {
    if (this.#running >= this.#limit) await new Promise<void>((resolve) => this.#waiting.push(resolve));
    else this.#running++;
    try {
      return await job();
    } finally {
      if (this.#waiting.length === 0) this.#limit = this.#base;
      // The slot passes straight to the next job waiting, or frees up (and so does a slot that
      // hurrying lent, once the queue it hurried is gone).
      const next = this.#running > this.#limit ? undefined : this.#waiting.shift();
      if (next !== undefined) next();
      else this.#running--;
    }
  }

  /** Lets up to `limit` jobs run at once until the queue is empty. */
  hurry(limit: number): void {
    if (this.#waiting.length === 0) return;
    this.#limit = Math.max(this.#limit, limit);
    while (this.#running < this.#limit && this.#waiting.length > 0) {
      this.#running++;
      this.#waiting.shift()!();
    }
  }
}
