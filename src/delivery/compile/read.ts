/**
 * Reading source files so that what is digested is what was walked: opened with O_NOFOLLOW
 * (a symlink swapped in after the walk is refused), checked on the descriptor (on Linux, also
 * that it holds the file under the root, not one a swapped directory leads to), and compared
 * (device, inode, size, mtime, ctime) before and after the read, on the descriptor and on the
 * path. A file that changes while read is refused rather than delivered half old, half new.
 *
 * The executable mode bit is deliberately ignored: a manifest carries no mode, and files are
 * materialized 0600, so the bit cannot make anything runnable on the node; content and
 * extension decide. Hard links are allowed: on the client they are just another name for bytes
 * the user can already read (G10's hard-link rule protects the node's own state directory).
 */
import * as fs from "node:fs";
import * as fsp from "node:fs/promises";
import type { BigIntStats } from "node:fs";
import { IntegrityError, errnoCode } from "../../core/errors.js";
import { sha256Digest } from "../../core/digest.js";
import { heldAt } from "../../storage/descriptor-paths.js";
import { sourceError, sourceRefusal } from "./walk.js";

const OPEN_FLAGS = fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW | fs.constants.O_NONBLOCK;

function sameFile(a: BigIntStats, b: BigIntStats): boolean {
  return a.dev === b.dev && a.ino === b.ino && a.size === b.size && a.mtimeNs === b.mtimeNs && a.ctimeNs === b.ctimeNs;
}

function changed(relativePath: string): IntegrityError {
  return new IntegrityError("compile-file-changed", `${JSON.stringify(relativePath)} changed while being compiled`, {
    details: { path: relativePath },
  });
}

export interface StableReadOptions {
  /** Called after the descriptor is checked and before any byte is read (a test seam). */
  readonly beforeRead?: () => void | Promise<void>;
  /**
   * Where to read the bytes: exactly the walked size plus one spare byte (see below). The result is
   * then a view on it. Without it, a buffer of that size is allocated for this file alone.
   */
  readonly into?: Uint8Array;
}

/**
 * Reads the whole file at `absolutePath`, which must still be the file `expected` describes
 * (an lstat taken earlier), and must not change while read.
 */
export async function readStable(
  absolutePath: string,
  relativePath: string,
  expected: BigIntStats,
  options: StableReadOptions = {},
): Promise<Buffer> {
  // Opening, stat-ing and closing are cheap calls made here; only the read goes to an I/O thread
  // (a round trip each would cost a push of many small files more than reading them).
  let fd: number;
  try {
    fd = fs.openSync(absolutePath, OPEN_FLAGS);
  } catch (error) {
    if (errnoCode(error) === "ELOOP") {
      throw sourceRefusal("compile-symlink", relativePath, "is a symbolic link; bundles hold regular files only");
    }
    throw sourceError(error, relativePath);
  }
  try {
    const before = fs.fstatSync(fd, { bigint: true });
    if (!before.isFile() || !sameFile(before, expected)) throw changed(relativePath);
    // O_NOFOLLOW guards the last name only: a directory above it swapped for a symlink during
    // the walk would have both the walk and this open reach a file outside the tree. The file
    // the descriptor holds must be the one under the root, by its own path.
    if (!heldAt(fd, absolutePath)) throw changed(relativePath);
    await options.beforeRead?.();
    const size = Number(before.size);
    // One spare byte: a file that grew is seen as longer than its stat said. Not zero-filled (a
    // push reads 32 MiB): only bytes read are ever returned, and a short read is refused.
    const into = options.into;
    if (into !== undefined && into.byteLength !== size + 1) throw new RangeError(`a slot of ${into.byteLength} bytes for a file of ${size}`);
    const buffer = into === undefined ? Buffer.allocUnsafeSlow(size + 1) : Buffer.from(into.buffer, into.byteOffset, into.byteLength);
    let filled = 0;
    for (;;) {
      // That the file ends where its stat said is asked on this thread: past the end a read
      // returns at once, and a trip to an I/O thread for that 0 cost every file two wake-ups.
      const bytesRead = filled >= size ? fs.readSync(fd, buffer, filled, buffer.length - filled, filled) : await readAt(fd, buffer, filled);
      if (bytesRead === 0) break;
      filled += bytesRead;
      if (filled === buffer.length) break;
    }
    const after = fs.fstatSync(fd, { bigint: true });
    if (filled !== size || !sameFile(after, before)) throw changed(relativePath);
    let onPath: BigIntStats;
    try {
      onPath = fs.lstatSync(absolutePath, { bigint: true });
    } catch (error) {
      throw sourceError(error, relativePath);
    }
    if (!sameFile(onPath, before)) throw changed(relativePath);
    return buffer.subarray(0, size);
  } finally {
    fs.closeSync(fd);
  }
}

function readAt(fd: number, buffer: Buffer, offset: number): Promise<number> {
  return new Promise((resolve, reject) =>
    fs.read(fd, buffer, offset, buffer.length - offset, offset, (error, bytesRead) => (error === null ? resolve(bytesRead) : reject(error))),
  );
}

/** Re-reads a file for upload and checks it still has the compiled digest and length. */
export async function readVerified(
  absolutePath: string,
  relativePath: string,
  digest: string,
  byteLength: number,
): Promise<Uint8Array> {
  let expected: BigIntStats;
  try {
    expected = await fsp.lstat(absolutePath, { bigint: true });
  } catch (error) {
    throw sourceError(error, relativePath);
  }
  if (!expected.isFile() || Number(expected.size) !== byteLength) throw changed(relativePath);
  const bytes = await readStable(absolutePath, relativePath, expected);
  if (sha256Digest(bytes) !== digest) throw changed(relativePath);
  return bytes;
}
