/** Writes a bundle directory of random binary files (also used by bench/push.bench.ts). */
import { randomFillSync } from "node:crypto";
import { closeSync, fsyncSync, mkdirSync, openSync, writeSync } from "node:fs";
import { join } from "node:path";

/**
 * `files` files of `fileBytes` random bytes as `data/fNNNN.bin` under `dir`. The first byte of each
 * is 0, so no file starts with an executable's magic bytes (`#!`, `MZ`, ELF, Mach-O).
 *
 * `durable`: each file is fsynced as it is written, then both directories, so that the kernel
 * writing them back never competes with what runs next. The benches use it rather than running
 * `sync`: a child process forks this one, and every page of its memory written after that takes a
 * fault of its own (copy on write), which a push's compile measured after it then pays for.
 */
export function writeRandomBundle(dir: string, files: number, fileBytes: number, options: { readonly durable?: boolean } = {}): void {
  const data = join(dir, "data");
  mkdirSync(data, { recursive: true });
  // One buffer refilled per file: 32 MiB of new memory per bundle would weigh on the garbage
  // collector of whatever the bench measures next in this process.
  const content = Buffer.allocUnsafe(fileBytes);
  for (let i = 0; i < files; i++) {
    randomFillSync(content);
    if (fileBytes > 0) content[0] = 0;
    const fd = openSync(join(data, `f${String(i).padStart(4, "0")}.bin`), "w", 0o644);
    try {
      for (let at = 0; at < content.length; ) at += writeSync(fd, content, at, content.length - at);
      if (options.durable === true) fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
  }
  if (options.durable === true) {
    for (const path of [data, dir]) {
      const fd = openSync(path, "r");
      try {
        fsyncSync(fd);
      } finally {
        closeSync(fd);
      }
    }
  }
}
