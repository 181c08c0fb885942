/**
 * A hostile agent against the machine's memory and process ids, under the node's control groups
 * (real bubblewrap, the kernel's cgroup v1 memory and pids hierarchies): it writes a memfd far
 * past its run's memory bound (memory charged to no process, which the OOM killer could not pin
 * on it) and forks past its task bound (which RLIMIT_NPROC does not enforce on a node running as
 * root). Each is checked against a node with the groups turned off, where the same attack goes
 * through, so the test tells the two apart. And what a dead node left in its groups is killed and
 * removed when the node starts again.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import { randomUUID } from "node:crypto";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { fileURLToPath } from "node:url";
import { openWarden, type Warden } from "../../src/warden/facade.js";
import { RunCgroups } from "../../src/sandbox/run-cgroups.js";
import { isAlive } from "../support/processes.js";
import { waitFor } from "../support/wait.js";
import { cliCommand } from "../support/node.js";

const HOSTILE = fileURLToPath(new URL("../fixtures/agents/hostile.mjs", import.meta.url));
const MiB = 1024 * 1024;
const MEMORY = 192 * MiB;
const TASKS = 64;
const LIMITS = { memoryBytes: MEMORY, allRunsMemoryBytes: 2 * MEMORY, tasks: TASKS, allRunsCpuWeight: 25 };

const probe = RunCgroups.open(os.tmpdir(), LIMITS);
const skip = "reason" in probe ? `this machine gives the node no control groups: ${probe.reason}` : false;
const cpuSkip = skip !== false ? skip : (probe as RunCgroups).cpu ? false : "no cgroup v1 cpu hierarchy is mounted";

/**
 * Memory the test holds can be kept from the run's group's bound only where it cannot be swapped
 * out from under the bound: no swap, or swap counted in the bound (memsw).
 */
function unswappable(): string | false {
  const swaps = fs.readFileSync("/proc/swaps", "utf8").trim().split("\n").length > 1;
  if (!swaps || "reason" in probe) return false;
  return fs.existsSync(path.join(path.dirname((probe as RunCgroups).runDirs("x").memory), "..", "memory.memsw.limit_in_bytes")) ? false : "this machine swaps without counting swap in a memory group's bound";
}

/** A spinner pinned to CPU 0 for up to 60 s, printing `<wall s> <its CPU s>` every 10 ms. */
const SAMPLER = `
import os, time
os.sched_setaffinity(0, {0})
end = time.time() + 60
last = 0
while time.time() < end:
    now = time.time()
    if now - last >= 0.01:
        print(now, time.process_time(), flush=True)
        last = now
`;

function procsOf(dir: string): number[] {
  return fs
    .readFileSync(path.join(dir, "cgroup.procs"), "utf8")
    .split("\n")
    .filter((l) => l !== "")
    .map(Number);
}

function entriesOf(bytes: Uint8Array): Record<string, unknown>[] {
  return Buffer.from(bytes)
    .toString("utf8")
    .trim()
    .split("\n")
    .map((l) => (JSON.parse(l) as { entry: { event: Record<string, unknown> } }).entry.event);
}

/** The agent's own record of one attempt (its stdout line `<what>: <result>`). */
function attempt(tail: string, prefix: string): string | undefined {
  return tail
    .split("\n")
    .find((l) => l.startsWith(`${prefix}: `))
    ?.slice(prefix.length + 2);
}

describe("security: a run's memory and tasks are bounded by its control groups", { skip }, () => {
  let root: string;
  let bounded: Warden;
  let plain: Warden;
  /** the runs of the bounded node, as launched */
  const launched: string[] = [];
  let groups: RunCgroups;

  before(async () => {
    root = fs.mkdtempSync(path.join(os.tmpdir(), "warden-cgroups-"));
    for (const d of ["ws", "ws-plain"]) fs.mkdirSync(path.join(root, d));
    const providers = { kimi: { command: HOSTILE, promptArgs: ["--", "{prompt}"] } };
    const limits = { memoryBytes: MEMORY, allRunsMemoryBytes: 2 * MEMORY, processes: TASKS };
    bounded = await openWarden({
      home: path.join(root, "home"),
      workspaces: { main: path.join(root, "ws") },
      providers,
      sandbox: { limits },
      runnerHooks: {
        afterLaunch: (_pid, runId) => {
          launched.push(runId);
        },
      },
    });
    groups = RunCgroups.open(path.join(root, "home", "runs"), LIMITS) as RunCgroups;
    plain = await openWarden({ home: path.join(root, "home-plain"), workspaces: { main: path.join(root, "ws-plain") }, providers, sandbox: { limits, cgroups: false } });
  });
  after(async () => {
    await bounded?.close();
    await plain?.close();
    // A failed test may leave a run's groups: as the next start of those homes would, remove them.
    for (const home of ["home", "home-dead"]) if (fs.existsSync(path.join(root, home, "runs"))) (RunCgroups.open(path.join(root, home, "runs"), LIMITS) as RunCgroups).sweep();
    fs.rmSync(root, { recursive: true, force: true });
  });

  it("a memfd past the run's bound is stopped by the kernel inside the run, and the journal says so; the node serves on", async () => {
    const before = launched.length;
    const id = randomUUID();
    const outcome = await bounded.invoke("test", id, { provider: "kimi", prompt: JSON.stringify({ memfd: 3 * MEMORY }), workspace: "main" });
    const runId = launched[before];
    assert.ok(runId !== undefined, "the run was not launched");
    const tail = (outcome as unknown as { result?: { output_tail?: string } }).result?.output_tail ?? "";
    assert.ok(!(attempt(tail, "memfd") ?? "").startsWith("wrote"), `the agent wrote ${3 * MEMORY} bytes into memory past a ${MEMORY}-byte bound:\n${tail}`);
    const entries = entriesOf(await bounded.readJournal(runId));
    const started = entries[0] as { isolation: { profile: { cgroup?: unknown } } };
    assert.deepEqual(started.isolation.profile.cgroup, { memory_bytes: MEMORY, all_runs_memory_bytes: 2 * MEMORY, tasks: TASKS, ...(groups.cpu ? { all_runs_cpu_weight: 25 } : {}) });
    const note = entries.find((e) => e.type === "note" && e.memory_bound !== undefined) as { memory_bound: { bytes: number; processes_killed: number } } | undefined;
    assert.ok(note !== undefined && note.memory_bound.bytes === MEMORY && note.memory_bound.processes_killed >= 1, `no memory_bound note in the journal: ${JSON.stringify(entries.filter((e) => e.type === "note"))}`);
    // What an operator inspecting the run reads, and what `journal verify` says bounded it.
    assert.deepEqual((await bounded.inspect("test", id)).report.journal.memory_bound, note.memory_bound);
    const file = path.join(root, "memfd.jsonl");
    fs.writeFileSync(file, await bounded.readJournal(runId));
    const verified = spawnSync(process.execPath, [...cliCommand, "journal", "verify", file, "--home", path.join(root, "home")], { encoding: "utf8", env: { ...process.env, WARDEN_HOME: "" } });
    assert.equal(verified.status, 0, verified.stderr);
    const cpu = groups.cpu ? ", all runs' CPU weight 25" : "";
    assert.ok(verified.stdout.includes(`; memory at most 192.0 MiB (all runs 384.0 MiB), tasks at most ${TASKS}${cpu} (control groups)`), verified.stdout);
    // The run's groups are gone with it, and with the node's last run its parents too.
    const dirs = groups.runDirs(runId);
    assert.equal(fs.existsSync(dirs.memory), false, `${dirs.memory} outlived its run`);
    assert.equal(fs.existsSync(dirs.pids), false, `${dirs.pids} outlived its run`);
    assert.equal(fs.existsSync(path.dirname(dirs.memory)), false, "the node's runs' group outlived its last run");
    const next = await bounded.invoke("test", randomUUID(), { provider: "kimi", prompt: "{}", workspace: "main" });
    assert.equal(next.status, "recorded", JSON.stringify(next));

    // Without the groups the same write goes through: the bound above is what stopped it.
    const free = await plain.invoke("test", randomUUID(), { provider: "kimi", prompt: JSON.stringify({ memfd: 3 * MEMORY }), workspace: "main" });
    const freeTail = (free as unknown as { result: { output_tail: string } }).result.output_tail;
    assert.equal(attempt(freeTail, "memfd"), `wrote ${3 * MEMORY}`, freeTail);
  });

  it("forks past the run's task bound fail, on a node running as root too", async () => {
    const want = 4 * TASKS;
    const outcome = await bounded.invoke("test", randomUUID(), { provider: "kimi", prompt: JSON.stringify({ tasks: want }), workspace: "main" });
    assert.equal(outcome.status, "recorded", JSON.stringify(outcome));
    const tail = (outcome as unknown as { result: { output_tail: string } }).result.output_tail;
    const got = attempt(tail, "tasks");
    assert.ok(got !== undefined && !got.startsWith("not attempted"), `the fork attempt could not be made (${got}): this test needs python3 at /usr/bin/python3`);
    const m = /^(\d+) of (\d+) (\w+)$/.exec(got);
    assert.ok(m !== null && Number(m[1]) < TASKS && m[3] === "EAGAIN", `the agent started ${got} processes under a bound of ${TASKS} tasks`);
    const started = entriesOf(await bounded.readJournal((outcome as unknown as { audit: { run_id: string } }).audit.run_id))[0] as { isolation: { profile: { limits: Record<string, number> } } };
    // The keys sandbox.limits leaves out keep their defaults.
    assert.deepEqual(started.isolation.profile.limits, { processes: TASKS, cpu_seconds: 14_400, file_size_bytes: 8 * 1024 ** 3, open_files: 16_384 });
    if (process.getuid?.() === 0) {
      // As root, RLIMIT_NPROC (the same 64) binds nothing: without the groups every fork succeeds.
      const free = await plain.invoke("test", randomUUID(), { provider: "kimi", prompt: JSON.stringify({ tasks: want }), workspace: "main" });
      assert.equal(attempt((free as unknown as { result: { output_tail: string } }).result.output_tail, "tasks"), `${want} of ${want}`);
    }
  });

  it("a run whose groups cannot be made does not start, and is recorded failed", { skip: unswappable() }, async () => {
    const home = path.join(root, "home-full");
    const small = { memoryBytes: 64 * MiB, allRunsMemoryBytes: 64 * MiB, processes: TASKS };
    const node = await openWarden({ home, workspaces: { main: path.join(root, "ws") }, providers: { kimi: { command: HOSTILE, promptArgs: ["--", "{prompt}"] } }, sandbox: { limits: small } });
    // The node's runs' group already holds 96 MiB no one can reclaim (a memfd; there is no swap
    // to push it to), so it cannot be bounded to 64 MiB.
    const parent = path.dirname((RunCgroups.open(path.join(home, "runs"), LIMITS) as RunCgroups).runDirs("x").memory);
    fs.mkdirSync(parent);
    const holder = spawn("/usr/bin/python3", ["-c", "import os, sys\nsys.stdin.readline()\nfd = os.memfd_create('hold')\nos.write(fd, b'x' * (96 << 20))\nprint('held', flush=True)\nsys.stdin.readline()"], { stdio: ["pipe", "pipe", "inherit"] });
    try {
      await new Promise((resolve) => holder.once("spawn", resolve));
      fs.writeFileSync(path.join(parent, "cgroup.procs"), String(holder.pid));
      holder.stdin.write("go\n");
      await new Promise<void>((resolve, reject) => {
        holder.stdout.on("data", (d: Buffer) => d.toString().includes("held") && resolve());
        holder.once("exit", (code) => reject(new Error(`the memory holder exited (${code}) before it held its memory`)));
      });
      const outcome = await node.invoke("test", randomUUID(), { provider: "kimi", prompt: JSON.stringify({ write: [path.join(root, "ws", "ran.txt")] }), workspace: "main" });
      assert.equal(outcome.status, "recorded", JSON.stringify(outcome));
      const result = (outcome as unknown as { result: { exit_code: number | null; error?: { code: string } } }).result;
      assert.equal(result.exit_code, null);
      assert.equal(result.error?.code, "sandbox-cgroup-failed", JSON.stringify(result));
      assert.equal(fs.existsSync(path.join(root, "ws", "ran.txt")), false, "the agent ran");
      const entries = entriesOf(await node.readJournal((outcome as unknown as { audit: { run_id: string } }).audit.run_id));
      assert.ok(entries.some((e) => e.type === "effect.finished" && e.effect_id === "process" && (e.detail as { not_launched?: string }).not_launched === "sandbox-cgroup-failed"), JSON.stringify(entries));
    } finally {
      holder.kill("SIGKILL");
      await new Promise((resolve) => (holder.exitCode !== null || holder.signalCode !== null ? resolve(undefined) : holder.once("exit", resolve)));
      await node.close();
      (RunCgroups.open(path.join(home, "runs"), LIMITS) as RunCgroups).sweep();
    }
  });

  it("an agent spinning on a core the node's own process also wants gets a quarter of what that process gets (all runs weigh 25 against its 100)", { skip: cpuSkip }, async () => {
    const share = async (node: Warden): Promise<number> => {
      // The node's side: a process in the node's own group spinning on CPU 0, printing its CPU time
      // as it goes. In a session of its own, as the agent is (bwrap --new-session): with the
      // kernel's autogroups on, a session is weighed as one, and this one must not share its
      // weight with the test runner's other busy processes.
      const sampler = spawn("/usr/bin/python3", ["-c", SAMPLER], { stdio: ["ignore", "pipe", "inherit"], detached: true });
      try {
        let samples = "";
        sampler.stdout.setEncoding("utf8").on("data", (d: string) => (samples += d));
        await waitFor("the node-side spinner's first sample", () => (samples.includes("\n") ? true : undefined));
        const outcome = await node.invoke("test", randomUUID(), { provider: "kimi", prompt: JSON.stringify({ spin: { cpu: 0, ms: 1500 } }), workspace: "main" });
        const tail = (outcome as unknown as { result: { output_tail: string } }).result.output_tail;
        const got = attempt(tail, "spin");
        assert.ok(got !== undefined && !got.startsWith("not attempted"), `the agent could not spin (${got}): this test needs python3 at /usr/bin/python3`);
        const [start, end, agentCpu] = got.split(" ").map(Number) as [number, number, number];
        // The sampler's CPU over the agent's window, from the samples nearest its ends.
        const rows = samples.trim().split("\n").map((l) => l.split(" ").map(Number) as [number, number]);
        const at = (t: number): number => rows.reduce((best, row) => (Math.abs(row[0] - t) < Math.abs(best[0] - t) ? row : best))[1];
        assert.ok(rows.at(-1)![0] >= end, "the node-side spinner stopped before the agent did");
        return agentCpu / (at(end) - at(start));
      } finally {
        sampler.kill("SIGKILL");
      }
    };
    const weighed = await share(bounded);
    assert.ok(weighed < 0.5, `the run's spinner got ${weighed.toFixed(2)} of what the node's got on one core (weights 25 : 100 give 0.25)`);
    // Without the groups they weigh the same: the weight above is what held the agent back.
    const even = await share(plain);
    assert.ok(even > 0.6, `without control groups the run's spinner got ${even.toFixed(2)} of what the node's got (the same weight gives 1)`);
  });

  it("what a dead node left in its groups is killed and removed when it starts again", async () => {
    const home = path.join(root, "home-dead");
    const first = await openWarden({ home, workspaces: { main: path.join(root, "ws") }, providers: { kimi: { command: HOSTILE } }, sandbox: { limits: { memoryBytes: MEMORY, allRunsMemoryBytes: 2 * MEMORY, processes: TASKS } } });
    await first.close();
    // A run's groups as the node made them, holding a process of the run that outlived its node.
    const dead = RunCgroups.open(path.join(home, "runs"), LIMITS) as RunCgroups;
    const run = dead.create(randomUUID());
    const leftover = spawn("sleep", ["600"], { stdio: "ignore" });
    await new Promise((resolve) => leftover.once("spawn", resolve));
    const pid = leftover.pid as number;
    for (const file of run.procsFiles) fs.writeFileSync(file, String(pid));
    const dirs = run.procsFiles.map((f) => path.dirname(f));
    for (const dir of dirs) assert.ok(procsOf(dir).includes(pid));
    const exited = new Promise((resolve) => leftover.once("exit", (_code, signal) => resolve(signal)));
    const again = await openWarden({ home, workspaces: { main: path.join(root, "ws") }, providers: { kimi: { command: HOSTILE } }, sandbox: { limits: { memoryBytes: MEMORY, allRunsMemoryBytes: 2 * MEMORY, processes: TASKS } } });
    try {
      // The sweep ran in the start, and removing a group needs it empty: gone means killed.
      for (const dir of [...dirs, ...dirs.map((d) => path.dirname(d))]) assert.equal(fs.existsSync(dir), false, `${dir} outlived the start's sweep`);
      assert.equal(await exited, "SIGKILL");
      assert.equal(isAlive(pid), false);
    } finally {
      await again.close();
      leftover.kill("SIGKILL");
    }
  });
});
