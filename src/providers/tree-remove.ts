/**
 * Removes a tree without ever following a link: a symlink planted anywhere in it is unlinked
 * itself, never the file or directory it points at.
 */
import * as fsp from "node:fs/promises";
import { join } from "node:path";
import { errnoCode } from "../core/errors.js";

/** Removes `path` (file, link or directory tree). Missing is fine. */
export async function removeTree(path: string): Promise<void> {
  let st;
  try {
    st = await fsp.lstat(path);
  } catch (error) {
    if (errnoCode(error) === "ENOENT") return;
    throw error;
  }
  if (!st.isDirectory()) {
    await fsp.unlink(path);
    return;
  }
  // A tampered directory may have lost its owner bits; restore them to empty it (EPERM if it
  // is not ours, which then surfaces as the error it is).
  if ((st.mode & 0o700) !== 0o700) await fsp.chmod(path, 0o700);
  for (const name of await fsp.readdir(path)) await removeTree(join(path, name));
  await fsp.rmdir(path);
}
