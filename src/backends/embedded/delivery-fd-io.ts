/**
 * Descriptor I/O of the embedded delivery stores. Opening, closing, linking and unlinking are
 * cheap syscalls done synchronously (a round trip through the I/O threads costs more than the
 * call, especially on a busy machine); reading, writing and syncing file data go to the I/O
 * threads, so hashing on this thread overlaps with them.
 */
import * as fs from "node:fs";

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

export function datasync(fd: number): Promise<void> {
  return new Promise((resolve, reject) => fs.fdatasync(fd, (error) => (error === null ? resolve() : reject(error))));
}

/** Reads `length` bytes at `position`; fewer only if the file ends first. */
export function readExactly(fd: number, position: number, length: number): Promise<Buffer> {
  const buffer = Buffer.allocUnsafe(length);
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
