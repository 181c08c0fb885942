/**
 * Whether this machine can confine a run, asked once per bubblewrap path and remembered: a
 * missing `bwrap`, or a kernel that refuses unprivileged user namespaces, makes every confined
 * run impossible, and the runner refuses such runs before their claim (fail closed).
 */
import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import { keyringFilter } from "./seccomp.js";

export interface ProbeResult {
  readonly ok: boolean;
  /** why not, in one line (what bwrap printed, or that it is not there) */
  readonly reason?: string;
}

const probes = new Map<string, ProbeResult>();

/** The same namespaces and options a run uses, around /bin/true. */
export function probeSandbox(bwrap: string): ProbeResult {
  const known = probes.get(bwrap);
  if (known !== undefined) return known;
  const result = runProbe(bwrap);
  probes.set(bwrap, result);
  return result;
}

function runProbe(bwrap: string): ProbeResult {
  try {
    fs.accessSync(bwrap, fs.constants.X_OK);
  } catch {
    return { ok: false, reason: `${bwrap} is not an executable file` };
  }
  const trueBin = fs.existsSync("/usr/bin/true") ? "/usr/bin/true" : "/bin/true";
  // The run's seccomp program too (read here on stdin): a kernel that refuses it refuses the run.
  const filter = keyringFilter();
  const probe = spawnSync(
    bwrap,
    ["--unshare-all", "--unshare-user", "--die-with-parent", "--new-session", "--cap-drop", "ALL", ...(filter === undefined ? [] : ["--seccomp", "0"]), "--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev", "--", trueBin],
    { stdio: [filter === undefined ? "ignore" : "pipe", "ignore", "pipe"], ...(filter === undefined ? {} : { input: filter }), timeout: 30_000, encoding: "utf8" },
  );
  if (probe.error !== undefined) return { ok: false, reason: `${bwrap}: ${probe.error.message}` };
  if (probe.status !== 0) return { ok: false, reason: `${bwrap} cannot create a sandbox here: ${(probe.stderr ?? "").trim().split("\n")[0] || `exit ${probe.status}`}` };
  return { ok: true };
}
