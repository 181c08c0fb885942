/**
 * Whether a test's child processes (nodes, agents, their children) still run, and their clean-up.
 *
 * A pid written down earlier (a fixture's starts file, a hook, a log) is a number the kernel hands
 * out again once its process is reaped: pid_max is small (often 32768) and a whole suite run starts
 * enough processes and threads to wrap it. Signalled blindly at a test's end, such a pid can hit
 * another test's process, and a process group id another test's agent (agents lead their own
 * groups). So a clean-up signals a recorded process only while it is still the one recorded (same
 * start time, as the node's own reaper checks: src/runner/proc-stat.ts), and a child of its own
 * through its ChildProcess while Node has not reaped it.
 */
import type { ChildProcess } from "node:child_process";
import { PROC, isRunning, killIfStill, mayStillLead, procStat, type ProcessIdentity } from "../../src/runner/proc-stat.js";

export type { ProcessIdentity };

/** A pid as a fixture recorded it: with its start time where /proc told it one. */
export interface RecordedProcess {
  readonly pid: number;
  readonly startTicks?: string;
}

/** True while `pid` runs; a zombie (dead, not yet reaped by its new parent) counts as dead. */
export function isAlive(pid: number): boolean {
  return isRunning(procStat(PROC, pid));
}

/** Who `pid` is now: to be taken while it is known to be the process meant (undefined: gone). */
export function identityOf(pid: number): ProcessIdentity | undefined {
  const stat = procStat(PROC, pid);
  return stat === undefined ? undefined : { pid, startTicks: stat.startTicks };
}

/** SIGKILLs a recorded process unless it is gone or its pid now runs another one. */
export function killIfStillRecorded(recorded: RecordedProcess): boolean {
  return recorded.startTicks !== undefined && killIfStill(PROC, recorded.pid, recorded.startTicks);
}

/**
 * SIGKILLs the process group a recorded process leads (and so the process), unless its pid now
 * runs another process: then that group ended and its id may be another's (mayStillLead). A
 * leader that exited leaves its group's id to its group: what is left in it is still killed.
 */
export function killGroupIfStillRecorded(leader: RecordedProcess): boolean {
  if (leader.startTicks === undefined || !mayStillLead(PROC, { pid: leader.pid, startTicks: leader.startTicks })) return false;
  try {
    process.kill(-leader.pid, "SIGKILL");
    return true;
  } catch {
    return false; // no such group (ESRCH): it ended
  }
}

/**
 * Signals the process group `child` leads (spawned detached) while Node has not reaped it: until
 * then its pid, and so its group id, cannot be anyone else's. False once it was reaped.
 */
export function signalChildGroup(child: ChildProcess, signal: NodeJS.Signals): boolean {
  if (child.pid === undefined || child.exitCode !== null || child.signalCode !== null) return false;
  try {
    process.kill(-child.pid, signal);
    return true;
  } catch {
    return false;
  }
}
