/**
 * Trees as git records them, for comparing an applied tree with a run's worktree: every path
 * (`.git` left out) with its kind, executable bit and bytes (a symlink: its target). Git records no
 * other permission bits and no empty directories, so neither is compared.
 */
import { createHash } from "node:crypto";
import * as fs from "node:fs";
import { join } from "node:path";

export interface TreeEntry {
  readonly mode: "100644" | "100755" | "120000";
  readonly sha256: string;
  readonly size: number;
  readonly bytes: Buffer;
}

export function treeOf(root: string, skip: (path: string) => boolean = (p) => p === ".git" || p.startsWith(".git/")): Map<string, TreeEntry> {
  const out = new Map<string, TreeEntry>();
  const walk = (rel: string): void => {
    for (const name of fs.readdirSync(join(root, rel)).sort()) {
      const path = rel === "" ? name : `${rel}/${name}`;
      if (skip(path)) continue;
      const full = join(root, path);
      const st = fs.lstatSync(full);
      if (st.isDirectory()) walk(path);
      else if (st.isSymbolicLink()) {
        const bytes = fs.readlinkSync(full, { encoding: "buffer" });
        out.set(path, { mode: "120000", sha256: sha(bytes), size: bytes.length, bytes });
      } else if (st.isFile()) {
        const bytes = fs.readFileSync(full);
        out.set(path, { mode: (st.mode & 0o100) !== 0 ? "100755" : "100644", sha256: sha(bytes), size: bytes.length, bytes });
      }
    }
  };
  walk("");
  return out;
}

function sha(bytes: Buffer): string {
  return `sha256:${createHash("sha256").update(bytes).digest("hex")}`;
}

/** Every difference between two trees, one line each (empty when they are the same). */
export function treeDifferences(expected: Map<string, TreeEntry>, actual: Map<string, TreeEntry>): string[] {
  const out: string[] = [];
  for (const [path, e] of expected) {
    const a = actual.get(path);
    if (a === undefined) out.push(`${path}: missing`);
    else if (a.mode !== e.mode) out.push(`${path}: mode ${a.mode}, expected ${e.mode}`);
    else if (a.sha256 !== e.sha256) out.push(`${path}: bytes ${a.sha256}, expected ${e.sha256}`);
  }
  for (const path of actual.keys()) if (!expected.has(path)) out.push(`${path}: not expected`);
  return out;
}
