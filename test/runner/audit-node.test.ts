/**
 * The node itself stopped while an agent runs (audit, session 9), with a real node process
 * (children/audit-node.ts) and a real misbehaving agent (children/audit-agent.cjs):
 *
 * - kill -9: the agent and a setsid daemon it started go on running (nobody can stop them then);
 *   the next node on the home kills both before it does anything else, the run reads unresolved,
 *   and its inspection names the agent's pid and host for the operator to check.
 * - SIGTERM: the node closes (grace, then the agents' groups are killed) and its process exits by
 *   itself within a bound, also when the agent left a setsid helper holding its stdout.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as path from "node:path";
import { hostname } from "node:os";
import { spawn, type ChildProcess } from "node:child_process";
import { fileURLToPath } from "node:url";
import { openWarden } from "../../src/warden/facade.js";

import { diesWithin, isAlive } from "./helpers.js";
import { fixtureCommand, fixturePids, killFixture } from "./audit-fixture.js";
import { waitFor } from "../support/wait.js";
import { tempDir } from "../support/temp.js";

const NODE = fileURLToPath(new URL("./children/audit-node.ts", import.meta.url));
const linuxOnly = { skip: process.platform !== "linux" && "needs /proc" };

interface Node {
  readonly child: ChildProcess;
  readonly launched: Promise<{ run_id: string; agent: number }>;
  readonly exited: Promise<{ code: number | null; signal: string | null; stdout: string; stderr: string }>;
}

function setup(t: { after(fn: () => unknown): void }): { root: string; home: string; wrapper: string; pids(): number[] } {
  const root = tempDir("runner-audit-node");
  const wrapper = fixtureCommand(root);
  const pids = (): number[] => fixturePids(root);
  t.after(() => {
    killFixture(root);
    fs.rmSync(root, { recursive: true, force: true });
  });
  return { root, home: path.join(root, "home"), wrapper, pids };
}

function startNode(t: { after(fn: () => unknown): void }, home: string, wrapper: string, prompt: string, graceMs: number): Node {
  const child = spawn(process.execPath, ["--import", "tsx", NODE, home, wrapper, prompt, String(graceMs)], { stdio: ["ignore", "pipe", "pipe"] });
  t.after(() => {
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
  });
  let stdout = "";
  let stderr = "";
  let onLine: ((line: string) => void) | undefined;
  child.stdout!.on("data", (c: Buffer) => {
    stdout += c.toString();
    const first = stdout.split("\n")[0]!;
    if (stdout.includes("\n") && onLine !== undefined) {
      onLine(first);
      onLine = undefined;
    }
  });
  child.stderr!.on("data", (c: Buffer) => (stderr += c.toString()));
  const exited = new Promise<{ code: number | null; signal: string | null; stdout: string; stderr: string }>((resolve) =>
    child.on("close", (code, signal) => resolve({ code, signal, stdout, stderr })),
  );
  const launched = new Promise<{ run_id: string; agent: number }>((resolve, reject) => {
    onLine = (line) => resolve(JSON.parse(line) as { run_id: string; agent: number });
    void exited.then((e) => reject(new Error(`the node exited before launching: ${e.stderr}`)));
  });
  return { child, launched, exited };
}

test("kill -9 of the node: its agent and the agent's setsid daemon run on until the next node kills them; the run reads unresolved and names where the agent ran", linuxOnly, async (t) => {
  const { root, home, wrapper, pids } = setup(t);
  const node = startNode(t, home, wrapper, "work hang-with-escapee", 10_000);
  const { run_id: runId, agent } = await node.launched;
  await waitFor("the agent's daemon", () => pids().length === 2 || undefined);
  const daemon = pids()[1]!;
  node.child.kill("SIGKILL");
  await node.exited;

  // Nobody watches them now: the effects go on.
  const effects = path.join(root, "effects");
  const size = (): number => (fs.existsSync(effects) ? fs.statSync(effects).size : 0);
  const before = size();
  await waitFor("the daemon's effects to go on after the node died", () => size() > before || undefined);
  assert.equal(isAlive(agent), true);

  const warden = await openWarden({ home, providers: { kimi: { command: wrapper } } });
  try {
    assert.deepEqual([...warden.reapedAgents.killed].sort(), [agent, daemon].sort(), "the next node kills the agent and its daemon at open");
    assert.equal(await diesWithin(agent, 2000), true);
    assert.equal(await diesWithin(daemon, 2000), true);
    const listed = await warden.invocations.list({ status: "unresolved" });
    const run = listed.items.find((i) => i.run_id === runId);
    assert.ok(run !== undefined, `the run is listed unresolved: ${JSON.stringify(listed)}`);
    const inspection = await warden.invocations.inspect(run.scope, run.id);
    assert.equal(inspection.report.status, "unresolved");
    assert.deepEqual(inspection.report.journal.agent_process, { pid: agent, host: hostname() }, "the operator is told where the agent ran");
    assert.ok(inspection.report.journal.open_effects.includes("process"));
  } finally {
    await warden.close({ graceMs: 0 });
  }
});

test("SIGTERM of the node while its agent hangs with a setsid helper holding stdout: the node exits by itself, in bounded time, and the run reads unresolved", linuxOnly, async (t) => {
  const { home, wrapper, pids } = setup(t);
  const node = startNode(t, home, wrapper, "work hang-with-holding-escapee", 300);
  const { agent } = await node.launched;
  await waitFor("the agent's helper", () => pids().length === 2 || undefined);
  const t0 = Date.now();
  node.child.kill("SIGTERM");
  let timer: NodeJS.Timeout | undefined;
  const exit = await Promise.race([
    node.exited,
    new Promise<undefined>((resolve) => (timer = setTimeout(() => resolve(undefined), 60_000))),
  ]);
  clearTimeout(timer);
  assert.ok(exit !== undefined, `the node has not exited ${Date.now() - t0} ms after SIGTERM (stdout: ${JSON.stringify(node.child.stdout?.readableLength)})`);
  assert.equal(exit.code, 0, exit.stderr);
  assert.ok(exit.stdout.includes("closed\n"));
  assert.equal(isAlive(agent), false);
  assert.equal(await diesWithin(pids()[1]!, 2000), true, "the helper outlived its node's shutdown");

  const warden = await openWarden({ home, providers: { kimi: { command: wrapper } } });
  try {
    assert.deepEqual(warden.reapedAgents.killed, [], "a clean shutdown left nothing for the next node to reap");
    const listed = await warden.invocations.list({ status: "unresolved" });
    assert.equal(listed.items.length, 1, JSON.stringify(listed));
  } finally {
    await warden.close({ graceMs: 0 });
  }
});
