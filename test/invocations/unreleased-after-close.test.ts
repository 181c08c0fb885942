/**
 * Invocations.close() stops the background retry of releases that
 * could not be stored, as the stores close next. A run that settles after that (Warden.close waits
 * for runs a bounded time only) and fails its release started a new retry timer, which then tried
 * a closed store every few seconds for the rest of the process's life.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { UnreleasedRuns } from "../../src/invocations/unreleased.js";
import { StorageError } from "../../src/core/errors.js";

test("a release failing after stop() starts no retry timer", async () => {
  let calls = 0;
  const claims = {
    release: async (): Promise<void> => {
      calls++;
      throw new StorageError("storage-closed", "the store is closed");
    },
  };
  const runs = new UnreleasedRuns(claims, 10);
  runs.stop(); // Invocations.close()
  await assert.rejects(runs.release({ scope: "s", id: "i" }, "run-1"));
  assert.equal(calls, 1);
  // A pause, not a wait: it checks that nothing happens (no retry, at the 10 ms interval), which has no moment to wait for.
  await new Promise((r) => setTimeout(r, 120));
  assert.equal(calls, 1, `the closed store was tried ${calls - 1} more times after close`);
});
