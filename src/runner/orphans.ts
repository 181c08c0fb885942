/**
 * Agents a node left running when it died without a shutdown (kill -9, an OOM kill). A dead node
 * cannot stop its agents' process groups, and an agent whose run already reads `unresolved` must
 * not go on making effects that nobody journals.
 *
 * Every agent starts with AGENT_TAG_VAR in its environment: the node's home (hashed) and the
 * node process's identity (pid and start time, so a reused pid is never taken for it). Children
 * inherit it, also those that leave the agent's process group. When a node opens, it kills every
 * process tagged with its home whose node process is gone; agents of another live process on the
 * same home are left alone. Identity comes from the environment, never from a recorded pid, so an
 * unrelated process that got a pid of ours is never hit; reading another user's environment is
 * not allowed, so only the node user's own processes are examined.
 *
 * Linux only (/proc): elsewhere agents carry no tag and nothing is reaped.
 */
import { readdirSync, readFileSync, realpathSync } from "node:fs";
import { join } from "node:path";
import { sha256Hex } from "../core/digest.js";

export const AGENT_TAG_VAR = "WARDEN_AGENT_OF";
const PROC = "/proc";
const TAG_RE = /^([0-9a-f]{32})\.([1-9][0-9]*)\.([0-9]+)$/;

export interface Reaped {
  /** false when this platform has no /proc to look in */
  readonly supported: boolean;
  /** the pids sent SIGKILL */
  readonly killed: readonly number[];
}

/** Start time of process `pid` since boot (clock ticks), or undefined when there is no such process. */
function startTicks(procRoot: string, pid: number | "self"): string | undefined {
  let stat: string;
  try {
    stat = readFileSync(join(procRoot, String(pid), "stat"), "utf8");
  } catch {
    return undefined;
  }
  // The command name (field 2) is in parentheses and may hold anything: count from the last ")".
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return fields[19]; // field 22, starttime
}

function homeHash(home: string): string {
  return sha256Hex(Buffer.from(realpathSync(home), "utf8")).slice(0, 32);
}

/** The tag this process gives the agents it starts for `home`; undefined without /proc. */
export function agentTagOf(home: string, procRoot = PROC): string | undefined {
  const ticks = startTicks(procRoot, "self");
  return ticks === undefined ? undefined : `${homeHash(home)}.${process.pid}.${ticks}`;
}

/** The value of AGENT_TAG_VAR in a NUL-separated environment block. */
function tagIn(environ: Buffer): string | undefined {
  const name = Buffer.from(`${AGENT_TAG_VAR}=`, "utf8");
  for (let at = environ.indexOf(name); at >= 0; at = environ.indexOf(name, at + 1)) {
    if (at > 0 && environ[at - 1] !== 0) continue; // inside another entry's value
    const end = environ.indexOf(0, at);
    return environ.subarray(at + name.length, end < 0 ? environ.length : end).toString("utf8");
  }
  return undefined;
}

/** SIGKILLs every process tagged with `home` whose node process no longer runs. */
export function reapOrphanedAgents(home: string, procRoot = PROC): Reaped {
  if (startTicks(procRoot, "self") === undefined) return { supported: false, killed: [] };
  const ours = homeHash(home);
  const killed: number[] = [];
  for (const entry of readdirSync(procRoot)) {
    if (!/^[1-9][0-9]*$/.test(entry)) continue;
    const pid = Number(entry);
    if (pid === process.pid) continue;
    let environ: Buffer;
    try {
      environ = readFileSync(join(procRoot, entry, "environ"));
    } catch {
      continue; // gone meanwhile, or not ours to read
    }
    const tag = tagIn(environ);
    const match = tag === undefined ? null : TAG_RE.exec(tag);
    if (match === null || match[1] !== ours) continue;
    const node = Number(match[2]);
    if (startTicks(procRoot, node) === match[3]) continue; // its node is alive
    try {
      process.kill(pid, "SIGKILL");
      killed.push(pid);
    } catch {
      // exited meanwhile (ESRCH): what we wanted
    }
  }
  return { supported: true, killed };
}
