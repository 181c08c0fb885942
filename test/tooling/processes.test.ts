/**
 * The clean-ups of tests that record pids (test/support/processes.ts, the runner tests' starts
 * file, the audit fixture's pids file): a recorded process whose pid now runs another process is
 * not signalled, neither it nor the process group it leads; what is still the recorded process,
 * or its group, is. A whole suite run wraps pid_max (often 32768), and a test's clean-up that
 * signals a pid blindly kills another test's process (an agent leads its own process group).
 *
 * The reuse is real where this process may set the pid the kernel hands out next
 * (/proc/sys/kernel/ns_last_pid: root in its pid namespace); everywhere, a live process is recorded
 * with a start time that is not its own, which is what a reused pid looks like.
 */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { spawn, type ChildProcess } from "node:child_process";
import { accessSync, constants, writeFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { identityOf, isAlive, killGroupIfStillRecorded, killIfStillRecorded, signalChildGroup, type ProcessIdentity } from "../support/processes.js";
import { killStarts } from "../runner/helpers.js";
import { killFixture } from "../runner/audit-fixture.js";
import { tempDir } from "../support/temp.js";
import { waitFor } from "../support/wait.js";

const PROC_START = fileURLToPath(new URL("../fixtures/agents/proc-start.cjs", import.meta.url));
const NS_LAST_PID = "/proc/sys/kernel/ns_last_pid";
const linuxOnly = { skip: process.platform !== "linux" && "needs /proc" };
/** How often to try to get a freed pid back before failing: another process may take it first. */
const REUSE_TRIES = Number(process.env.WARDEN_TEST_PID_REUSE_TRIES ?? 200);

interface Echo {
  readonly child: ChildProcess;
  readonly pid: number;
  readonly exited: Promise<NodeJS.Signals | null>;
}

/**
 * A process that echoes its stdin, leader of its own process group (as warden starts an agent).
 * Answers once it runs (its first echo).
 */
async function echo(): Promise<Echo> {
  const child = spawn(process.execPath, ["-e", 'process.stdin.on("data", (d) => process.stdout.write(d))'], { detached: true, stdio: ["pipe", "pipe", "ignore"] });
  const exited = new Promise<NodeJS.Signals | null>((resolve) => child.once("exit", (_code, signal) => resolve(signal)));
  const e = { child, pid: child.pid!, exited };
  await answers(e);
  return e;
}

/**
 * Resolves once `e` echoed a line, which it cannot do after a SIGKILL sent to it earlier (the
 * kernel ends a process with a SIGKILL pending before it runs its own code again): so a line back
 * proves that nothing killed it before this was called. Rejects when it exits instead.
 */
function answers(e: Echo): Promise<void> {
  const token = `ping-${Math.random()}\n`;
  return new Promise((resolve, reject) => {
    let got = "";
    const onData = (d: Buffer): void => {
      got += d.toString();
      if (!got.includes(token)) return;
      e.child.stdout!.off("data", onData);
      resolve();
    };
    e.child.stdout!.on("data", onData);
    void e.exited.then((signal) => reject(new Error(`the process exited (signal ${signal}) instead of answering`)));
    e.child.stdin!.write(token);
  });
}

function stop(e: Echo): void {
  signalChildGroup(e.child, "SIGKILL");
}

/** The records a fixture writes for `p`: the audit fixture's pids file and a starts file line. */
function recordAsFixtures(root: string, p: ProcessIdentity): { startsFile: string } {
  writeFileSync(join(root, "pids"), `${p.pid} ${p.startTicks}\n`);
  const startsFile = join(root, "starts.log");
  writeFileSync(startsFile, `${JSON.stringify({ provider: "claude", pid: p.pid, startTicks: p.startTicks, argv: [], cwd: root })}\n`);
  return { startsFile };
}

/** Every clean-up of a recorded process or group, as the tests run them at their end. */
function cleanUps(root: string, startsFile: string, recorded: ProcessIdentity): boolean[] {
  killFixture(root);
  killStarts(startsFile);
  return [killIfStillRecorded(recorded), killGroupIfStillRecorded(recorded)];
}

function mayChooseNextPid(): boolean {
  try {
    accessSync(NS_LAST_PID, constants.W_OK);
    return true;
  } catch {
    return false;
  }
}

describe("test clean-ups and reused pids", linuxOnly, () => {
  it("a recorded agent's pid handed to another process group leader: no clean-up signals it or its group", { skip: !mayChooseNextPid() && `cannot write ${NS_LAST_PID} (not root in this pid namespace): the next test covers the same check` }, async (t) => {
    const root = tempDir("processes-reuse", (fn) => t.after(fn));
    const first = await echo();
    const recorded = identityOf(first.pid)!;
    const { startsFile } = recordAsFixtures(root, recorded);
    first.child.kill("SIGKILL");
    assert.equal(await first.exited, "SIGKILL");

    // Node reaped it: its pid is free. Ask the kernel for it again (the next pid is last + 1).
    let other: Echo | undefined;
    for (let i = 0; i < REUSE_TRIES && other === undefined; i++) {
      writeFileSync(NS_LAST_PID, String(recorded.pid - 1));
      const candidate = await echo();
      if (candidate.pid === recorded.pid) other = candidate;
      else stop(candidate);
    }
    assert.ok(other !== undefined, `pid ${recorded.pid} was not handed out again in ${REUSE_TRIES} tries (other processes took it first)`);
    const reused = other;
    t.after(() => stop(reused));
    assert.notEqual(identityOf(reused.pid)?.startTicks, recorded.startTicks, "a later process: another start time");

    assert.deepEqual(cleanUps(root, startsFile, recorded), [false, false], "nothing was signalled");
    await answers(reused);
  });

  it("a recorded pid held by a process with another start time is not signalled, nor its group; with its own start time it is", async (t) => {
    const root = tempDir("processes-identity", (fn) => t.after(fn));
    const other = await echo();
    t.after(() => stop(other));
    const own = identityOf(other.pid)!;
    const recorded = { pid: other.pid, startTicks: String(Number(own.startTicks) - 1) };
    const { startsFile } = recordAsFixtures(root, recorded);

    assert.deepEqual(cleanUps(root, startsFile, recorded), [false, false], "nothing was signalled");
    await answers(other);

    // The same process recorded as it is: the clean-up kills it.
    const again = recordAsFixtures(root, own);
    killStarts(again.startsFile);
    assert.equal(await other.exited, "SIGKILL");
  });

  it("a recorded group leader that exited: what is left in its group is still killed", async (t) => {
    // The leader starts a member of its group, prints its pid, and exits.
    const leader = spawn(process.execPath, ["-e", 'const c = require("node:child_process").spawn(process.execPath, ["-e", "setInterval(() => {}, 1 << 30)"], { stdio: "ignore" }); console.log(c.pid); c.unref()'], {
      detached: true,
      stdio: ["ignore", "pipe", "ignore"],
    });
    const recorded = identityOf(leader.pid!)!;
    let out = "";
    leader.stdout.on("data", (d: Buffer) => (out += d.toString()));
    await new Promise((resolve) => leader.once("close", resolve));
    const member = Number(out.trim());
    assert.ok(member > 0 && isAlive(member), `the leader's member runs: ${JSON.stringify(out)}`);
    t.after(() => killIfStillRecorded(identityOf(member) ?? { pid: member }));
    assert.equal(identityOf(recorded.pid), undefined, "the leader is gone (reaped), its pid not yet reused");

    assert.equal(killGroupIfStillRecorded(recorded), true);
    await waitFor(`member ${member} of the killed group to die`, () => (isAlive(member) ? undefined : true));
  });

  it("the fixtures' start time is the one the node reads (src/runner/proc-stat.ts)", async () => {
    const child = spawn(process.execPath, ["-e", `console.log(require(${JSON.stringify(PROC_START)}).startTicksOf(process.pid)); setInterval(() => {}, 1 << 30)`], { stdio: ["ignore", "pipe", "ignore"] });
    try {
      let out = "";
      child.stdout.on("data", (d: Buffer) => (out += d.toString()));
      const line = await waitFor("the child's start time line", () => (out.includes("\n") ? out.trim() : undefined));
      assert.match(line, /^[0-9]+$/);
      assert.equal(line, identityOf(child.pid!)?.startTicks);
    } finally {
      child.kill("SIGKILL");
    }
  });
});
