/**
 * applyChangeSet against change sets built from the format alone (manifest-builder.ts): every kind
 * of change turns a copy of the base into the changed tree exactly (bytes, executable bits,
 * symlinks, deletions, renames, a file replaced by a directory), and every refusal leaves the
 * target exactly as it was.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import * as fs from "node:fs";
import { join } from "node:path";
import { applyChangeSet } from "../../src/changes/apply.js";
import type { Digest } from "../../src/core/digest.js";
import { WardenError } from "../../src/core/errors.js";
import { tempDir } from "../support/temp.js";
import { manifestBetween } from "./manifest-builder.js";
import { treeDifferences, treeOf } from "./trees.js";

const BASE = "a".repeat(40);

function write(root: string, path: string, content: string | Buffer, mode = 0o644): void {
  fs.mkdirSync(join(root, path, ".."), { recursive: true });
  fs.writeFileSync(join(root, path), content, { mode });
  fs.chmodSync(join(root, path), mode);
}

function makeBase(root: string): void {
  write(root, "keep.txt", "same\n");
  write(root, "edit.txt", "line1\nline2\n");
  write(root, "gone.txt", "bye\n");
  write(root, "move-me.txt", "moving content, kept mostly\nline two\n");
  write(root, "script.sh", "echo hi\n");
  write(root, "bin.dat", Buffer.from([0, 1, 2, 3, 255, 0, 7]));
  fs.symlinkSync("keep.txt", join(root, "link"));
  fs.symlinkSync("keep.txt", join(root, "becomes-file"));
  write(root, "dir/only.txt", "alone\n");
  write(root, "swap", "a file that becomes a directory\n");
}

function change(root: string): void {
  write(root, "edit.txt", "line1\nline2 changed\nline3\n");
  fs.rmSync(join(root, "gone.txt"));
  fs.rmSync(join(root, "move-me.txt"));
  write(root, "moved/here.txt", "moving content, kept mostly\nline two!\n");
  fs.chmodSync(join(root, "script.sh"), 0o755);
  write(root, "bin.dat", Buffer.from([0, 1, 2, 3, 254, 0, 7, 9]));
  fs.rmSync(join(root, "link"));
  fs.symlinkSync("edit.txt", join(root, "link"));
  fs.rmSync(join(root, "becomes-file"));
  write(root, "becomes-file", "now a file\n", 0o755);
  fs.rmSync(join(root, "dir"), { recursive: true });
  fs.rmSync(join(root, "swap"));
  write(root, "swap/inner.txt", "inside\n");
  write(root, "new/deep/file.txt", "brand new\n");
  fs.symlinkSync("../elsewhere", join(root, "new-link"));
  write(root, "empty.txt", "");
}

function copyTree(from: string, to: string): void {
  fs.cpSync(from, to, { recursive: true, verbatimSymlinks: true, preserveTimestamps: true });
}

function codeOf(error: unknown): string {
  assert.ok(error instanceof WardenError, String(error));
  return error.code;
}

describe("applying a change set", () => {
  let root: string;
  let base: string;
  let changed: string;
  let built: ReturnType<typeof manifestBetween>;
  before(() => {
    root = tempDir("apply");
    base = join(root, "base");
    changed = join(root, "changed");
    fs.mkdirSync(base);
    makeBase(base);
    copyTree(base, changed);
    change(changed);
    built = manifestBetween(base, changed, BASE, [["move-me.txt", "moved/here.txt"]]);
  });
  after(() => fs.rmSync(root, { recursive: true, force: true }));

  const blob = async (digest: Digest): Promise<Uint8Array> => {
    const bytes = built.blobs.get(digest);
    assert.ok(bytes !== undefined, `no blob ${digest}`);
    return bytes;
  };

  function target(name: string): string {
    const dir = join(root, name);
    copyTree(base, dir);
    return dir;
  }

  it("turns a copy of the base into the changed tree: every kind of change", async () => {
    const statuses = new Set(built.manifest.files.map((f) => f.status));
    assert.deepEqual([...statuses].sort(), ["added", "deleted", "modified", "renamed"]);
    const dir = target("whole");
    const report = await applyChangeSet(built.manifest, { root: dir, blob });
    assert.deepEqual(treeDifferences(treeOf(changed), treeOf(dir)), []);
    assert.equal(report.removed, 4); // gone.txt, move-me.txt, dir/only.txt, swap
    assert.equal(fs.existsSync(join(dir, "dir")), false, "a directory the change set empties is removed, as git does");
    assert.equal(fs.readlinkSync(join(dir, "new-link")), "../elsewhere");
    assert.deepEqual(fs.readdirSync(dir).filter((n) => n.startsWith(".warden-apply-")), []);
  });

  it("refuses a blob whose bytes differ from its digest by one byte, writing nothing", async () => {
    const dir = target("tampered-blob");
    const tampered = async (digest: Digest): Promise<Uint8Array> => {
      const bytes = Buffer.from(await blob(digest));
      if (bytes.length > 0) bytes[bytes.length - 1] = bytes[bytes.length - 1]! ^ 0x20;
      return bytes;
    };
    await assert.rejects(applyChangeSet(built.manifest, { root: dir, blob: tampered }), (e) => codeOf(e) === "change-set-blob-tampered");
    assert.deepEqual(treeDifferences(treeOf(base), treeOf(dir)), []);
  });

  it("refuses a target that is not the base where the change set reads it, writing nothing", async () => {
    const edited = target("not-base");
    write(edited, "edit.txt", "someone else's edit\n");
    const snapshot = treeOf(edited);
    await assert.rejects(applyChangeSet(built.manifest, { root: edited, blob }), (e) => codeOf(e) === "apply-target-mismatch" && /edit\.txt/.test((e as Error).message));
    assert.deepEqual(treeDifferences(snapshot, treeOf(edited)), []);

    const modeChanged = target("mode-changed");
    fs.chmodSync(join(modeChanged, "gone.txt"), 0o755);
    await assert.rejects(applyChangeSet(built.manifest, { root: modeChanged, blob }), (e) => codeOf(e) === "apply-target-mismatch" && /gone\.txt: has mode 100755/.test((e as Error).message));

    const occupied = target("occupied");
    write(occupied, "new/deep/file.txt", "already here\n");
    const before = treeOf(occupied);
    await assert.rejects(applyChangeSet(built.manifest, { root: occupied, blob }), (e) => codeOf(e) === "apply-target-exists");
    assert.deepEqual(treeDifferences(before, treeOf(occupied)), []);

    const applied = target("twice");
    await applyChangeSet(built.manifest, { root: applied, blob });
    await assert.rejects(applyChangeSet(built.manifest, { root: applied, blob }), (e) => codeOf(e) === "apply-target-mismatch");
    assert.deepEqual(treeDifferences(treeOf(changed), treeOf(applied)), []);
  });

  it("writes nothing through a symlink in the target", async () => {
    const outside = join(root, "outside");
    fs.mkdirSync(outside);
    const dir = target("escape");
    fs.symlinkSync(outside, join(dir, "new"));
    await assert.rejects(applyChangeSet(built.manifest, { root: dir, blob }), (e) => codeOf(e) === "apply-path-escapes");
    assert.deepEqual(fs.readdirSync(outside), []);
  });
});
