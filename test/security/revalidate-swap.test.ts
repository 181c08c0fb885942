/**
 * The launch check of a materialization (`revalidate`, DESIGN.md "Providers": re-validated before
 * launch; G8: tampered bytes are detected, never launched) racing a process of the node's user
 * that swaps a directory of the tree for a symlink to an identical copy outside the root. A walk
 * by path reads the copy after the swap and approves a tree that, when it answers, holds a
 * symlink out of the root. The check must instead refuse (a typed drift code) whenever the swap
 * came before its answer.
 *
 * The swap is made from this process, synchronously, after a varying number of event-loop turns
 * of the check: the check had not answered yet exactly when its promise had not settled.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as path from "node:path";
import { WardenError } from "../../src/core/errors.js";
import { Materializer } from "../../src/providers/materializer.js";
import { MemorySource, fullBundleFiles, type BundleFile } from "../providers/helpers.js";
import { tempDir } from "../support/temp.js";

const BIG_FILES = 100;
const ROUNDS = 80;

describe("security: a directory of a materialization swapped for a symlink while it is revalidated", () => {
  let dir: string;
  before(() => {
    dir = tempDir("security-revalswap");
  });
  after(() => fs.rmSync(dir, { recursive: true, force: true }));

  it("never approves a tree whose directory became a symlink before the answer", async () => {
    const big: BundleFile[] = Array.from({ length: BIG_FILES }, (_, i) => ({
      path: `docs/big/f${String(i).padStart(3, "0")}.md`,
      kind: "file",
      content: `file ${i}\n`.repeat(20),
    }));
    const source = new MemorySource();
    source.add("b", "r1", [...fullBundleFiles(), ...big]);
    const mat = new Materializer({ root: path.join(dir, "mat"), source });
    const m = await mat.materialize({ provider: "claude", bundle: { bundle_id: "b", revision: "r1" }, session: "a" });
    const bigDir = path.join(m.root, "bundle", "docs", "big");
    // The attacker's copy: the same names, modes and bytes, outside the root.
    const copy = path.join(dir, "copy");
    fs.cpSync(bigDir, copy, { recursive: true });
    await mat.revalidate("a"); // the untouched tree passes

    const counts = { swappedBeforeAnswer: 0, approvedAfterSwap: 0, refused: new Map<string, number>(), untouchedPassed: 0 };
    for (let round = 0; round < ROUNDS; round++) {
      let settled = false;
      const answer = mat.revalidate("a").then(
        () => "pass" as const,
        (error: unknown) => error,
      );
      void answer.then(() => (settled = true));
      for (let turns = 0; turns < 1 + ((round * 13) % 120); turns++) await new Promise((resolve) => setImmediate(resolve));
      let swapped = false;
      if (!settled) {
        fs.renameSync(bigDir, `${bigDir}.real`);
        fs.symlinkSync(copy, bigDir);
        swapped = true;
        counts.swappedBeforeAnswer++;
      }
      const outcome = await answer;
      if (outcome === "pass") {
        if (swapped) counts.approvedAfterSwap++;
        else counts.untouchedPassed++;
      } else {
        assert.ok(outcome instanceof WardenError, `an untyped failure: ${String(outcome)}`);
        assert.ok(swapped, `the untouched tree was refused: ${outcome.code}`);
        counts.refused.set(outcome.code, (counts.refused.get(outcome.code) ?? 0) + 1);
      }
      if (swapped) {
        fs.unlinkSync(bigDir);
        fs.renameSync(`${bigDir}.real`, bigDir);
      }
    }
    const summary = `rounds ${ROUNDS}, swapped before the answer ${counts.swappedBeforeAnswer}, approved after a swap ${counts.approvedAfterSwap}, refused ${JSON.stringify(Object.fromEntries(counts.refused))}, passed untouched ${counts.untouchedPassed}`;
    console.log(`revalidate-swap: ${summary}`);
    assert.ok(counts.swappedBeforeAnswer >= 10, `the race was not run: ${summary}`);
    assert.equal(counts.approvedAfterSwap, 0, `revalidation approved a tree holding a symlink out of the root: ${summary}`);
    // The tree is whole again, and still passes.
    await mat.revalidate("a");
    await mat.cleanup("a");
    assert.deepEqual(fs.readdirSync(copy).length, BIG_FILES, "the copy outside the root was touched");
  });
});
