/**
 * Whether this machine can confine a run, asked once per bubblewrap path and remembered: a
 * missing `bwrap`, or a kernel that refuses unprivileged user namespaces, makes every confined
 * run impossible, and the runner refuses such runs before their claim (fail closed).
 */
import { spawnSync, type SpawnSyncReturns } from "node:child_process";
import * as fs from "node:fs";
import { keyringFilter } from "./seccomp.js";

export interface ProbeResult {
  readonly ok: boolean;
  /** why not, in one line (what bwrap printed, or that it is not there) */
  readonly reason?: string;
  /** bubblewrap can keep the agent from making user namespaces of its own (`--disable-userns`, bubblewrap 0.8) */
  readonly disableUserns?: boolean;
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
  // Nested user namespaces are where most of the kernel's attack surface opens to an
  // unprivileged process: refused where this bubblewrap can, and the profile says whether.
  const hardened = attempt(bwrap, true);
  if (hardened.status === 0) return { ok: true, disableUserns: true };
  const plain = attempt(bwrap, false);
  if (plain.error !== undefined) return { ok: false, reason: `${bwrap}: ${plain.error.message}` };
  if (plain.status !== 0) return { ok: false, reason: `${bwrap} cannot create a sandbox here: ${(plain.stderr ?? "").trim().split("\n")[0] || `exit ${plain.status}`}` };
  return { ok: true, disableUserns: false };
}

/** The run's namespaces and options around /bin/true, with or without `--disable-userns`. */
function attempt(bwrap: string, disableUserns: boolean): SpawnSyncReturns<string> {
  const trueBin = fs.existsSync("/usr/bin/true") ? "/usr/bin/true" : "/bin/true";
  // The run's seccomp program too (read here on stdin): a kernel that refuses it refuses the run.
  const filter = keyringFilter();
  return spawnSync(
    bwrap,
    [
      "--unshare-all",
      "--unshare-user",
      ...(disableUserns ? ["--disable-userns"] : []),
      "--die-with-parent",
      "--new-session",
      "--cap-drop",
      "ALL",
      ...(filter === undefined ? [] : ["--seccomp", "0"]),
      "--ro-bind",
      "/",
      "/",
      "--proc",
      "/proc",
      "--dev",
      "/dev",
      "--",
      trueBin,
    ],
    { stdio: [filter === undefined ? "ignore" : "pipe", "ignore", "pipe"], ...(filter === undefined ? {} : { input: filter }), timeout: 30_000, encoding: "utf8" },
  );
}
