/**
 * At the agent's exit the group is SIGKILLed and then /proc is
 * scanned for the run tag. Members of the agent's own group, just signalled but not yet dead,
 * still carry the tag: they must not be counted (and journaled) as stragglers that left the group.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import * as fs from "node:fs";
import { randomUUID } from "node:crypto";
import type { EffectFinishedEvent } from "../../src/journal/types.js";

import { SCOPE, journalOf, openRunnerEnv } from "./helpers.js";
import { fixtureCommand, killFixture } from "./audit-fixture.js";
import { tempDir } from "../support/temp.js";

test("children left in the agent's own group are not journaled as stragglers_killed", async (t) => {
  const root = tempDir("review-stragglers");
  const env = await openRunnerEnv(root, { commands: { kimi: fixtureCommand(root) } });
  t.after(async () => {
    killFixture(root);
    await env.close();
    fs.rmSync(root, { recursive: true, force: true });
  });
  const counts: number[] = [];
  for (let i = 0; i < 20; i++) {
    const started = await env.runner.start({ scope: SCOPE, id: randomUUID(), request: { provider: "kimi", prompt: "work group-holding", timeout_s: 5 } });
    assert.equal(started.status, "started");
    if (started.status !== "started") return;
    const outcome = await started.done;
    assert.equal(outcome.status, "recorded", JSON.stringify(outcome));
    if (outcome.status !== "recorded") return;
    const j = await journalOf(env, outcome.audit.run_id);
    const finish = j.entries.map((e) => e.event).find((e): e is EffectFinishedEvent => e.type === "effect.finished" && e.effect_id === "process");
    counts.push((finish?.detail as { stragglers_killed?: number }).stragglers_killed ?? 0);
  }
  assert.deepEqual(counts, new Array(20).fill(0), "a child inside the agent's group, killed with it, was counted as a straggler that left the group");
});
