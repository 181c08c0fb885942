/**
 * Reaping agents orphaned by a dead node: a process is killed only when it carries this home's tag
 * and the node process its tag names is gone (pid and start time); agents of a live node on the
 * same home, and agents of other homes, are left alone. Real processes, real /proc.
 */
import { after, test } from "node:test";
import assert from "node:assert/strict";
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { AGENT_TAG_VAR, agentTagOf, reapOrphanedAgents } from "../../src/runner/orphans.js";

const root = mkdtempSync(join(tmpdir(), "warden-orphans-"));
const children: ChildProcess[] = [];
after(() => {
  for (const child of children) child.kill("SIGKILL");
  rmSync(root, { recursive: true, force: true });
});

function sleeper(tag: string): Promise<ChildProcess> {
  const child = spawn(process.execPath, ["-e", "setInterval(() => {}, 1 << 30)"], { env: { ...process.env, [AGENT_TAG_VAR]: tag }, stdio: "ignore" });
  children.push(child);
  return new Promise((resolve, reject) => {
    child.once("spawn", () => resolve(child));
    child.once("error", reject);
  });
}

const exited = (child: ChildProcess): Promise<NodeJS.Signals | null> =>
  child.exitCode !== null || child.signalCode !== null ? Promise.resolve(child.signalCode) : new Promise((resolve) => child.once("exit", (_c, s) => resolve(s)));

test("kills the agents of a dead node on this home, and nothing else", { skip: process.platform !== "linux" && "needs /proc" }, async () => {
  const home = mkdtempSync(join(root, "home-"));
  const otherHome = mkdtempSync(join(root, "other-"));
  const live = agentTagOf(home)!;
  assert.match(live, /^[0-9a-f]{32}\.\d+\.\d+$/);
  const [hash, , ticks] = live.split(".");
  // A node process that has exited: its pid is free (or reused by something with another start time).
  const dead = spawnSync(process.execPath, ["-e", "console.log(process.pid)"], { encoding: "utf8" });
  const deadPid = Number(dead.stdout.trim());
  const deadTag = `${hash}.${deadPid}.${ticks}`;
  // This very process, but with another start time: a reused pid is not the node.
  const reusedTag = `${hash}.${process.pid}.${Number(ticks) + 1}`;

  const ofLiveNode = await sleeper(live);
  const ofDeadNode = await sleeper(deadTag);
  const ofReusedPid = await sleeper(reusedTag);
  const ofOtherHome = await sleeper(`${agentTagOf(otherHome)!.split(".")[0]}.${deadPid}.${ticks}`);
  const malformed = await sleeper(`${hash}.not-a-pid`);

  const reaped = reapOrphanedAgents(home);
  assert.equal(reaped.supported, true);
  assert.deepEqual([...reaped.killed].sort(), [ofDeadNode.pid!, ofReusedPid.pid!].sort());
  assert.equal(await exited(ofDeadNode), "SIGKILL");
  assert.equal(await exited(ofReusedPid), "SIGKILL");
  for (const alive of [ofLiveNode, ofOtherHome, malformed]) {
    assert.equal(alive.exitCode, null);
    assert.equal(alive.signalCode, null);
    assert.match(readFileSync(`/proc/${alive.pid!}/stat`, "utf8"), /\) [RS] /, "still running");
  }
  assert.deepEqual(reapOrphanedAgents(home).killed, [], "nothing left to reap");
});

test("without /proc nothing is tagged or reaped", () => {
  const home = mkdtempSync(join(root, "noproc-"));
  const missing = join(root, "no-proc-here");
  assert.equal(agentTagOf(home, missing), undefined);
  assert.deepEqual(reapOrphanedAgents(home, missing), { supported: false, killed: [] });
});
