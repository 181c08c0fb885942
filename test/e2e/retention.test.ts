/**
 * A node applies result retention by itself (G4, `limits.resultRetentionMs`): at open and then on
 * its interval it drops result payloads recorded before the period, and the captured outputs last
 * written before it, and nothing else. Identity and outcome stay: a late retry is answered
 * `recorded` with `expired: true` and never re-run.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import * as fs from "node:fs";
import { join } from "node:path";
import { openWarden } from "../../src/warden/facade.js";

import { READY_MS, waitFor } from "../support/wait.js";
import { tempDir } from "../support/temp.js";

const SCOPE = "api:ops";
const request = { task: "retained" };

test("a node drops result payloads and captured outputs older than resultRetentionMs on its own, and keeps every identity", async (t) => {
  const home = tempDir("retention");
  t.after(() => fs.rmSync(home, { recursive: true, force: true }));
  const retentionMs = 300;
  const warden = await openWarden({ home, limits: { resultRetentionMs: retentionMs }, retentionIntervalMs: 50 });
  t.after(() => warden.close());
  const outputs = join(home, "outputs");
  // Captures as the runner names them: one last written long ago, one written "later" (its mtime
  // is in the future, so it never falls out of the period during the test), one foreign file.
  const old = join(outputs, `${randomUUID()}.stdout`);
  const fresh = join(outputs, `${randomUUID()}.stderr`);
  const foreign = join(outputs, "notes.txt");
  for (const path of [old, fresh, foreign]) fs.writeFileSync(path, "output\n", { mode: 0o600 });
  fs.utimesSync(old, new Date(Date.now() - 60_000), new Date(Date.now() - 60_000));
  fs.utimesSync(foreign, new Date(Date.now() - 60_000), new Date(Date.now() - 60_000));
  fs.utimesSync(fresh, new Date(Date.now() + 3_600_000), new Date(Date.now() + 3_600_000));

  const id = randomUUID();
  const recorded = await warden.invocations.run(SCOPE, id, request, "agent", () => ({ answer: 42 }));
  assert.equal(recorded.status, "recorded");
  const answer = await warden.invocations.lookup(SCOPE, id, request);
  assert.deepEqual(answer?.status === "recorded" && answer.result, { answer: 42 }, "kept within the period");

  await waitFor("the payload to be pruned", async () => {
    const seen = await warden.invocations.lookup(SCOPE, id, request);
    return (seen?.status === "recorded" && seen.expired === true) || undefined;
  }, READY_MS, 20);
  await waitFor("the old capture to go", () => !fs.existsSync(old) || undefined, READY_MS, 20);
  assert.equal(fs.existsSync(fresh), true, "a capture written within the period stays");
  assert.equal(fs.existsSync(foreign), true, "only the runner's captures are retention's to remove");
  // The identity outlives the payload: the same request replays, another one is refused, nothing re-runs.
  let ran = false;
  const again = await warden.invocations.run(SCOPE, id, request, "agent", () => {
    ran = true;
    return {};
  });
  assert.equal(ran, false);
  assert.equal(again.status === "recorded" && again.expired && again.replayed, true);
  await assert.rejects(warden.invocations.open(SCOPE, id, { task: "other" }, "agent"), { code: "idempotency-conflict" });
});
