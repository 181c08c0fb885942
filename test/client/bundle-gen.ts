/** Writes a bundle directory of random binary files (also used by bench/push.bench.ts). */
import { randomBytes } from "node:crypto";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";

/**
 * `files` files of `fileBytes` random bytes as `data/fNNNN.bin` under `dir`. The first byte of each
 * is 0, so no file starts with an executable's magic bytes (`#!`, `MZ`, ELF, Mach-O).
 */
export function writeRandomBundle(dir: string, files: number, fileBytes: number): void {
  mkdirSync(join(dir, "data"), { recursive: true });
  for (let i = 0; i < files; i++) {
    const content = randomBytes(fileBytes);
    content[0] = 0;
    writeFileSync(join(dir, "data", `f${String(i).padStart(4, "0")}.bin`), content);
  }
}
