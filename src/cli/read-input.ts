/**
 * Reads a file named on the command line. Such files are the user's (a journal copied from another
 * node, a public key), not warden's private state, so they need not be private — but the read is
 * bounded and refuses anything but a regular file (a FIFO or device could block or never end).
 */
import * as fs from "node:fs";
import * as fsp from "node:fs/promises";
import { DigestStream, type Digest } from "../core/digest.js";
import { ValidationError } from "../core/errors.js";

/** Opens the file at `path` for reading, refusing anything but a regular file. */
async function openInputFile(path: string): Promise<fsp.FileHandle> {
  const fh = await fsp.open(path, fs.constants.O_RDONLY | fs.constants.O_NONBLOCK);
  try {
    if (!(await fh.stat()).isFile()) throw new ValidationError("input-not-regular-file", `${path} is not a regular file`);
    return fh;
  } catch (error) {
    await fh.close();
    throw error;
  }
}

/** The sha256 of the whole file at `path`, read in pieces (evidence may be a large log). */
export async function digestInputFile(path: string): Promise<Digest> {
  const fh = await openInputFile(path);
  try {
    const hash = new DigestStream();
    const buf = Buffer.alloc(1024 * 1024);
    for (;;) {
      const { bytesRead } = await fh.read(buf, 0, buf.byteLength, null);
      if (bytesRead === 0) return hash.digest();
      hash.update(buf.subarray(0, bytesRead));
    }
  } finally {
    await fh.close();
  }
}

/** At most `maxBytes` bytes from the start of the file at `path`. */
export async function readInputFile(path: string, maxBytes: number): Promise<Buffer> {
  const fh = await openInputFile(path);
  try {
    const buf = Buffer.alloc(maxBytes);
    let filled = 0;
    while (filled < maxBytes) {
      const { bytesRead } = await fh.read(buf, filled, maxBytes - filled, null);
      if (bytesRead === 0) break;
      filled += bytesRead;
    }
    return buf.subarray(0, filled);
  } finally {
    await fh.close();
  }
}
