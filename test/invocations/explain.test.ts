/**
 * The words the CLI's `inspect` and the console's Reconcile page both show for why a run's
 * agent died at its memory bound: one function, so the two say the same.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { explainMemoryBound } from "../../src/invocations/explain.js";

test("a memory bound's kills are told with the bound in MiB, or without it when the note has none", () => {
  assert.equal(explainMemoryBound({ bytes: 256 * 1024 * 1024, processes_killed: 2 }), "the kernel killed 2 processes of the run at its memory bound (256 MiB)");
  assert.equal(explainMemoryBound({ bytes: null, processes_killed: 1 }), "the kernel killed 1 process of the run at its memory bound");
});
