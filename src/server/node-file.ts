/**
 * `<home>/node.json` = `{url, pid}` while a node serves from that home, so the CLI on the same
 * machine finds it. Written create-new (a stale file of a node that was killed is replaced: only
 * one node can hold a home's stores at a time) and removed on clean shutdown.
 */
import * as fs from "node:fs";
import { join } from "node:path";
import { errnoCode, isStorageFull, storageFull } from "../core/errors.js";
import { publishNewFile, readPrivateFileSync } from "../storage/secure-fs.js";

export const NODE_FILE = "node.json";

export interface NodeFile {
  readonly url: string;
  readonly pid: number;
}

export async function writeNodeFile(home: string, record: NodeFile): Promise<void> {
  const path = join(home, NODE_FILE);
  fs.rmSync(path, { force: true });
  try {
    await publishNewFile(path, `${JSON.stringify(record)}\n`);
  } catch (error) {
    // A fleet node keeps nothing else in its home: this is where it meets a full disk first.
    throw isStorageFull(error) ? storageFull(`write ${path}`, error) : error;
  }
}

/**
 * Removes the file if it is still this process's. A file that does not parse as one (edited by
 * hand, cut short) is not known to be ours: it is left alone, and the shutdown goes on.
 */
export function removeNodeFile(home: string, pid = process.pid): void {
  const path = join(home, NODE_FILE);
  let text: string;
  try {
    text = readPrivateFileSync(path, 4096).toString("utf8");
  } catch (error) {
    if (errnoCode(error) === "ENOENT") return;
    throw error;
  }
  let current: unknown;
  try {
    current = JSON.parse(text);
  } catch {
    return;
  }
  if (typeof current === "object" && current !== null && (current as Partial<NodeFile>).pid === pid) fs.rmSync(path, { force: true });
}
