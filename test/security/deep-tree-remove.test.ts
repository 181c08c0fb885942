/**
 * An agent can nest directories deeper than the node may hold descriptors (`mkdir d; cd d` in a
 * loop, in its home or its materialized tree). Removing such a tree by descriptor, one per level,
 * made every other open of the node fail (EMFILE) while it lasted, failed itself, and left a home
 * the next start could not sweep. The removal runs here in a child limited to 256 descriptors, on a
 * tree 3,000 levels deep with a directory of mode 000 and a symlink to a victim file deep inside:
 * it removes the tree whole, holds few descriptors at any time, and leaves the victim alone.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as path from "node:path";
import { pathToFileURL } from "node:url";
import { repo } from "../support/node.js";
import { tempDir } from "../support/temp.js";

const DEPTH = 3000;
const prlimit = ["/usr/bin/prlimit", "/bin/prlimit"].find((p) => fs.existsSync(p));

test("a tree nested deeper than the node's descriptors is removed whole, with few descriptors held, and no link followed", { skip: prlimit === undefined ? "prlimit (util-linux) is not installed" : false }, (t) => {
  const root = tempDir("deep-tree", (fn) => t.after(fn));
  const tree = path.join(root, "home");
  const victim = path.join(root, "victim.txt");
  fs.writeFileSync(victim, "not the agent's\n");
  fs.mkdirSync(tree);
  // Built as the agent would, by descending: the path soon passes PATH_MAX.
  const built = spawnSync(
    process.execPath,
    [
      "-e",
      `const fs = require("node:fs");
      process.chdir(process.argv[1]);
      for (let i = 0; i < ${DEPTH}; i++) {
        fs.mkdirSync("d");
        if (i === 1500) fs.chmodSync(".", 0o000 | 0o300);
        process.chdir("d");
        if (i % 500 === 0) fs.writeFileSync("f", "x");
        if (i === 2000) fs.symlinkSync(process.argv[2], "link");
      }`,
      tree,
      victim,
    ],
    { encoding: "utf8" },
  );
  assert.equal(built.status, 0, built.stderr);

  const removal = spawnSync(
    prlimit!,
    [
      "--nofile=256:256",
      "--",
      process.execPath,
      "--import",
      "tsx",
      "--input-type=module",
      "-e",
      `import { readdirSync } from "node:fs";
      const { removeTree } = await import(${JSON.stringify(pathToFileURL(path.join(repo, "src", "storage", "tree-remove.ts")).href)});
      let most = 0;
      const sample = setInterval(() => (most = Math.max(most, readdirSync("/proc/self/fd").length)), 1);
      await removeTree(process.argv[1]);
      clearInterval(sample);
      console.log(JSON.stringify({ most }));`,
      tree,
    ],
    { encoding: "utf8", cwd: repo },
  );
  assert.equal(removal.status, 0, removal.stderr);
  const { most } = JSON.parse(removal.stdout.trim().split("\n").at(-1)!) as { most: number };
  assert.equal(fs.existsSync(tree), false, "the tree is gone");
  assert.equal(fs.readFileSync(victim, "utf8"), "not the agent's\n", "the link's target is untouched");
  assert.ok(most < 160, `the removal held ${most} descriptors at once`);
});
