/**
 * Agents a node left running when it died without a shutdown (kill -9, an OOM kill). A dead node
 * cannot stop its agents' process groups, and an agent whose run already reads `unresolved` must
 * not go on making effects that nobody journals. When a node opens, it kills them; agents of
 * another live process on the same home, and of other homes, are left alone. A node is gone when
 * its pid no longer runs with the start time it had (a reused pid is never taken for it; a zombie
 * runs nothing).
 *
 * Two things mark a process as an orphaned agent's:
 *
 * - The tag. Every agent starts with AGENT_TAG_VAR in its environment: the node's home (hashed)
 *   and the node process's pid and start time. Children inherit it, also those that leave the
 *   agent's process group. A process tagged with this home whose node is gone is killed, together
 *   with the process group and the session it leads: their members were all started inside them,
 *   so what an agent started with a clean environment (`env -i`, an MCP server given an explicit
 *   env) dies with it. Only a group or session whose leader is itself such a tagged process is
 *   widened to: a tagged process a foreign server started for the agent (a tmux server, say) may
 *   sit in a session that is not the agent's.
 *
 * - The launch record (launch-records.ts), for a session in which nothing tagged is left: its
 *   leader, the agent, exited or exec'd with a clean environment. The node recorded the agent's
 *   pid and start time at launch. When that node is gone, every process whose session id is the
 *   agent's pid is killed, provided the process with that pid is either gone or still the agent
 *   (same start time). The kernel does not hand out a pid while it is the id of a live session, so
 *   a session whose leader exited is still the agent's; a pid held by a process with another start
 *   time means the agent's session ended and the pid was reused: nothing is killed. The one case
 *   this cannot tell apart: the agent's session ended by itself after its node died, then its pid
 *   came round again (after pid_max other pids) to a process of this user that made a session and
 *   exited, leaving members. Records of a live node are left alone; the others are dropped.
 *
 * A pid is re-checked (start time) right before it is signalled, and what the killed processes
 * managed to start meanwhile is found by looking again, a bounded number of rounds. Reading another
 * user's environment or signalling their processes is not allowed, so only the node user's own
 * processes are examined and killed.
 *
 * Linux only (/proc): elsewhere agents carry no tag, nothing is recorded and nothing is reaped.
 */
import { realpathSync } from "node:fs";
import { sha256Hex } from "../core/digest.js";
import { dropLaunchRecord, readLaunchRecords, type LaunchRecord, type ProcessIdentity } from "./launch-records.js";
import { PROC, environVariable, isRunning, killIfStill, mayStillLead, pidSpaceOf, procPids, procStat, type PidSpace, type ProcStat } from "./proc-stat.js";
import { RUN_TAG_VAR } from "./stragglers.js";

export const AGENT_TAG_VAR = "WARDEN_AGENT_OF";
const TAG_RE = /^([0-9a-f]{32})\.([1-9][0-9]*)\.([0-9]+)$/;
/** Looks for processes started by those just killed; each round after the first is rare and short. */
const MAX_ROUNDS = 4;

export interface Reaped {
  /** false when this platform has no /proc to look in */
  readonly supported: boolean;
  /** the pids sent SIGKILL */
  readonly killed: readonly number[];
  /**
   * The killed pids by the run they acted for: a process's own RUN_TAG_VAR, else that of a
   * member of its session (the agent leads it). Pids no run can be told for are in `killed` only.
   * Absent where `supported` is false.
   */
  readonly runs?: readonly ReapedRun[];
}

export interface ReapedRun {
  readonly run_id: string;
  readonly pids: readonly number[];
  /** the pid of the dead node that had started the agent, when its tag says */
  readonly node_pid?: number;
}

function homeHash(home: string): string {
  return sha256Hex(Buffer.from(realpathSync(home), "utf8")).slice(0, 32);
}

/** The tag this process gives the agents it starts for `home`; undefined without /proc. */
export function agentTagOf(home: string, procRoot = PROC): string | undefined {
  const self = procStat(procRoot, "self");
  return self === undefined ? undefined : `${homeHash(home)}.${process.pid}.${self.startTicks}`;
}

/** SIGKILLs what the agents of this home's dead nodes left running; drops their launch records. */
export function reapOrphanedAgents(home: string, procRoot = PROC): Reaped {
  const self = procStat(procRoot, "self");
  if (self === undefined) return { supported: false, killed: [] };
  // Audited before anything is signalled: a records directory that fails it stops the node.
  const records = readLaunchRecords(home);
  const reaper = new Reaper(homeHash(home), self, procRoot);
  const done = records.filter((record) => reaper.adopt(record));
  const killed = reaper.run();
  for (const record of done) dropLaunchRecord(home, record);
  return { supported: true, killed, runs: reaper.runs(killed) };
}

class Reaper {
  readonly #home: string;
  readonly #self: ProcStat;
  readonly #procRoot: string;
  readonly #space: PidSpace | undefined;
  readonly #gone = new Map<string, boolean>();
  /** session ids whose every member is an orphan (from launch records) */
  readonly #sessions = new Set<number>();
  /** what each target was, read before it was killed (its environment is gone after) */
  readonly #seen = new Map<number, { start: string; sid: number; run?: string; node?: number }>();

  constructor(home: string, self: ProcStat, procRoot: string) {
    this.#home = home;
    this.#self = self;
    this.#procRoot = procRoot;
    this.#space = pidSpaceOf(procRoot);
  }

  /** Takes a launch record into account; true when it is done with (to be dropped after the kills). */
  adopt(record: LaunchRecord): boolean {
    if (this.#space === undefined) return false;
    // A previous boot: every process it ran is gone. Another pid namespace: its numbers are not ours.
    if (record.space.boot !== this.#space.boot) return true;
    if (record.space.pidns !== this.#space.pidns || !this.#nodeGone(record.node)) return false;
    if (mayStillLead(this.#procRoot, record.agent)) this.#sessions.add(record.agent.pid);
    return true;
  }

  /** The pids killed, by the run they acted for (see Reaped.runs). */
  runs(killed: readonly number[]): ReapedRun[] {
    const sessionRun = new Map<number, { run: string; node?: number }>();
    for (const seen of this.#seen.values()) {
      if (seen.run !== undefined && !sessionRun.has(seen.sid)) sessionRun.set(seen.sid, { run: seen.run, ...(seen.node === undefined ? {} : { node: seen.node }) });
    }
    const byRun = new Map<string, { pids: number[]; node?: number }>();
    for (const pid of killed) {
      const seen = this.#seen.get(pid);
      const own = seen?.run === undefined ? undefined : { run: seen.run, ...(seen.node === undefined ? {} : { node: seen.node }) };
      const run = own ?? (seen === undefined ? undefined : sessionRun.get(seen.sid));
      if (run === undefined) continue;
      const entry = byRun.get(run.run) ?? { pids: [] };
      entry.pids.push(pid);
      entry.node ??= run.node;
      byRun.set(run.run, entry);
    }
    return [...byRun].map(([run_id, { pids, node }]) => ({ run_id, pids, ...(node === undefined ? {} : { node_pid: node }) }));
  }

  /** Kills until a look finds nothing new; answers the pids killed. */
  run(): number[] {
    const tried = new Map<number, string>();
    const killed: number[] = [];
    for (let round = 0; round < MAX_ROUNDS; round++) {
      const targets = [...this.#targets()].filter(([pid, start]) => tried.get(pid) !== start);
      if (targets.length === 0) break;
      for (const [pid, start] of targets) {
        tried.set(pid, start);
        if (killIfStill(this.#procRoot, pid, start)) killed.push(pid);
      }
    }
    return killed;
  }

  #nodeGone(node: ProcessIdentity): boolean {
    const key = `${node.pid}.${node.startTicks}`;
    let gone = this.#gone.get(key);
    if (gone === undefined) {
      const stat = procStat(this.#procRoot, node.pid);
      gone = !isRunning(stat) || stat.startTicks !== node.startTicks;
      this.#gone.set(key, gone);
    }
    return gone;
  }

  /** An orphan's tag names this home and a node that is gone: answers that node's pid. */
  #orphanTagged(pid: number): number | undefined {
    const tag = environVariable(this.#procRoot, pid, AGENT_TAG_VAR);
    const match = tag === undefined ? null : TAG_RE.exec(tag);
    if (match === null || match[1] !== this.#home) return undefined;
    const node = { pid: Number(match[2]), startTicks: match[3]! };
    return this.#nodeGone(node) ? node.pid : undefined;
  }

  /** pid → start time of every running process to kill, as /proc shows them now. */
  #targets(): Map<number, string> {
    const seen: { pid: number; stat: ProcStat; orphan: boolean; node: number | undefined }[] = [];
    const sessions = new Set(this.#sessions);
    const groups = new Set<number>();
    for (const pid of procPids(this.#procRoot)) {
      if (pid === process.pid) continue;
      const stat = procStat(this.#procRoot, pid);
      if (!isRunning(stat)) continue; // a zombie is already dead: signalling it would count it twice
      const node = this.#orphanTagged(pid);
      const orphan = node !== undefined;
      seen.push({ pid, stat, orphan, node });
      if (!orphan) continue;
      if (stat.sid === pid) sessions.add(pid);
      if (stat.pgid === pid) groups.add(pid);
    }
    // Never widened to this node's own session or group (a node started from inside an orphan).
    sessions.delete(this.#self.sid);
    groups.delete(this.#self.pgid);
    const targets = new Map<number, string>();
    for (const { pid, stat, orphan, node } of seen) {
      if (!(orphan || sessions.has(stat.sid) || groups.has(stat.pgid))) continue;
      targets.set(pid, stat.startTicks);
      // A process killed in an earlier round can still be in /proc while it dies, its environment
      // already gone: what was read of it alive stands (re-read, its run would be lost).
      if (this.#seen.get(pid)?.start === stat.startTicks) continue;
      const run = environVariable(this.#procRoot, pid, RUN_TAG_VAR);
      this.#seen.set(pid, { start: stat.startTicks, sid: stat.sid, ...(run === undefined ? {} : { run }), ...(node === undefined ? {} : { node }) });
    }
    return targets;
  }

}
