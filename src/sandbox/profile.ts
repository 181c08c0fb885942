/**
 * A run's isolation profile: what the sandbox around its agent is made of (mounts, environment
 * names, egress allowlist, resource limits), as `run.started` records it, and the bubblewrap
 * command line that makes it. The profile names the run's own directories with `{run_id}` in
 * their paths, so its digest says which confinement a workspace and provider get, the same for
 * every run of them (DESIGN.md "Confinement").
 */
import * as fs from "node:fs";
import * as os from "node:os";
import { dirname, join, sep } from "node:path";
import { canonicalDigest, type JsonValue } from "../core/canonical.js";
import type { Digest } from "../core/digest.js";
import { BRIDGE_SOURCE } from "./bridge.js";
import type { CgroupLimits } from "./run-cgroups.js";
import { DENIED_ERRNO, DENIED_SYSCALLS } from "./seccomp.js";

/** The descriptor on which bubblewrap reads a run's seccomp program (the agent's spawn passes it). */
export const SECCOMP_FD = 3;

export type Isolation = "sandbox" | "none";

/** The run home's directory the sandbox mounts at /tmp (also the run's TMPDIR, confined or not). */
export const RUN_TMP_DIR = "tmp";
/** The run home's directory the sandbox mounts at /dev/shm. */
export const RUN_SHM_DIR = "shm";

/**
 * prlimit-style limits of every process of a run (unset: not limited), and the bounds of its
 * control groups (run-cgroups.ts) where the node has them.
 */
export interface ResourceLimits {
  /**
   * RLIMIT_NPROC: processes of the user (does not bind a node running as root: the kernel exempts
   * it); and the run's pids group's bound on its tasks (processes and threads), which binds root
   */
  readonly processes?: number;
  /** the run's memory group's bound, page cache and shared memory included */
  readonly memoryBytes?: number;
  /** the memory of all the node's runs together */
  readonly allRunsMemoryBytes?: number;
  /** the CPU weight of all the node's runs together against the node's own processes (cgroup v2's scale, 1–10000; 100 weighs as much) */
  readonly allRunsCpuWeight?: number;
  /** RLIMIT_AS in bytes (off by default: V8 reserves far more address space than it uses) */
  readonly addressSpaceBytes?: number;
  /** RLIMIT_CPU in seconds, per process */
  readonly cpuSeconds?: number;
  /** RLIMIT_FSIZE in bytes: the largest file a process may write */
  readonly fileSizeBytes?: number;
  /** RLIMIT_NOFILE */
  readonly openFiles?: number;
}

const MiB = 1024 * 1024;

export const DEFAULT_LIMITS: ResourceLimits = Object.freeze({
  processes: 4096,
  // Half the machine's memory a run, three quarters all runs: the node and the rest of the
  // machine keep a quarter whatever the runs do.
  memoryBytes: Math.floor(os.totalmem() / 2 / MiB) * MiB,
  allRunsMemoryBytes: Math.floor((os.totalmem() * 3) / 4 / MiB) * MiB,
  // Under contention the node (its answers, its leases' heartbeats) gets four times what all runs get.
  allRunsCpuWeight: 25,
  cpuSeconds: 4 * 3600,
  fileSizeBytes: 8 * 1024 ** 3,
  openFiles: 16384,
});

/** Where the loopback bridge listens inside every sandbox (its loopback is its own). */
export const BRIDGE_PORT = 3128;
/** Where the egress proxy's socket appears inside the sandbox. */
export const EGRESS_SOCKET_INSIDE = "/run/warden/egress.sock";
/** Where the bridge writes the signal that killed the agent (bridge.ts). */
export const STATUS_INSIDE = "/run/warden/status";
/** Where a governed run's decision socket appears (policy/hook.ts: the hook's one way to the node). */
export const DECISION_SOCKET_INSIDE = "/run/warden/decide.sock";
/**
 * Where the bridge carries a governed run's connections to its decision socket (Claude Code's HTTP
 * hook): an address of its own on the sandbox's loopback, so NO_PROXY can name it alone (the model
 * and everything else on 127.0.0.1 still go through the egress proxy).
 */
export const DECISION_HOST = "127.0.0.2";
export const DECISION_PORT = 3129;

/**
 * How a path is mounted; `remount-ro`: the file system already at the path (the new root's tmpfs,
 * /dev's) is made read-only once everything under it is mounted.
 */
export type MountAccess = "ro" | "rw" | "tmpfs" | "proc" | "dev" | "hidden" | "symlink" | "remount-ro";

export interface Mount {
  /** the path inside (the same as outside for binds) */
  readonly path: string;
  readonly access: MountAccess;
  /** what it is: system, node, provider, workspace, bundle, home, tmp, shm, proc, dev, egress, secret, root */
  readonly what: string;
  /** a bind's source when it differs from `path`, a symlink's target */
  readonly source?: string;
}

export interface IsolationProfile {
  readonly [key: string]: JsonValue;
}

/** What the runner knows of a run before its claim. */
export interface SandboxPlan {
  /** the provider CLI's executable, resolved on the host */
  readonly command: string;
  readonly workspace: string;
  readonly workspaceAccess: "ro" | "rw";
  /** `<materializations>/{run_id}` when the run has a tree, and how the agent may use it */
  readonly bundle?: { readonly path: string; readonly access: "ro" | "rw" };
  /** `<runs>/{run_id}/home` */
  readonly home: string;
  readonly envNames: readonly string[];
  readonly egress: readonly string[];
  readonly limits: ResourceLimits;
  readonly prlimit?: string;
  /** the run's tool calls are decided by a policy: its decision socket is bound in */
  readonly decisions?: boolean;
  /** the keyring calls are refused (seccomp.ts): bubblewrap reads the program on fd 3 */
  readonly seccomp?: boolean;
  /** the run gets control groups (run-cgroups.ts) bounding its memory and tasks, and (`cpu`) weighing its CPU */
  readonly cgroup?: CgroupLimits & { readonly cpu: boolean };
  /** the agent may not make user namespaces of its own (bubblewrap's `--disable-userns`) */
  readonly disableUserns?: boolean;
}

/** Files and directories of /etc an agent never reads: password hashes, host keys, TLS keys. */
const ETC_SECRETS = ["/etc/shadow", "/etc/shadow-", "/etc/gshadow", "/etc/gshadow-", "/etc/sudoers", "/etc/sudoers.d", "/etc/ssl/private", "/etc/security/opasswd"];
const SYSTEM_DIRS = ["/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc"];

/** The directory holding the command's installation, mounted read-only (DESIGN.md "Confinement"). */
export function installationOf(command: string): string {
  const real = fs.realpathSync(command);
  // An npm-installed CLI loads its dependencies (platform binaries, vendored packages) from the
  // node_modules it lies in: the outermost one holds them all.
  const parts = real.split(sep);
  const nm = parts.indexOf("node_modules");
  if (nm > 0) return parts.slice(0, nm + 1).join(sep);
  return dirname(real);
}

function underSystem(path: string): boolean {
  return ["/usr/", "/bin/", "/sbin/", "/lib/", "/lib64/", "/etc/"].some((d) => path.startsWith(d));
}

/** The mounts of a run, in the order bubblewrap applies them. */
export function mountsOf(plan: SandboxPlan): Mount[] {
  const mounts: Mount[] = [];
  for (const dir of SYSTEM_DIRS) {
    let st: fs.Stats;
    try {
      st = fs.lstatSync(dir);
    } catch {
      continue;
    }
    if (st.isSymbolicLink()) mounts.push({ path: dir, access: "symlink", what: "system", source: fs.readlinkSync(dir) });
    else if (st.isDirectory()) mounts.push({ path: dir, access: "ro", what: "system" });
  }
  for (const secret of ETC_SECRETS) {
    let st: fs.Stats;
    try {
      st = fs.lstatSync(secret);
    } catch {
      continue;
    }
    mounts.push({ path: secret, access: "hidden", what: st.isDirectory() ? "secret-dir" : "secret" });
  }
  for (const key of safeReaddir("/etc/ssh").filter((n) => /^ssh_host_.*_key$/.test(n))) mounts.push({ path: join("/etc/ssh", key), access: "hidden", what: "secret" });
  // Every file an agent may write lands on the node's disk, where a full disk refuses new runs
  // ("Limits"), never in memory, where no process is charged for it and the OOM killer would take
  // the largest process, perhaps the node: /tmp and /dev/shm are directories of the run's home,
  // and the new root and /dev (tmpfs both) are read-only once mounted.
  mounts.push({ path: "/tmp", access: "rw", what: "tmp", source: join(plan.home, RUN_TMP_DIR) });
  mounts.push({ path: "/proc", access: "proc", what: "proc" });
  mounts.push({ path: "/dev", access: "dev", what: "dev" });
  mounts.push({ path: "/dev/shm", access: "rw", what: "shm", source: join(plan.home, RUN_SHM_DIR) });
  mounts.push({ path: "/dev", access: "remount-ro", what: "dev" });
  const node = dirname(dirname(fs.realpathSync(process.execPath)));
  if (!underSystem(`${node}/`) && node !== "/usr") mounts.push({ path: node, access: "ro", what: "node" });
  const provider = installationOf(plan.command);
  if (!underSystem(`${provider}/`)) mounts.push({ path: provider, access: "ro", what: "provider" });
  mounts.push({ path: plan.workspace, access: plan.workspaceAccess, what: "workspace" });
  if (plan.bundle !== undefined) mounts.push({ path: plan.bundle.path, access: plan.bundle.access, what: "bundle" });
  mounts.push({ path: plan.home, access: "rw", what: "home" });
  mounts.push({ path: EGRESS_SOCKET_INSIDE, access: "ro", what: "egress", source: "{egress_socket}" });
  mounts.push({ path: STATUS_INSIDE, access: "rw", what: "status", source: "{status_file}" });
  if (plan.decisions === true) mounts.push({ path: DECISION_SOCKET_INSIDE, access: "ro", what: "decisions", source: "{decision_socket}" });
  mounts.push({ path: "/", access: "remount-ro", what: "root" });
  return mounts;
}

function safeReaddir(dir: string): string[] {
  try {
    return fs.readdirSync(dir);
  } catch {
    return [];
  }
}

/** The profile `run.started` records (without the run's id: see the module comment). */
export function sandboxProfile(plan: SandboxPlan): IsolationProfile {
  return {
    v: 1,
    kind: "bubblewrap",
    namespaces: ["cgroup", "ipc", "mount", "net", "pid", "user", "uts"],
    capabilities: [],
    no_new_privileges: true,
    ...(plan.disableUserns === true ? { no_nested_user_namespaces: true } : {}),
    mounts: mountsOf(plan).map((m) => ({ ...m }) as JsonValue),
    env: [...plan.envNames].sort(),
    egress: { allow: [...plan.egress].sort(), via: `http://127.0.0.1:${BRIDGE_PORT}` },
    limits: limitsJson(plan.prlimit === undefined ? {} : plan.limits),
    ...(plan.seccomp === true ? { seccomp: { deny: [...DENIED_SYSCALLS], errno: DENIED_ERRNO } } : {}),
    ...(plan.cgroup === undefined
      ? {}
      : {
          cgroup: {
            memory_bytes: plan.cgroup.memoryBytes,
            all_runs_memory_bytes: plan.cgroup.allRunsMemoryBytes,
            tasks: plan.cgroup.tasks,
            ...(plan.cgroup.cpu ? { all_runs_cpu_weight: plan.cgroup.allRunsCpuWeight } : {}),
          },
        }),
  };
}

export function unconfinedProfile(envNames: readonly string[]): IsolationProfile {
  return { v: 1, kind: "none", env: [...envNames].sort() };
}

export function profileDigest(profile: IsolationProfile): Digest {
  return canonicalDigest(profile);
}

function limitsJson(limits: ResourceLimits): JsonValue {
  const out: Record<string, number> = {};
  if (limits.processes !== undefined) out.processes = limits.processes;
  if (limits.addressSpaceBytes !== undefined) out.address_space_bytes = limits.addressSpaceBytes;
  if (limits.cpuSeconds !== undefined) out.cpu_seconds = limits.cpuSeconds;
  if (limits.fileSizeBytes !== undefined) out.file_size_bytes = limits.fileSizeBytes;
  if (limits.openFiles !== undefined) out.open_files = limits.openFiles;
  return out;
}

function prlimitArgs(limits: ResourceLimits): string[] {
  const args: string[] = [];
  if (limits.processes !== undefined) args.push(`--nproc=${limits.processes}`);
  if (limits.addressSpaceBytes !== undefined) args.push(`--as=${limits.addressSpaceBytes}`);
  if (limits.cpuSeconds !== undefined) args.push(`--cpu=${limits.cpuSeconds}`);
  if (limits.fileSizeBytes !== undefined) args.push(`--fsize=${limits.fileSizeBytes}`);
  if (limits.openFiles !== undefined) args.push(`--nofile=${limits.openFiles}`);
  args.push("--core=0");
  return args;
}

/** The run's own paths in place of `{run_id}`. */
export function forRun(path: string, runId: string): string {
  return path.split("{run_id}").join(runId);
}

/** The command line that starts `command args` confined as the plan says, for run `runId`. */
export function sandboxCommand(
  bwrap: string,
  plan: SandboxPlan,
  runId: string,
  egressSocket: string,
  statusFile: string,
  cwd: string,
  command: string,
  args: readonly string[],
  decisionSocket?: string,
): { command: string; args: string[] } {
  const b: string[] = ["--unshare-all", "--unshare-user", ...(plan.disableUserns === true ? ["--disable-userns"] : []), "--die-with-parent", "--new-session", "--cap-drop", "ALL", "--hostname", "warden-sandbox"];
  if (plan.seccomp === true) b.push("--seccomp", String(SECCOMP_FD));
  for (const m of mountsOf(plan)) {
    const path = forRun(m.path, runId);
    switch (m.access) {
      case "symlink":
        b.push("--symlink", m.source as string, path);
        break;
      case "ro":
        b.push("--ro-bind", m.what === "egress" ? egressSocket : m.what === "decisions" ? decisionSocketOf(decisionSocket) : path, path);
        break;
      case "rw":
        b.push("--bind", m.what === "status" ? statusFile : m.source !== undefined ? forRun(m.source, runId) : path, path);
        break;
      case "remount-ro":
        b.push("--remount-ro", path);
        break;
      case "tmpfs":
        b.push("--tmpfs", path);
        break;
      case "proc":
        b.push("--proc", path);
        break;
      case "dev":
        b.push("--dev", path);
        break;
      case "hidden":
        if (m.what === "secret-dir") b.push("--tmpfs", path, "--remount-ro", path);
        else b.push("--ro-bind", "/dev/null", path);
        break;
    }
  }
  b.push("--chdir", cwd, "--", fs.realpathSync(process.execPath), "-e", BRIDGE_SOURCE, "--", String(BRIDGE_PORT), EGRESS_SOCKET_INSIDE, STATUS_INSIDE, `${DECISION_HOST}:${DECISION_PORT}`, plan.decisions === true ? DECISION_SOCKET_INSIDE : "-", command, ...args);
  if (plan.prlimit === undefined) return { command: bwrap, args: b };
  return { command: plan.prlimit, args: [...prlimitArgs(plan.limits), "--", bwrap, ...b] };
}

function decisionSocketOf(socket: string | undefined): string {
  if (socket === undefined) throw new Error("a governed run's sandbox needs its decision socket");
  return socket;
}

/**
 * The proxy variables of a confined agent: everything goes through the node but the bridge's
 * decision address (NO_PROXY DECISION_HOST, on the sandbox's own loopback), so Claude Code's HTTP
 * hook reaches the decision port directly; through the egress proxy it would be refused.
 */
export function proxyEnvironment(): Record<string, string> {
  const url = `http://127.0.0.1:${BRIDGE_PORT}`;
  return { HTTP_PROXY: url, HTTPS_PROXY: url, http_proxy: url, https_proxy: url, ALL_PROXY: url, all_proxy: url, NO_PROXY: DECISION_HOST, no_proxy: DECISION_HOST };
}
