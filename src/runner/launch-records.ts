/**
 * Launch records: one empty private file per running agent under `<home>/agents/`, so that a node
 * opening after its predecessor died finds an agent's session even when nothing in it carries the
 * agent tag any more — the agent exited (or exec'd with a clean environment) and left behind a
 * process it had started with an environment of its own (`env -i`, an MCP server given an
 * explicit env). orphans.ts decides what a record allows it to kill.
 *
 * A record is all in its name:
 *
 *   <boot id>.<pid namespace>.<agent pid>.<agent start>.<node pid>.<node start>
 *
 * so one create-new open makes it whole or not at all: a node killed mid-write leaves no partial
 * record to misread. The agent is the leader of its own session (spawned detached), so its pid is
 * also its session id. Records are not fsynced: one only matters while the processes it names
 * may run, and the one event that could lose an unsynced directory entry — the machine going
 * down — ends those processes too. A record that survives a reboot names another boot, and is
 * dropped without acting on it.
 *
 * The directory holds nothing else: any other name, a symlink or a loose mode fails its audit and
 * the node refuses to start (G10), so no process is ever killed on the strength of a malformed
 * record.
 */
import { closeSync, lstatSync, rmSync } from "node:fs";
import { join } from "node:path";
import { StorageError } from "../core/errors.js";
import { auditPrivateTreeSync, createPrivateFileSync, ensurePrivateDirSync } from "../storage/secure-fs.js";
import { PROC, pidSpaceOf, procStat, type PidSpace, type ProcessIdentity } from "./proc-stat.js";

export const AGENTS_DIR = "agents";
const RECORD_RE = /^([0-9a-f]{32})\.([0-9]{1,20})\.([1-9][0-9]{0,9})\.([0-9]{1,20})\.([1-9][0-9]{0,9})\.([0-9]{1,20})$/;

/** A process identity that survives pid reuse: its pid and its start time (clock ticks since boot). */
export type { ProcessIdentity };

export interface LaunchRecord {
  readonly name: string;
  readonly space: PidSpace;
  /** the agent: leader of its own session and process group (pid = sid = pgid) */
  readonly agent: ProcessIdentity;
  /** the node process that launched it */
  readonly node: ProcessIdentity;
}

function recordName(space: PidSpace, agent: ProcessIdentity, node: ProcessIdentity): string {
  return [space.boot, space.pidns, agent.pid, agent.startTicks, node.pid, node.startTicks].join(".");
}

function parseRecordName(name: string): LaunchRecord | undefined {
  const m = RECORD_RE.exec(name);
  if (m === null) return undefined;
  return {
    name,
    space: { boot: m[1]!, pidns: m[2]! },
    agent: { pid: Number(m[3]), startTicks: m[4]! },
    node: { pid: Number(m[5]), startTicks: m[6]! },
  };
}

/** The launch records of this process, the node. */
export class LaunchRecords {
  readonly #dir: string;
  readonly #space: PidSpace;
  readonly #node: ProcessIdentity;
  readonly #procRoot: string;

  private constructor(dir: string, space: PidSpace, node: ProcessIdentity, procRoot: string) {
    this.#dir = dir;
    this.#space = space;
    this.#node = node;
    this.#procRoot = procRoot;
  }

  /** Undefined where /proc cannot identify processes: there, nothing is recorded or reaped. */
  static open(home: string, procRoot = PROC): LaunchRecords | undefined {
    const space = pidSpaceOf(procRoot);
    const self = procStat(procRoot, "self");
    if (space === undefined || self === undefined) return undefined;
    const dir = join(home, AGENTS_DIR);
    ensurePrivateDirSync(dir, { create: true });
    return new LaunchRecords(dir, space, { pid: process.pid, startTicks: self.startTicks }, procRoot);
  }

  /**
   * Records the agent just spawned as `pid` and answers the record's name. Call it synchronously
   * right after the spawn: until this process returns to its event loop the child cannot have
   * been reaped, so /proc still shows it (a zombie at worst) and its start time is its own.
   */
  add(pid: number): string {
    const stat = procStat(this.#procRoot, pid);
    if (stat === undefined) throw new StorageError("launch-record-unidentified", `agent process ${pid} is not in ${this.#procRoot}`);
    const name = recordName(this.#space, { pid, startTicks: stat.startTicks }, this.#node);
    closeSync(createPrivateFileSync(join(this.#dir, name)));
    return name;
  }

  /**
   * Forgets an agent whose process group is done. Never throws: a failure here must not change
   * how the run ends, and a record left behind only makes the next node look for a session that
   * is gone (then it drops the record).
   */
  remove(name: string): void {
    try {
      rmSync(join(this.#dir, name), { force: true });
    } catch {
      // left for the next node, see above
    }
  }
}

/**
 * Every launch record under `home` (none when it has no records directory), after auditing the
 * directory: anything in it that is not a private record file refuses (UnsafeStorageError).
 */
export function readLaunchRecords(home: string): LaunchRecord[] {
  const dir = join(home, AGENTS_DIR);
  if (lstatSync(dir, { throwIfNoEntry: false }) === undefined) return []; // this home never launched an agent
  const records: LaunchRecord[] = [];
  auditPrivateTreeSync(dir, (name, isDirectory) => {
    const record = isDirectory ? undefined : parseRecordName(name);
    if (record === undefined) return "only agent launch records belong in agents/";
    records.push(record);
    return undefined;
  });
  return records;
}

/** Drops a record once its agent's session was dealt with (by the node reaping for a dead one). */
export function dropLaunchRecord(home: string, record: LaunchRecord): void {
  rmSync(join(home, AGENTS_DIR, record.name), { force: true });
}
