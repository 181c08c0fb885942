/**
 * The node's git calls hold their output in memory: one given a bound is killed past it and
 * refused `git-output-too-large` (the change set's patch, which an agent's files make as large as
 * they are), not read to the end.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { git } from "../../src/changes/git.js";

test("a git call past its output bound is refused git-output-too-large; within it, answered whole", async () => {
  const whole = await git({ args: ["version"] });
  assert.match(whole.toString("utf8"), /^git version /);
  assert.deepEqual(await git({ args: ["version"], maxOutputBytes: whole.length }), whole);
  await assert.rejects(git({ args: ["version"], maxOutputBytes: whole.length - 1 }), (e: unknown) => (e as { code?: string }).code === "git-output-too-large");
});
