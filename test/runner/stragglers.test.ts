/**
 * The straggler search reads the run tag only of processes started since the agent: a descendant
 * is forked after its ancestor, so an older process carrying the same tag is not the run's and is
 * left alone, while one started after the agent is killed. Real processes, real /proc.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn, type ChildProcess } from "node:child_process";
import { randomUUID } from "node:crypto";
import { PROC, isRunning, procStat } from "../../src/runner/proc-stat.js";
import { RUN_TAG_VAR, killRunStragglers } from "../../src/runner/stragglers.js";

const linux = process.platform === "linux";

/** A process that waits until killed, in a group of its own, with `env` added to ours. */
function idle(env: Record<string, string>): ChildProcess {
  return spawn(process.execPath, ["-e", "setInterval(() => {}, 1 << 30)"], { env: { ...process.env, ...env }, detached: true, stdio: "ignore" });
}

function ticksOf(child: ChildProcess): number {
  const stat = procStat(PROC, child.pid!);
  assert.ok(stat !== undefined, `no /proc stat for pid ${child.pid}`);
  return Number(stat.startTicks);
}

function exited(child: ChildProcess): Promise<void> {
  return child.exitCode !== null || child.signalCode !== null ? Promise.resolve() : new Promise((done) => child.once("exit", () => done()));
}

test("only processes started since the agent are stragglers of its run", { skip: !linux && "needs /proc" }, async (t) => {
  const tag = randomUUID();
  const children: ChildProcess[] = [];
  t.after(() => {
    for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
  });
  // Older than the agent, yet carrying its tag (as no descendant of it could).
  const older = idle({ [RUN_TAG_VAR]: tag });
  children.push(older);
  const olderTicks = ticksOf(older);
  // The agent must start at a later clock tick (10 ms) than the older process, which a fast fork
  // may not: start it again until /proc shows it later.
  let agent = idle({});
  children.push(agent);
  while (ticksOf(agent) <= olderTicks) {
    agent.kill("SIGKILL");
    agent = idle({});
    children.push(agent);
  }
  const agentStartTicks = procStat(PROC, agent.pid!)!.startTicks;
  const younger = idle({ [RUN_TAG_VAR]: tag });
  children.push(younger);

  const killed = killRunStragglers(tag, { agentGroup: agent.pid, agentStartTicks });
  assert.deepEqual(killed, [younger.pid], "the straggler started after the agent is killed, and nothing else");
  await exited(younger);
  assert.ok(isRunning(procStat(PROC, older.pid!)), "a process older than the agent was killed as its straggler: it cannot descend from it");

  // Without the agent's start time every tagged process is looked at, as before.
  assert.deepEqual(killRunStragglers(tag, { agentGroup: agent.pid }), [older.pid]);
  await exited(older);
});
