/**
 * Reaping agents orphaned by a dead node: a process is killed when it carries this home's tag and
 * the node process its tag names is gone (pid and start time), together with the session and group
 * it leads; a session nothing tagged is left in is found by the node's launch record, checked
 * against the recorded leader's start time. Agents of a live node on the same home, and agents of
 * other homes, are left alone. Real processes, real /proc.
 */
import { after, test } from "node:test";
import assert from "node:assert/strict";
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { closeSync, mkdirSync, mkdtempSync, openSync, readdirSync, readFileSync, readlinkSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { AGENT_TAG_VAR, agentTagOf, reapOrphanedAgents } from "../../src/runner/orphans.js";
import { identityOf, killGroupIfStillRecorded, type ProcessIdentity } from "../support/processes.js";

const CLEAN_ENV_AGENT = fileURLToPath(new URL("./children/clean-env-agent.cjs", import.meta.url));
const ORPHAN_NODE = fileURLToPath(new URL("./children/orphan-node.ts", import.meta.url));
const linuxOnly = { skip: process.platform !== "linux" && "needs /proc" };

const root = mkdtempSync(join(tmpdir(), "warden-orphans-"));
const children: ChildProcess[] = [];
/**
 * leaders of sessions and groups started here, as they were while known to run: killed as groups,
 * whatever a test left behind, unless their pids are another process's by then
 */
const groups: ProcessIdentity[] = [];
const leads = (pid: number): void => {
  const leader = identityOf(pid);
  if (leader !== undefined) groups.push(leader);
};
after(() => {
  for (const child of children) child.kill("SIGKILL");
  for (const leader of groups) killGroupIfStillRecorded(leader);
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

test("kills the agents of a dead node on this home, and nothing else", linuxOnly, async () => {
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
    // Any state but dead: a live process is also seen in D (waiting on the disk), as on a busy machine.
    assert.equal(running(alive.pid!), true, "still running");
  }
  assert.deepEqual(reapOrphanedAgents(home).killed, [], "nothing left to reap");
});

/** A tag of this home naming a node process that has exited. */
function deadNodeTag(home: string): string {
  const [hash, , ticks] = agentTagOf(home)!.split(".");
  const dead = spawnSync(process.execPath, ["-e", "console.log(process.pid)"], { encoding: "utf8" });
  return `${hash}.${Number(dead.stdout.trim())}.${ticks}`;
}

interface Stat {
  readonly state: string;
  readonly sid: number;
  readonly start: number;
}

function statOf(pid: number): Stat | undefined {
  let text: string;
  try {
    text = readFileSync(`/proc/${pid}/stat`, "utf8");
  } catch {
    return undefined;
  }
  const f = text.slice(text.lastIndexOf(")") + 2).split(" ");
  return { state: f[0]!, sid: Number(f[3]), start: Number(f[19]) };
}

/** Running: present and not a zombie (a killed orphan lingers as one until init collects it). */
const running = (pid: number): boolean => {
  const state = statOf(pid)?.state;
  return state !== undefined && state !== "Z" && state !== "X";
};

async function goneWithin(pid: number, ms: number): Promise<boolean> {
  for (const deadline = Date.now() + ms; Date.now() < deadline; await new Promise((r) => setTimeout(r, 20))) {
    if (!running(pid)) return true;
  }
  return !running(pid);
}

function firstLine(child: ChildProcess): Promise<string> {
  return new Promise((resolve, reject) => {
    let text = "";
    child.stdout!.on("data", (d: Buffer) => {
      text += String(d);
      const nl = text.indexOf("\n");
      if (nl >= 0) resolve(text.slice(0, nl));
    });
    child.once("exit", () => reject(new Error(`exited before a line: ${text}`)));
  });
}

/** clean-env-agent.cjs as the leader of its own session, with `env`: answers it and its clean child. */
async function cleanEnvAgent(env: NodeJS.ProcessEnv): Promise<{ leader: ChildProcess; child: number }> {
  const leader = spawn(process.execPath, [CLEAN_ENV_AGENT], { detached: true, env, stdio: ["ignore", "pipe", "ignore"] });
  children.push(leader);
  leads(leader.pid!);
  const child = Number(await firstLine(leader));
  assert.equal(readFileSync(`/proc/${child}/environ`).length, 0, "the agent's child has an empty environment: no tag");
  assert.equal(statOf(child)?.sid, leader.pid, "and sits in the agent's session");
  return { leader, child };
}

interface OrphanNode {
  readonly node: ChildProcess;
  readonly leader: number;
  readonly child: number;
  readonly record: string;
}

/** children/orphan-node.ts: a node that launched one clean-env agent for `home`, recorded. */
async function orphanNode(home: string, mode?: "leader-exits"): Promise<OrphanNode> {
  const node = spawn(process.execPath, ["--import", "tsx", ORPHAN_NODE, home, ...(mode === undefined ? [] : [mode])], { stdio: ["ignore", "pipe", "inherit"] });
  children.push(node);
  const line = JSON.parse(await firstLine(node)) as { leader: number; child: number; record: string };
  leads(line.leader);
  return { ...line, node };
}

const sorted = (pids: readonly number[]): number[] => [...pids].sort((a, b) => a - b);
const recordsOf = (home: string): string[] => readdirSync(join(home, "agents")).sort();

test("a dead node's tagged agent dies with its session: also its child with a clean environment", linuxOnly, async () => {
  const home = mkdtempSync(join(root, "session-"));
  const { leader, child } = await cleanEnvAgent({ ...process.env, [AGENT_TAG_VAR]: deadNodeTag(home) });
  const reaped = reapOrphanedAgents(home);
  assert.deepEqual(sorted(reaped.killed), sorted([leader.pid!, child]));
  assert.equal(await exited(leader), "SIGKILL");
  assert.equal(await goneWithin(child, 5000), true, "the untagged child was killed with its session");
});

test("a session whose leader exited after its node died is found by the launch record, which is then dropped", linuxOnly, async () => {
  const home = mkdtempSync(join(root, "record-"));
  const launched = await orphanNode(home, "leader-exits");
  assert.deepEqual(recordsOf(home), [launched.record], "the node recorded its agent at launch");
  launched.node.kill("SIGKILL");
  await exited(launched.node);
  assert.equal(await goneWithin(launched.leader, 5000), true, "the agent left once its node was gone");
  assert.equal(running(launched.child), true, "leaving its clean-env child orphaned in its session");
  assert.equal(statOf(launched.child)?.sid, launched.leader);

  const reaped = reapOrphanedAgents(home);
  assert.deepEqual(reaped.killed, [launched.child]);
  assert.equal(await goneWithin(launched.child, 5000), true);
  assert.deepEqual(recordsOf(home), [], "the record is dropped");
  assert.deepEqual(reapOrphanedAgents(home).killed, []);
});

test("the agent and record of a live node are left alone; once it is killed, its agent's session goes", linuxOnly, async () => {
  const home = mkdtempSync(join(root, "live-"));
  const launched = await orphanNode(home);
  assert.deepEqual(reapOrphanedAgents(home).killed, []);
  assert.equal(running(launched.leader) && running(launched.child), true);
  assert.deepEqual(recordsOf(home), [launched.record]);

  launched.node.kill("SIGKILL");
  await exited(launched.node);
  // A pause, not a wait: what this checks is that nothing happens (no parent-death signal, no
  // agent that quits once its node's pipes close), and the absence of an event has no moment to
  // wait for. A wrong kill would show here on an idle machine; under load it still shows below,
  // where the reaper must find both processes alive to kill them.
  await new Promise((r) => setTimeout(r, 100));
  assert.equal(running(launched.leader) && running(launched.child), true, "a node killed with -9 leaves its agent running");
  const reaped = reapOrphanedAgents(home);
  assert.deepEqual(sorted(reaped.killed), sorted([launched.leader, launched.child]));
  assert.equal(await goneWithin(launched.leader, 5000), true);
  assert.equal(await goneWithin(launched.child, 5000), true);
  assert.deepEqual(recordsOf(home), []);
});

test("a record is acted on only for its own leader (start time), boot and pid namespace", linuxOnly, async () => {
  const home = mkdtempSync(join(root, "verify-"));
  const agents = join(home, "agents");
  mkdirSync(agents, { mode: 0o700 });
  // No tag at all: only a record can mark this session as an agent's.
  const { [AGENT_TAG_VAR]: _tag, ...untagged } = process.env;
  const { leader, child } = await cleanEnvAgent(untagged);
  const pid = leader.pid!;
  const start = statOf(pid)!.start;
  const [, deadNode, deadTicks] = deadNodeTag(home).split(".");
  const boot = readFileSync("/proc/sys/kernel/random/boot_id", "utf8").trim().replace(/-/g, "");
  const pidns = /^pid:\[(\d+)\]$/.exec(readlinkSync("/proc/self/ns/pid"))![1]!;
  const record = (b: string, ns: string | number, s: number): string => {
    const name = `${b}.${ns}.${pid}.${s}.${deadNode}.${deadTicks}`;
    closeSync(openSync(join(agents, name), "wx", 0o600));
    return name;
  };
  record(boot, pidns, start + 1); // the pid now belongs to another process: reused
  record("0".repeat(32), pidns, start); // a previous boot: its processes are all gone
  const otherNs = record(boot, Number(pidns) + 1, start); // numbers of another pid namespace

  assert.deepEqual(reapOrphanedAgents(home).killed, []);
  assert.equal(running(pid) && running(child), true, "nothing killed on a record that does not name them");
  assert.deepEqual(recordsOf(home), [otherNs], "stale records dropped; another namespace's left alone");

  // The same session, recorded with its leader's true start time by a node that is gone.
  record(boot, pidns, start);
  assert.deepEqual(sorted(reapOrphanedAgents(home).killed), sorted([pid, child]));
  assert.equal(await exited(leader), "SIGKILL");
  assert.equal(await goneWithin(child, 5000), true);
  assert.deepEqual(recordsOf(home), [otherNs]);
});

test("a foreign name among the records refuses before anything is killed", linuxOnly, async () => {
  const home = mkdtempSync(join(root, "foreign-"));
  mkdirSync(join(home, "agents"), { mode: 0o700 });
  closeSync(openSync(join(home, "agents", "not-a-record"), "wx", 0o600));
  const orphan = await sleeper(deadNodeTag(home));
  assert.throws(() => reapOrphanedAgents(home), { name: "UnsafeStorageError", code: "unsafe-storage-name" });
  assert.equal(running(orphan.pid!), true, "a refused records directory stops the reaping altogether");
  assert.deepEqual(readdirSync(join(home, "agents")), ["not-a-record"], "and changes nothing");
  // The reaper signals synchronously, before it returns or throws: had it sent SIGKILL, that would
  // be how the orphan ends, whatever is sent after. Ended here by SIGTERM, it was sent nothing.
  orphan.kill("SIGTERM");
  assert.equal(await exited(orphan), "SIGTERM", "the reaper sent the orphan no signal");
});

test("without /proc nothing is tagged or reaped", () => {
  const home = mkdtempSync(join(root, "noproc-"));
  const missing = join(root, "no-proc-here");
  assert.equal(agentTagOf(home, missing), undefined);
  assert.deepEqual(reapOrphanedAgents(home, missing), { supported: false, killed: [] });
});
