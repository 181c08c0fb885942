/**
 * A hostile agent racing the cleanup of its own materialized session (DESIGN.md "Providers":
 * materializations are removed on cleanup; G10: never follow a link). The agent can write into
 * `<root>/<session>/` (it runs as the node's user) and may leave a process behind that outlives
 * its group. While warden empties a directory of the tree, that process swaps the directory for a
 * symlink to a victim directory holding files of the same names. A removal that walks by path
 * then resolves `<dir>/<name>` through the link and deletes the victim's files; one that walks
 * by descriptor only ever touches what it listed.
 *
 * The swap is made from this process between two steps of the removal (it awaits each file
 * system call), once the removal has started deleting inside the directory: deterministic,
 * without timing.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as path from "node:path";
import { syncBuiltinESMExports } from "node:module";
import { Materializer } from "../../src/providers/materializer.js";
import { removeTree } from "../../src/storage/tree-remove.js";
import { MemorySource, fullBundleFiles } from "../providers/helpers.js";
import { tempDir } from "../support/temp.js";

const FILES = 400;
const names = Array.from({ length: FILES }, (_, i) => `v${String(i).padStart(4, "0")}`);

/** Resolves once `dir` has lost `count` of its entries (the removal is under way inside it). */
async function whenEmptiedBy(dir: string, count: number): Promise<void> {
  for (let spins = 0; spins < 200_000; spins++) {
    if (fs.readdirSync(dir).length <= FILES - count) return;
    await new Promise((resolve) => setImmediate(resolve));
  }
  throw new Error(`${dir} was never emptied`);
}

/**
 * Waits until `removal` has started deleting inside `dir`, then swaps `dir` for a symlink to
 * `victim`, as the agent's leftover process would, and lets the removal finish (an error is fine).
 */
async function swapDuring(removal: Promise<void>, dir: string, victim: string): Promise<void> {
  const settled = removal.then(
    () => undefined,
    () => undefined,
  );
  await whenEmptiedBy(dir, 5);
  fs.renameSync(dir, `${dir}.moved`);
  fs.symlinkSync(victim, dir);
  await settled;
}

function fill(dir: string): void {
  fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
  for (const n of names) fs.writeFileSync(path.join(dir, n), "x", { mode: 0o600 });
}

describe("security: removing a session tree while its agent swaps a directory for a symlink", () => {
  let dir: string;
  before(() => {
    dir = tempDir("security-cleanup");
  });
  after(() => fs.rmSync(dir, { recursive: true, force: true }));

  it("Materializer.cleanup deletes nothing outside the session", async () => {
    const source = new MemorySource();
    source.add("b", "r1", fullBundleFiles());
    const mat = new Materializer({ root: path.join(dir, "mat"), source });
    const m = await mat.materialize({ provider: "claude", bundle: { bundle_id: "b", revision: "r1" }, session: "s1" });
    const victim = path.join(dir, "victim");
    fill(victim);
    // What the agent wrote into its plugin tree.
    const planted = path.join(m.root, "bundle", "skills", "zz-planted");
    fill(planted);

    await swapDuring(mat.cleanup("s1"), planted, victim);

    assert.deepEqual(fs.readdirSync(victim).sort(), names, "files outside the materializations root were deleted");
  });

  it("removeTree of a directory whose subdirectory becomes a symlink mid-walk leaves the link's target alone", async () => {
    const tree = path.join(dir, "tree");
    const victim = path.join(dir, "victim2");
    fill(victim);
    const sub = path.join(tree, "sub");
    fill(sub);
    await swapDuring(removeTree(tree), sub, victim);
    assert.deepEqual(fs.readdirSync(victim).sort(), names, "removeTree followed a symlink swapped in mid-walk");
  });
  it("an entry the agent adds after the walk listed a directory (the second step of a swap) is removed too: nothing is left", async () => {
    // The swap is a rename and then a symlink; a walk between the two empties the directory and
    // then finds the link at rmdir (ENOTEMPTY). The link is made here at exactly that moment, by
    // wrapping rmdir of the tree's root: the first call finds the directory not empty.
    const tree = path.join(dir, "tree3");
    const victim = path.join(dir, "victim3");
    fill(victim);
    fill(path.join(tree, "bundle"));
    const rmdir = fs.promises.rmdir;
    let planted = 0;
    fs.promises.rmdir = async (target: fs.PathLike, options?: fs.RmDirOptions) => {
      if (target === tree && planted++ === 0) fs.symlinkSync(victim, path.join(tree, "bundle"));
      return rmdir(target, options);
    };
    syncBuiltinESMExports();
    try {
      await removeTree(tree);
    } finally {
      fs.promises.rmdir = rmdir;
      syncBuiltinESMExports();
    }
    assert.equal(planted, 2, "the root's rmdir ran once with the planted link and once after the walk removed it");
    assert.equal(fs.existsSync(tree), false, "the tree was left behind with the entry planted in it");
    assert.deepEqual(fs.readdirSync(victim).sort(), names, "the planted link's target lost files");
  });
});
