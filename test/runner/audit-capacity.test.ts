/**
 * Run slots and shutdown with misbehaving agents (audit, session 9), on a real Warden with a
 * real fixture agent (children/audit-agent.cjs): a slot comes back however its agent ended, also
 * when the agent left a setsid helper holding its stdout; `close` stops agents that ignore
 * SIGTERM or never end, within a bound, and their runs read unresolved.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as path from "node:path";
import { randomUUID } from "node:crypto";
import { isWardenError } from "../../src/core/errors.js";
import { openWarden, type Warden } from "../../src/warden/facade.js";

import { diesWithin, isAlive } from "./helpers.js";
import { fixtureCommand, fixturePids, fixtureProcesses, killFixture } from "./audit-fixture.js";
import { killGroupIfStillRecorded, type RecordedProcess } from "../support/processes.js";
import { waitFor } from "../support/wait.js";
import { tempDir } from "../support/temp.js";

interface Setup {
  readonly home: string;
  readonly wrapper: string;
  readonly warden: Warden;
  pids(): number[];
  processes(): RecordedProcess[];
}

async function setup(t: { after(fn: () => unknown): void }, activeRuns = 1): Promise<Setup> {
  const root = tempDir("runner-audit-capacity");
  const wrapper = fixtureCommand(root);
  const home = path.join(root, "home");
  const warden = await open(home, wrapper, activeRuns);
  const pids = (): number[] => fixturePids(root);
  const processes = (): RecordedProcess[] => fixtureProcesses(root);
  t.after(async () => {
    killFixture(root);
    await warden.close({ graceMs: 0 });
    fs.rmSync(root, { recursive: true, force: true });
  });
  return { home, wrapper, warden, pids, processes };
}

function open(home: string, wrapper: string, activeRuns: number): Promise<Warden> {
  return openWarden({
    home,
    limits: { activeRuns },
    providers: { kimi: { command: wrapper } },
    agentEnv: { PATH: process.env.PATH, WARDEN_FIXTURE_STARTS: path.join(path.dirname(home), "starts") },
    // watched from outside (pids, a starts file beside the workspace): unconfined by explicit choice
    isolation: "none",
    killGraceMs: 300,
  });
}

const request = (prompt: string): { provider: string; prompt: string; timeout_s: number } => ({ provider: "kimi", prompt, timeout_s: 600 });

test("the one run slot comes back after an agent killed by a signal and after one killed from outside", async (t) => {
  const { warden, pids, processes } = await setup(t);
  const crashed = await warden.start("audit", randomUUID(), request("work crash-signal"));
  assert.equal(crashed.status, "started");
  assert.equal((await (crashed as { done: Promise<{ status: string }> }).done).status, "unresolved");
  assert.equal(warden.activeRuns, 0);

  const hanging = await warden.start("audit", randomUUID(), request("work hang"));
  assert.equal(hanging.status, "started");
  await assert.rejects(warden.start("audit", randomUUID(), request("work exit-now")), (e: unknown) => isWardenError(e) && e.code === "run-capacity-exhausted");
  await waitFor("the hanging agent", () => pids().length === 2 || undefined);
  assert.equal(killGroupIfStillRecorded(processes()[1]!), true, "the hanging agent's group was killed");
  assert.equal((await (hanging as { done: Promise<{ status: string }> }).done).status, "unresolved");

  const next = await warden.start("audit", randomUUID(), request("work exit-now"));
  assert.equal(next.status, "started", "the slot was given back");
  assert.equal((await (next as { done: Promise<{ status: string }> }).done).status, "recorded");
});

test("the slot comes back after an agent that exited leaving a setsid helper holding its stdout", async (t) => {
  const { warden } = await setup(t);
  const first = await warden.start("audit", randomUUID(), request("work escape-holding"));
  assert.equal(first.status, "started");
  // The agent exits at once; its slot must not wait for a helper it left behind.
  await waitFor("the run's slot to be given back", () => warden.activeRuns === 0 || undefined, 60_000).catch((error: unknown) => {
    throw new Error(`${String(error)}: the slot stays taken while the helper holds the agent's stdout (limit 1: the node takes no more runs)`);
  });
  const next = await warden.start("audit", randomUUID(), request("work exit-now"));
  assert.equal(next.status, "started");
  await (next as { done: Promise<unknown> }).done;
});

test("close with an agent that ignores SIGTERM and one that never ends: bounded, both groups killed, both runs unresolved", async (t) => {
  const { home, wrapper, warden, pids } = await setup(t, 2);
  const ids = [randomUUID(), randomUUID()];
  await warden.start("audit", ids[0]!, request("work ignore-term"));
  await warden.start("audit", ids[1]!, request("work hang"));
  await waitFor("both agents", () => pids().length === 2 || undefined);
  const agents = pids();
  const t0 = Date.now();
  await warden.close({ graceMs: 300 });
  const ms = Date.now() - t0;
  assert.ok(ms < 3_000, `close took ${ms} ms`);
  for (const pid of agents) assert.equal(await diesWithin(pid, 1000), true, `agent ${pid} outlived the shutdown`);
  assert.equal(agents.some(isAlive), false);

  const again = await openWarden({ home, providers: { kimi: { command: wrapper } } });
  try {
    assert.deepEqual(again.reapedAgents.killed, [], "nothing was left running for the next node");
    for (const id of ids) assert.equal((await again.lookup("audit", id))?.status, "unresolved");
  } finally {
    await again.close({ graceMs: 0 });
  }
});
