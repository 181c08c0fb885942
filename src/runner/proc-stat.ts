/**
 * What /proc tells about processes (Linux): the fields of /proc/<pid>/stat that identify a process
 * over time (start time: a pid is reused, a pid and start time are not) and place it in a process
 * group and session, and the pid space those numbers belong to.
 */
import { closeSync, openSync, readSync, readdirSync, readFileSync, readlinkSync } from "node:fs";
import { join } from "node:path";

export const PROC = "/proc";

export interface ProcStat {
  /** field 3: R, S, D, Z (zombie) ... */
  readonly state: string;
  /** field 5 */
  readonly pgid: number;
  /** field 6 */
  readonly sid: number;
  /** field 22: start time since boot in clock ticks, kept as text (it is only ever compared) */
  readonly startTicks: string;
}

/** A process over time: a pid is reused, a pid and its start time are not. */
export interface ProcessIdentity {
  readonly pid: number;
  readonly startTicks: string;
}

/** Reused by readSmall: this runs synchronously, one read at a time. */
const small = Buffer.allocUnsafe(4096);

/**
 * A /proc file that fits in one read (a stat line does), in three syscalls where readFileSync
 * takes five (it also fstats, and reads again to find the end): a straggler search reads one per
 * process of the machine.
 */
function readSmall(path: string): string {
  const fd = openSync(path, "r");
  let bytes: number;
  try {
    bytes = readSync(fd, small, 0, small.length, null);
  } finally {
    closeSync(fd);
  }
  return bytes < small.length ? small.toString("utf8", 0, bytes) : readFileSync(path, "utf8");
}

/** The stat of process `pid`, or undefined when there is no such process. */
export function procStat(procRoot: string, pid: number | "self"): ProcStat | undefined {
  let stat: string;
  try {
    stat = readSmall(join(procRoot, String(pid), "stat"));
  } catch {
    return undefined;
  }
  // The command name (field 2) is in parentheses and may hold anything: count from the last ")".
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  const startTicks = fields[19];
  if (fields[0] === undefined || startTicks === undefined) return undefined;
  return { state: fields[0], pgid: Number(fields[2]), sid: Number(fields[3]), startTicks };
}

/** The pids /proc lists now. */
export function procPids(procRoot: string): number[] {
  const pids: number[] = [];
  for (const entry of readdirSync(procRoot)) if (/^[1-9][0-9]*$/.test(entry)) pids.push(Number(entry));
  return pids;
}

/**
 * Where pids mean something: this boot (pids and start times restart at every boot) and this pid
 * namespace (a container sees other numbers for the same processes). Undefined when /proc does
 * not say.
 */
export interface PidSpace {
  /** /proc/sys/kernel/random/boot_id without its dashes (32 hex) */
  readonly boot: string;
  /** inode number of the pid namespace */
  readonly pidns: string;
}

export function pidSpaceOf(procRoot: string): PidSpace | undefined {
  try {
    const boot = readFileSync(join(procRoot, "sys", "kernel", "random", "boot_id"), "utf8").trim().replace(/-/g, "");
    const pidns = /^pid:\[([0-9]+)\]$/.exec(readlinkSync(join(procRoot, "self", "ns", "pid")))?.[1];
    return /^[0-9a-f]{32}$/.test(boot) && pidns !== undefined ? { boot, pidns } : undefined;
  } catch {
    return undefined;
  }
}

/** True for a process that still runs: a zombie is already dead (signalling it would count it twice). */
export function isRunning(stat: ProcStat | undefined): stat is ProcStat {
  return stat !== undefined && stat.state !== "Z" && stat.state !== "X";
}

/**
 * The value of variable `name` in the environment process `pid` started with; undefined when it
 * has none, is gone, or is not ours to read.
 */
export function environVariable(procRoot: string, pid: number, name: string): string | undefined {
  let environ: Buffer;
  try {
    environ = readFileSync(join(procRoot, String(pid), "environ"));
  } catch {
    return undefined;
  }
  // NUL-separated entries; a match inside another entry's value is not one.
  const key = Buffer.from(`${name}=`, "utf8");
  for (let at = environ.indexOf(key); at >= 0; at = environ.indexOf(key, at + 1)) {
    if (at > 0 && environ[at - 1] !== 0) continue;
    const end = environ.indexOf(0, at);
    return environ.subarray(at + key.length, end < 0 ? environ.length : end).toString("utf8");
  }
  return undefined;
}

/**
 * Whether the process group or session led by the process seen as `leader` can still be that one:
 * its pid is gone (the kernel hands out no pid that is still the id of a live group or session, so
 * one whose leader exited is still its) or still held by that process. False once the pid runs
 * another process: the group ended and its id was reused. The one case this cannot tell: the group
 * ended, then its pid came round again (after pid_max other pids) to a process that led a group or
 * session of its own and exited, leaving members.
 */
export function mayStillLead(procRoot: string, leader: ProcessIdentity): boolean {
  const stat = procStat(procRoot, leader.pid);
  return stat === undefined || stat.startTicks === leader.startTicks;
}

/** SIGKILLs `pid` if it is still the process seen (same start time, not yet a zombie). */
export function killIfStill(procRoot: string, pid: number, startTicks: string): boolean {
  const stat = procStat(procRoot, pid);
  if (!isRunning(stat) || stat.startTicks !== startTicks) return false;
  try {
    process.kill(pid, "SIGKILL");
    return true;
  } catch {
    return false; // exited meanwhile (ESRCH), or not ours (EPERM)
  }
}
