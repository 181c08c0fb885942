/**
 * Processes an agent started that left its process group (`setsid`, a daemon's double fork): the
 * kill of the agent's group when it exits does not reach them, so they would go on acting for a
 * run already recorded, and one that still holds the agent's stdout keeps the run from ever ending
 * (its pipe never closes; the timeout only signals the group). Every agent carries RUN_TAG_VAR
 * (its run id) in its environment, which its children inherit also when they leave the group.
 * When the agent exits, every process of this user still carrying the run's tag is killed, with
 * the process group it leads (what it started there with an environment of its own). One that
 * also cleared its environment is not found: AgentProcess bounds how long it may hold the
 * agent's output, and the run then reads unresolved.
 *
 * Only processes started since the agent are read for the tag: a descendant is forked after its
 * ancestor, so an older process cannot have inherited it. That spares reading the environment of
 * every process the machine runs (a node's event loop pays each read when an agent exits).
 *
 * Linux only (/proc); elsewhere nothing is found.
 */
import { PROC, environVariable, isRunning, killIfStill, procPids, procStat } from "./proc-stat.js";

export const RUN_TAG_VAR = "WARDEN_AGENT_RUN";
/** Looks again for what the processes just killed started meanwhile; later rounds are rare. */
const MAX_ROUNDS = 4;

export interface StragglerSearch {
  /** the agent's process group, already killed as a whole: its members may not have died yet */
  readonly agentGroup?: number | undefined;
  /**
   * The agent's start time (its /proc stat's, in clock ticks since boot): processes started
   * earlier are not its descendants and are skipped. Undefined: every process is looked at.
   */
  readonly agentStartTicks?: string | undefined;
  readonly procRoot?: string;
}

/**
 * SIGKILLs every running process tagged with `runTag` (and the group each leads) outside the
 * agent's group; answers their pids.
 */
export function killRunStragglers(runTag: string, search: StragglerSearch = {}): number[] {
  const { agentGroup, procRoot = PROC } = search;
  const bornAfter = search.agentStartTicks === undefined ? undefined : Number(search.agentStartTicks);
  const self = procStat(procRoot, "self");
  if (self === undefined) return [];
  const killed: number[] = [];
  const tried = new Map<number, string>();
  for (let round = 0; round < MAX_ROUNDS; round++) {
    let found = false;
    for (const pid of procPids(procRoot)) {
      if (pid === process.pid) continue;
      const stat = procStat(procRoot, pid);
      if (!isRunning(stat) || stat.pgid === agentGroup || tried.get(pid) === stat.startTicks) continue;
      // Same tick as the agent is kept: ticks are 10 ms, and a child forked in it must be found.
      if (bornAfter !== undefined && Number(stat.startTicks) < bornAfter) continue;
      if (environVariable(procRoot, pid, RUN_TAG_VAR) !== runTag) continue;
      tried.set(pid, stat.startTicks);
      found = true;
      if (killIfStill(procRoot, pid, stat.startTicks)) killed.push(pid);
      // Never this node's own group (a node started from inside an agent).
      if (stat.pgid === pid && pid !== self.pgid) killGroup(pid);
    }
    if (!found) break;
  }
  return killed;
}

function killGroup(pgid: number): void {
  try {
    process.kill(-pgid, "SIGKILL");
  } catch {
    // gone meanwhile (ESRCH), or not ours (EPERM)
  }
}
