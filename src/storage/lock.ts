import * as fs from "node:fs";
import fsExt from "fs-ext";
import { errnoCode, StorageError } from "../core/errors.js";
import { checkFileStats, PRIVATE_FILE_MODE } from "./secure-fs.js";

const { O_RDWR, O_CREAT, O_NOFOLLOW } = fs.constants;
const { flockSync } = fsExt;

/**
 * An exclusive, non-blocking flock(2) on a private lock file. The kernel drops the lock when the
 * holding process dies — this is what makes owner liveness crash-proof: a claim whose owner's lock
 * can be taken has no living owner. Locks are per open file description, so two FileLock objects
 * in one process on the same path also exclude each other.
 */
export class FileLock {
  readonly path: string;
  #fd: number | undefined;

  private constructor(path: string, fd: number) {
    this.path = path;
    this.#fd = fd;
  }

  /** Takes the lock, or returns undefined when another holder has it. */
  static tryAcquire(path: string, options: { shared?: boolean } = {}): FileLock | undefined {
    let fd: number;
    try {
      fd = fs.openSync(path, O_RDWR | O_CREAT | O_NOFOLLOW, PRIVATE_FILE_MODE);
    } catch (error) {
      if (errnoCode(error) === "ELOOP") {
        checkFileStats(path, fs.lstatSync(path));
      }
      throw error;
    }
    try {
      checkFileStats(path, fs.fstatSync(fd));
      if (!flockRetrying(fd, options.shared ? "shnb" : "exnb")) {
        fs.closeSync(fd);
        return undefined;
      }
      return new FileLock(path, fd);
    } catch (error) {
      fs.closeSync(fd);
      throw error;
    }
  }

  /** True when nobody holds an exclusive lock on `path` right now (probe with a shared lock). */
  static isFree(path: string): boolean {
    let fd: number;
    try {
      fd = fs.openSync(path, fs.constants.O_RDONLY | O_NOFOLLOW);
    } catch (error) {
      if (errnoCode(error) === "ENOENT") return true;
      throw error;
    }
    try {
      checkFileStats(path, fs.fstatSync(fd));
      return flockRetrying(fd, "shnb");
    } finally {
      fs.closeSync(fd); // closing drops the probe lock
    }
  }

  get held(): boolean {
    return this.#fd !== undefined;
  }

  release(): void {
    if (this.#fd === undefined) return;
    const fd = this.#fd;
    this.#fd = undefined;
    fs.closeSync(fd);
  }

  [Symbol.dispose](): void {
    this.release();
  }
}

/** flock with EINTR retries; false on EWOULDBLOCK/EAGAIN. */
function flockRetrying(fd: number, flags: "exnb" | "shnb"): boolean {
  for (let attempt = 0; attempt < 100; attempt++) {
    try {
      flockSync(fd, flags);
      return true;
    } catch (error) {
      const code = errnoCode(error);
      if (code === "EINTR") continue;
      if (code === "EWOULDBLOCK" || code === "EAGAIN") return false;
      throw new StorageError("storage-lock-failed", `flock failed: ${code ?? String(error)}`, { cause: error });
    }
  }
  throw new StorageError("storage-lock-failed", "flock interrupted 100 times");
}
