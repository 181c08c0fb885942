/**
 * Processes an agent leaves outside its own process group (audit, session 9). The runner kills
 * the agent's group when the agent exits; a helper that called setsid is not in it:
 *
 * - holding the agent's stdout, it kept the run from ever ending (the pipe never closed, and the
 *   timeout only signals the group that is already gone): the run stayed in_progress forever,
 *   its capacity slot was never given back, and the node could not exit at shutdown;
 * - with its output elsewhere (a daemon done right), it went on acting after the run was recorded.
 *
 * A real fixture agent (children/audit-agent.cjs) misbehaves each way; every pid it starts is
 * listed in <root>/pids and killed after the test, whatever happened.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as path from "node:path";
import { randomUUID } from "node:crypto";
import type { ExistingOutcome } from "../../src/invocations/index.js";
import type { EffectFinishedEvent } from "../../src/journal/types.js";

import { SCOPE, diesWithin, isAlive, journalOf, openRunnerEnv, type RunnerEnv } from "./helpers.js";
import { fixtureCommand, fixturePids, killFixture } from "./audit-fixture.js";
import { tempDir } from "../support/temp.js";
/** Past every bound under test (timeout_s 2, the quiet bound): a run still going then hangs. */
const DEADLINE_MS = 8_000;

interface Setup {
  readonly env: RunnerEnv;
  readonly root: string;
  /** pids the fixture started, the agent first */
  pids(): number[];
}

async function setup(t: { after(fn: () => unknown): void }): Promise<Setup> {
  const root = tempDir("runner-audit-escapes");
  const env = await openRunnerEnv(root, { commands: { kimi: fixtureCommand(root) } });
  const pids = (): number[] => fixturePids(root);
  t.after(async () => {
    killFixture(root);
    await env.close();
    fs.rmSync(root, { recursive: true, force: true });
  });
  return { env, root, pids };
}

/** Runs `prompt` on the fixture; rejects when the run has not ended by DEADLINE_MS. */
async function runWithin(env: RunnerEnv, prompt: string): Promise<{ outcome: ExistingOutcome; ms: number }> {
  const t0 = Date.now();
  const started = await env.runner.start({ scope: SCOPE, id: randomUUID(), request: { provider: "kimi", prompt, timeout_s: 2 } });
  assert.equal(started.status, "started");
  if (started.status !== "started") throw new Error("unreachable");
  let timer: NodeJS.Timeout | undefined;
  const hung = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`the run of "${prompt}" has not ended ${DEADLINE_MS} ms after its start (its timeout is 2 s)`)), DEADLINE_MS);
  });
  try {
    const outcome = await Promise.race([started.done, hung]);
    return { outcome, ms: Date.now() - t0 };
  } finally {
    clearTimeout(timer);
  }
}

async function processFinish(env: RunnerEnv, runId: string): Promise<EffectFinishedEvent> {
  const j = await journalOf(env, runId);
  assert.equal(j.ok, true);
  const finish = j.entries.map((e) => e.event).find((e): e is EffectFinishedEvent => e.type === "effect.finished" && e.effect_id === "process");
  assert.ok(finish !== undefined, "the process effect is finished in the journal");
  return finish;
}

test("a setsid helper left holding the agent's stdout: the run still ends, and the helper is killed with it", async (t) => {
  const { env, pids } = await setup(t);
  const { outcome } = await runWithin(env, "work escape-holding");
  const [agent, helper] = pids();
  assert.ok(helper !== undefined, "the fixture started its helper");
  assert.equal(isAlive(agent!), false);
  assert.equal(await diesWithin(helper, 2000), true, "the helper outside the agent's group is killed when the agent exits");
  // Nothing unknown is left: the helper was found and stopped, the agent exited 0 by itself.
  assert.equal(outcome.status, "recorded", JSON.stringify(outcome));
  if (outcome.status !== "recorded") return;
  const finish = await processFinish(env, outcome.audit.run_id);
  assert.equal(finish.outcome, "succeeded");
  assert.equal((finish.detail as { stragglers_killed?: number }).stragglers_killed, 1, "the journal says a straggler was killed");
});

test("a setsid daemon the agent leaves behind does not go on acting after the run is recorded", async (t) => {
  const { env, root, pids } = await setup(t);
  const { outcome } = await runWithin(env, "work escape-quiet");
  assert.equal(outcome.status, "recorded", JSON.stringify(outcome));
  const daemon = pids()[1];
  assert.ok(daemon !== undefined, "the fixture started its daemon");
  assert.equal(await diesWithin(daemon, 2000), true, "the daemon outlived the run it belongs to");
  // Its effects (ticks appended every 50 ms) have stopped.
  const effects = path.join(root, "effects");
  const size = (): number => (fs.existsSync(effects) ? fs.statSync(effects).size : 0);
  const before = size();
  // A pause, not a wait: it checks that nothing happens (no tick from a daemon that ticked every 50 ms), which has no moment to wait for.
  await new Promise((r) => setTimeout(r, 300));
  assert.equal(size(), before, "the daemon's effects go on after the run was recorded");
});

test("an untagged helper (empty environment) holding the output: reading stops after the quiet bound and the run reads unresolved", async (t) => {
  const { env, pids } = await setup(t);
  const { outcome, ms } = await runWithin(env, "work escape-clean-holding");
  // The agent exited at once; the quiet bound (at least 500 ms, the kill grace here is 300) ended it.
  assert.ok(ms < 5_000, `the run took ${ms} ms`);
  // Something that may still act for the run was not stopped: the run is not recorded as clean.
  assert.equal(outcome.status, "unresolved", JSON.stringify(outcome));
  if (outcome.status !== "unresolved") return;
  const finish = await processFinish(env, outcome.audit.run_id);
  assert.equal(finish.outcome, "unknown");
  assert.equal((finish.detail as { output_held_open?: boolean }).output_held_open, true);
  assert.equal((finish.detail as { exit_code: number | null }).exit_code, 0, "the agent's own exit is still journaled");
  const helper = pids()[1]!;
  assert.equal(isAlive(helper), true, "(the fixture's helper is the kind no kill can find)");
});

test("a helper inside the agent's group holding its stdout dies with the agent; the run is recorded", async (t) => {
  const { env, pids } = await setup(t);
  const { outcome, ms } = await runWithin(env, "work group-holding");
  assert.equal(outcome.status, "recorded", JSON.stringify(outcome));
  assert.ok(ms < 3_000, `the run took ${ms} ms: the group kill at the agent's exit closes the helper's pipe`);
  assert.equal(await diesWithin(pids()[1]!, 2000), true);
});
