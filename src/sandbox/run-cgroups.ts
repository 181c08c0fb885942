/**
 * Per-run control groups: the memory and the tasks of a confined run, bounded by the kernel.
 *
 * Namespaces and rlimits leave two things to a hostile agent: the machine's memory (what it holds
 * in a written memfd or unattached System V memory is charged to no process, so the OOM killer
 * may take the node instead) and, on a node running as root, the machine's process ids
 * (`RLIMIT_NPROC` does not bind root). A memory cgroup charges every page the run touches, file
 * pages and shared memory included, to the run, and its OOM kills stay inside it; a pids cgroup
 * counts every task. And an agent's build on every core must not starve the node itself (its
 * HTTP answers, its leases' heartbeats): where the `cpu` hierarchy is mounted too, all runs
 * together weigh `allRunsCpuWeight` (cgroup v2's scale: 100 is a default group) against the
 * node's own processes when the CPU is contended, and take all of it when it is not.
 * This module uses cgroup v1's `memory`, `pids` (and `cpu`) hierarchies, the node's own
 * groups in them as the parents: `<node's group>/warden-<key>` holds every run of one node home
 * (its memory bounded by `allRunsMemoryBytes`, so runs together cannot starve the node) and
 * `warden-<key>/run-<run id>` one run. The run's first process (a shell) writes itself into both
 * before it execs the sandbox, so nothing of the run is ever outside them.
 *
 * On a unified (v2) hierarchy, or where the node may not create groups (an ordinary user without
 * a delegated tree), there are none: the profile then records no `cgroup`, and DESIGN.md says
 * what that leaves open.
 */
import { createHash } from "node:crypto";
import * as fs from "node:fs";
import { join } from "node:path";
import { WardenError } from "../core/errors.js";

/** What a run's groups bound. */
export interface CgroupLimits {
  /** the run's memory, page cache and shared memory included (and swap: the same bound covers both) */
  readonly memoryBytes: number;
  /** all runs of the node together */
  readonly allRunsMemoryBytes: number;
  /** tasks (processes and threads) of the run */
  readonly tasks: number;
  /** the CPU weight of all runs together, 1–10000 (cgroup v2's scale: 100 is a default group, so 25 is a quarter of the node's) */
  readonly allRunsCpuWeight: number;
}

/** One run's groups, from its launch until the agent is gone. */
export interface RunCgroup {
  /** the `cgroup.procs` files the run's first process writes itself into */
  readonly procsFiles: readonly string[];
  /** how many processes of the run the kernel killed for its memory bound */
  oomKills(): number;
  /** kills what is left in the run's groups and removes them */
  remove(): void;
}

interface Hierarchies {
  /** the node's own group in the memory hierarchy (a directory of cgroupfs) */
  readonly memory: string;
  readonly pids: string;
  /** absent where no cgroup v1 cpu hierarchy is mounted: runs then have no CPU weight of their own */
  readonly cpu?: string;
}

/** `id:controllers:path` lines of /proc/self/cgroup → controller → the node's group path in it. */
function ownGroups(text: string): Map<string, string> {
  const groups = new Map<string, string>();
  for (const line of text.split("\n")) {
    const m = /^\d+:([^:]*):(.*)$/.exec(line);
    if (m === null) continue;
    for (const controller of (m[1] as string).split(",")) if (controller !== "") groups.set(controller, m[2] as string);
  }
  return groups;
}

/**
 * Mount points of cgroup v1 hierarchies (mountinfo: `… root mountpoint … - cgroup source options`),
 * controller → [mount point, the mount's root within the hierarchy].
 */
function v1Mounts(text: string): Map<string, readonly [string, string]> {
  const mounts = new Map<string, readonly [string, string]>();
  for (const line of text.split("\n")) {
    const [left, right] = line.split(" - ");
    if (left === undefined || right === undefined) continue;
    const [fstype, , options] = right.split(" ");
    if (fstype !== "cgroup" || options === undefined) continue;
    const fields = left.split(" ");
    const root = unescapeMountinfo(fields[3] ?? "");
    const point = unescapeMountinfo(fields[4] ?? "");
    for (const option of options.split(",")) if (!mounts.has(option)) mounts.set(option, [point, root]);
  }
  return mounts;
}

function unescapeMountinfo(field: string): string {
  return field.replace(/\\([0-7]{3})/g, (_, octal: string) => String.fromCharCode(parseInt(octal, 8)));
}

/** The node's group directory of `controller`, or why there is none. */
function hierarchyDir(controller: string, groups: Map<string, string>, mounts: Map<string, readonly [string, string]>): string | { reason: string } {
  const group = groups.get(controller);
  const mount = mounts.get(controller);
  if (group === undefined || mount === undefined) return { reason: `no cgroup v1 ${controller} hierarchy is mounted` };
  const [point, root] = mount;
  if (root !== "/" && group !== root && !group.startsWith(`${root}/`)) return { reason: `the node's ${controller} group ${group} is outside its mount` };
  const relative = root === "/" ? group : group.slice(root.length);
  return join(point, relative);
}

function detect(): Hierarchies | { reason: string } {
  let groups: Map<string, string>;
  let mounts: Map<string, readonly [string, string]>;
  try {
    groups = ownGroups(fs.readFileSync("/proc/self/cgroup", "utf8"));
    mounts = v1Mounts(fs.readFileSync("/proc/self/mountinfo", "utf8"));
  } catch (error) {
    return { reason: `cannot read the node's cgroups: ${(error as Error).message}` };
  }
  const memory = hierarchyDir("memory", groups, mounts);
  if (typeof memory !== "string") return memory;
  const pids = hierarchyDir("pids", groups, mounts);
  if (typeof pids !== "string") return pids;
  for (const dir of [memory, pids]) {
    if (!writable(dir)) return { reason: `the node may not create groups in ${dir}` };
  }
  const cpu = hierarchyDir("cpu", groups, mounts);
  return typeof cpu === "string" && writable(cpu) ? { memory, pids, cpu } : { memory, pids };
}

function writable(dir: string): boolean {
  try {
    fs.accessSync(dir, fs.constants.W_OK);
    return true;
  } catch {
    return false;
  }
}

/** cgroup v1's cpu.shares for a cgroup v2 weight: 1024 is v1's default as 100 is v2's. */
export function cpuShares(weight: number): number {
  return Math.max(2, Math.round((weight * 1024) / 100));
}

let detected: Hierarchies | { reason: string } | undefined;

/** The sleep a removal takes between kills of what is left (a process exiting leaves its group late). */
const SETTLE_MS = 5;
/** How long a removal waits for a group's processes to be gone. */
const SETTLE_ROUNDS = 400;

function sleepSync(ms: number): void {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
}

function readInt(path: string, key: string): number {
  try {
    const m = new RegExp(`^${key} (\\d+)$`, "m").exec(fs.readFileSync(path, "utf8"));
    return m === null ? 0 : Number(m[1]);
  } catch {
    return 0;
  }
}

/**
 * Kills every process in the group until none is left, then removes it; false when it stays (the
 * next start's sweep tries again): a removal runs after the run's end is decided and must not
 * throw into it.
 */
function emptyAndRemove(dir: string): boolean {
  for (let round = 0; round < SETTLE_ROUNDS; round++) {
    let pids: number[];
    try {
      pids = fs
        .readFileSync(join(dir, "cgroup.procs"), "utf8")
        .split("\n")
        .filter((s) => s !== "")
        .map(Number);
    } catch (error) {
      return (error as NodeJS.ErrnoException).code === "ENOENT";
    }
    for (const pid of pids) {
      try {
        process.kill(pid, "SIGKILL");
      } catch {
        // gone already
      }
    }
    try {
      fs.rmdirSync(dir);
      return true;
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      if (code === "ENOENT") return true;
      if (code !== "EBUSY") return false;
    }
    sleepSync(SETTLE_MS);
  }
  return false;
}

/** Writes a memory bound to a v1 group: memory, then memory+swap (which may never be below it). */
function boundMemory(dir: string, bytes: number): void {
  const memory = join(dir, "memory.limit_in_bytes");
  const memsw = join(dir, "memory.memsw.limit_in_bytes");
  const hasMemsw = fs.existsSync(memsw);
  try {
    fs.writeFileSync(memory, String(bytes));
  } catch (error) {
    // Raising a bound the swap bound already holds below: the swap bound first.
    if ((error as NodeJS.ErrnoException).code !== "EINVAL" || !hasMemsw) throw error;
    fs.writeFileSync(memsw, String(bytes));
    fs.writeFileSync(memory, String(bytes));
  }
  if (hasMemsw) fs.writeFileSync(memsw, String(bytes));
}

export class RunCgroups {
  readonly #hierarchies: Hierarchies;
  readonly #name: string;
  readonly #limits: CgroupLimits;
  #active = 0;

  private constructor(hierarchies: Hierarchies, name: string, limits: CgroupLimits) {
    this.#hierarchies = hierarchies;
    this.#name = name;
    this.#limits = limits;
  }

  /**
   * The runs' groups of the node whose runs live in `runsDir` (its name is derived from that
   * path, so two nodes on one machine never share one), or why this machine has none for it.
   */
  static open(runsDir: string, limits: CgroupLimits): RunCgroups | { reason: string } {
    detected ??= detect();
    if (!("memory" in detected)) return detected;
    const key = createHash("sha256").update(fs.realpathSync(runsDir)).digest("hex").slice(0, 16);
    return new RunCgroups(detected, `warden-${key}`, limits);
  }

  get limits(): CgroupLimits {
    return this.#limits;
  }

  /** Whether runs get a CPU weight (the cpu hierarchy is there). */
  get cpu(): boolean {
    return this.#hierarchies.cpu !== undefined;
  }

  #under(name: string, of: Hierarchies): Hierarchies {
    return { memory: join(of.memory, name), pids: join(of.pids, name), ...(of.cpu === undefined ? {} : { cpu: join(of.cpu, name) }) };
  }

  #parents(): Hierarchies {
    return this.#under(this.#name, this.#hierarchies);
  }

  /** Removes what a node that died left: no run of this node is active when it starts. */
  sweep(): void {
    for (const parent of Object.values(this.#parents())) {
      let names: string[];
      try {
        names = fs.readdirSync(parent, { withFileTypes: true }).flatMap((e) => (e.isDirectory() && e.name.startsWith("run-") ? [e.name] : []));
      } catch {
        continue;
      }
      for (const name of names) emptyAndRemove(join(parent, name));
      emptyAndRemove(parent);
    }
  }

  /** Where run `runId`'s groups are (while it runs). */
  runDirs(runId: string): Hierarchies {
    return this.#under(`run-${runId}`, this.#parents());
  }

  /** The run's groups, bounded, before anything of the run starts. */
  create(runId: string): RunCgroup {
    const parents = this.#parents();
    const dirs = this.runDirs(runId);
    this.#active++;
    let made = false;
    try {
      for (const parent of Object.values(parents)) fs.mkdirSync(parent, { recursive: true });
      boundMemory(parents.memory, this.#limits.allRunsMemoryBytes);
      if (parents.cpu !== undefined) fs.writeFileSync(join(parents.cpu, "cpu.shares"), String(cpuShares(this.#limits.allRunsCpuWeight)));
      made = true;
      for (const dir of Object.values(dirs)) fs.mkdirSync(dir);
      boundMemory(dirs.memory, this.#limits.memoryBytes);
      fs.writeFileSync(join(dirs.pids, "pids.max"), String(this.#limits.tasks));
    } catch (error) {
      if (made) this.#removeRun(dirs);
      else this.#ended();
      throw new WardenError("sandbox-cgroup-failed", `the run's control groups could not be made: ${(error as Error).message}`, 503, { cause: error });
    }
    return {
      procsFiles: Object.values(dirs).map((dir) => join(dir, "cgroup.procs")),
      oomKills: () => readInt(join(dirs.memory, "memory.oom_control"), "oom_kill"),
      remove: () => this.#removeRun(dirs),
    };
  }

  #removeRun(dirs: Hierarchies): void {
    for (const dir of Object.values(dirs)) emptyAndRemove(dir);
    this.#ended();
  }

  #ended(): void {
    this.#active--;
    if (this.#active > 0) return;
    // The last run of this node is gone: its parents go too, so nothing of it outlives it.
    for (const parent of Object.values(this.#parents())) {
      try {
        fs.rmdirSync(parent);
      } catch {
        // still holding a run left for the next start's sweep
      }
    }
  }
}

/**
 * The shell a run starts as: it writes itself into each group (`0`: the writer) and then execs the
 * sandbox's command, so every process of the run is born inside them. Exit 125 when it could not.
 */
export const JOIN_SCRIPT = 'while [ "$1" != -- ]; do echo 0 > "$1" || exit 125; shift; done; shift; exec "$@"';

/** The command line that runs `command args` inside the run's groups. */
export function joinedCommand(cgroup: RunCgroup, command: string, args: readonly string[]): { command: string; args: string[] } {
  return { command: "/bin/sh", args: ["-c", JOIN_SCRIPT, "warden-cgroup", ...cgroup.procsFiles, "--", command, ...args] };
}
