/**
 * Copies a materialized session tree out of a local node's state directory into a directory of
 * the user's choosing. The source is private node state: nothing in it is followed (symlinks and
 * anything but directories and regular files are refused), and the copy is private too (0700
 * directories, 0600 files), created new: an existing target is never overwritten or merged into.
 */
import * as fs from "node:fs";
import * as fsp from "node:fs/promises";
import { join } from "node:path";
import { ValidationError, errnoCode } from "../core/errors.js";
import { syncDir } from "../storage/secure-fs.js";

const READ_FLAGS = fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW;

export async function copyTree(source: string, target: string): Promise<number> {
  try {
    await fsp.mkdir(target, { mode: 0o700 });
  } catch (error) {
    if (errnoCode(error) === "EEXIST") throw new ValidationError("target-exists", `${target} already exists; name a new directory`);
    throw error;
  }
  return copyDir(source, target);
}

async function copyDir(source: string, target: string): Promise<number> {
  let files = 0;
  for (const entry of await fsp.readdir(source, { withFileTypes: true })) {
    const from = join(source, entry.name);
    const to = join(target, entry.name);
    if (entry.isDirectory()) {
      await fsp.mkdir(to, { mode: 0o700 });
      files += await copyDir(from, to);
    } else if (entry.isFile()) {
      await copyFile(from, to);
      files++;
    } else {
      throw new ValidationError("materialization-entry-unsafe", `${from} is neither a directory nor a regular file; refusing to copy it`);
    }
  }
  await syncDir(target);
  return files;
}

async function copyFile(from: string, to: string): Promise<void> {
  const input = await fsp.open(from, READ_FLAGS);
  try {
    if (!(await input.stat()).isFile()) throw new ValidationError("materialization-entry-unsafe", `${from} is not a regular file`);
    const bytes = await input.readFile();
    const output = await fsp.open(to, fs.constants.O_WRONLY | fs.constants.O_CREAT | fs.constants.O_EXCL | fs.constants.O_NOFOLLOW, 0o600);
    try {
      await output.writeFile(bytes);
      await output.sync();
    } finally {
      await output.close();
    }
  } finally {
    await input.close();
  }
}
