/**
 * A change set between two directories, built from the format's definition alone (not from the
 * node's git-based computation): what `applyChangeSet` is tested against without a node.
 */
import { createHash } from "node:crypto";
import { EMPTY_SHA256 } from "../../src/core/digest.js";
import type { ChangeSetManifest, ChangedFile } from "../../src/changes/format.js";
import { treeOf, type TreeEntry } from "./trees.js";

function oid(bytes: Buffer): string {
  return createHash("sha1").update(`blob ${bytes.length}\0`).update(bytes).digest("hex");
}

function lines(bytes: Buffer): number {
  return bytes.length === 0 ? 0 : bytes.toString("latin1").split("\n").length - (bytes.at(-1) === 0x0a ? 1 : 0);
}

function file(path: string, oldPath: string | null, status: ChangedFile["status"], before: TreeEntry | undefined, after: TreeEntry | undefined): ChangedFile {
  const binary = [before, after].some((e) => e !== undefined && e.mode !== "120000" && e.bytes.includes(0));
  return {
    path,
    old_path: oldPath,
    status,
    old_mode: before?.mode ?? null,
    new_mode: after?.mode ?? null,
    old_oid: before === undefined ? null : oid(before.bytes),
    new_oid: after === undefined ? null : oid(after.bytes),
    old_sha256: (before?.sha256 ?? null) as ChangedFile["old_sha256"],
    new_sha256: (after?.sha256 ?? null) as ChangedFile["new_sha256"],
    old_size: before?.size ?? null,
    new_size: after?.size ?? null,
    binary,
    lines_added: binary ? null : after === undefined ? 0 : lines(after.bytes),
    lines_deleted: binary ? null : before === undefined ? 0 : lines(before.bytes),
    symlink_target: after?.mode === "120000" ? after.bytes.toString("utf8") : null,
  };
}

/** The manifest turning `baseDir` into `afterDir`; `renames` pairs (old, new) are listed as renames. */
export function manifestBetween(baseDir: string, afterDir: string, base: string, renames: readonly (readonly [string, string])[] = []): { manifest: ChangeSetManifest; blobs: Map<string, Buffer> } {
  const before = treeOf(baseDir);
  const after = treeOf(afterDir);
  const renamedFrom = new Map(renames.map(([o, n]) => [n, o]));
  const renamedAway = new Set(renames.map(([o]) => o));
  const files: ChangedFile[] = [];
  for (const [path, a] of after) {
    const from = renamedFrom.get(path);
    if (from !== undefined) files.push(file(path, from, "renamed", before.get(from), a));
    else {
      const b = before.get(path);
      if (b === undefined) files.push(file(path, null, "added", undefined, a));
      else if (b.mode !== a.mode || b.sha256 !== a.sha256) files.push(file(path, null, "modified", b, a));
    }
  }
  for (const [path, b] of before) if (!after.has(path) && !renamedAway.has(path)) files.push(file(path, null, "deleted", b, undefined));
  files.sort((x, y) => Buffer.compare(Buffer.from(x.path), Buffer.from(y.path)));
  const blobs = new Map<string, Buffer>();
  for (const [, a] of after) blobs.set(a.sha256, a.bytes);
  return { manifest: { v: 1, base, files, patch: { sha256: EMPTY_SHA256, size: 0 } }, blobs };
}
