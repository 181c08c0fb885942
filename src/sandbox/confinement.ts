/**
 * What the runner asks of the sandbox module: before a run's claim, the plan of its confinement
 * (refused when this machine cannot confine, fail closed) and the profile run.started records;
 * at launch, the run's private directories, its egress proxy and the confined command line;
 * after the agent is gone, the proxy's last records and the removal of the run's directories.
 */
import * as fs from "node:fs";
import * as os from "node:os";
import { join } from "node:path";
import type { JsonValue } from "../core/canonical.js";
import type { Digest } from "../core/digest.js";
import { WardenError } from "../core/errors.js";
import { ensurePrivateDirSync } from "../storage/secure-fs.js";
import { EgressProxy, egressTarget, parseEgressEntry, type EgressJournal } from "./egress.js";
import { keyringFilter } from "./seccomp.js";
import { probeSandbox } from "./probe.js";
import { joinedCommand, RunCgroups, type RunCgroup } from "./run-cgroups.js";
import {
  DEFAULT_LIMITS,
  profileDigest,
  proxyEnvironment,
  sandboxCommand,
  sandboxProfile,
  unconfinedProfile,
  type IsolationProfile,
  type Isolation,
  type ResourceLimits,
  type SandboxPlan,
} from "./profile.js";

export interface ConfinementOptions {
  /** private directory of the runs' own directories (`<runs>/<run id>/`: the proxy's socket, the bridge's status) */
  readonly runsDir: string;
  /** where the runs' private homes are (`<homes>/<run id>`, written by providers/run-home.ts): bound read-write */
  readonly homesDir: string;
  /** bubblewrap's path (default /usr/bin/bwrap) */
  readonly bwrap?: string;
  /** prlimit's path (default /usr/bin/prlimit when present; null: no resource limits) */
  readonly prlimit?: string | null;
  /** over DEFAULT_LIMITS, key by key */
  readonly limits?: ResourceLimits;
  /** whether confined runs get control groups where the node can make them (default true) */
  readonly cgroups?: boolean;
  /** `host:port` every confined run may reach, beside its provider's model endpoint */
  readonly egress?: readonly string[];
  /** workspace id → `host:port` its runs may reach besides */
  readonly workspaceEgress?: Readonly<Record<string, readonly string[]>>;
}

export interface ConfinementRequest {
  readonly isolation: Isolation;
  readonly workspaceId: string;
  readonly workspace: string;
  readonly readOnly: boolean;
  /** the provider's executable as found on the host */
  readonly command: string;
  /** the model endpoint's URL, whose host:port is allowed by default */
  readonly modelUrl?: string;
  /** `<materializations>/{run_id}` when the run gets a tree, and whether the agent writes in it */
  readonly bundle?: { readonly path: string; readonly writable: boolean };
  /** names of the environment the agent gets (values are not recorded) */
  readonly envNames: readonly string[];
  /** the run's tool calls are decided by a policy: its decision socket is bound in */
  readonly decisions?: boolean;
}

/** The confinement of one run, decided before its claim. */
export interface PlannedConfinement {
  readonly isolation: Isolation;
  readonly profile: IsolationProfile;
  readonly digest: Digest;
  /** what run.started records */
  readonly record: JsonValue;
  readonly plan?: SandboxPlan;
}

/** A launched run's confinement. */
export interface RunConfinement {
  readonly command: string;
  readonly args: readonly string[];
  /** variables the agent gets besides its own: the proxy's when confined (HOME is the run home's) */
  readonly env: Readonly<Record<string, string>>;
  /** after the agent is gone: ends open connections and waits for their journal entries */
  drain(): Promise<void>;
  /** the agent's signal when bubblewrap reported it as an exit code (bridge.ts) */
  signalOf(exitCode: number | null): NodeJS.Signals | undefined;
  /** removes the run's directories */
  remove(): void;
  /** the seccomp program bubblewrap reads on the agent's fd 3 (`--seccomp 3`), when confined */
  readonly seccomp?: string;
  /** how many of the run's processes the kernel killed for its memory bound (its memory group's count) */
  memoryKills(): number;
}

/** Longest unix socket path Linux takes (sun_path is 108 bytes with its NUL). */
const MAX_SOCKET_PATH = 107;

export class Confinement {
  readonly #runsDir: string;
  readonly #homesDir: string;
  readonly #bwrap: string;
  readonly #prlimit: string | undefined;
  readonly #limits: ResourceLimits;
  readonly #egress: readonly string[];
  readonly #workspaceEgress: Readonly<Record<string, readonly string[]>>;
  /** the runs' control groups, or why there are none */
  readonly #cgroups: RunCgroups | { readonly reason: string };

  constructor(options: ConfinementOptions) {
    this.#runsDir = options.runsDir;
    this.#homesDir = options.homesDir;
    this.#bwrap = options.bwrap ?? "/usr/bin/bwrap";
    this.#prlimit = options.prlimit === null ? undefined : (options.prlimit ?? (fs.existsSync("/usr/bin/prlimit") ? "/usr/bin/prlimit" : undefined));
    this.#limits = { ...DEFAULT_LIMITS, ...options.limits };
    this.#egress = checkEgress(options.egress ?? [], "sandbox.egress");
    this.#workspaceEgress = Object.fromEntries(Object.entries(options.workspaceEgress ?? {}).map(([id, list]) => [id, checkEgress(list, `sandbox.workspaceEgress.${id}`)]));
    ensurePrivateDirSync(this.#runsDir, { create: true, recursive: true });
    // No run is active when a runner starts: what is here was left by a process that died.
    for (const name of fs.readdirSync(this.#runsDir)) fs.rmSync(join(this.#runsDir, name), { recursive: true, force: true });
    const { memoryBytes, allRunsMemoryBytes, processes, allRunsCpuWeight } = this.#limits;
    this.#cgroups =
      options.cgroups === false
        ? { reason: "sandbox.cgroups is false" }
        : memoryBytes === undefined || allRunsMemoryBytes === undefined || processes === undefined
          ? { reason: "no memory or task bound is set" }
          : RunCgroups.open(this.#runsDir, { memoryBytes, allRunsMemoryBytes: Math.max(allRunsMemoryBytes, memoryBytes), tasks: processes, allRunsCpuWeight: allRunsCpuWeight ?? 100 });
    if (this.#cgroups instanceof RunCgroups) this.#cgroups.sweep();
  }

  /** Whether confined runs can start here (asked once per bubblewrap path). */
  available(): { ok: boolean; reason?: string; disableUserns?: boolean } {
    return probeSandbox(this.#bwrap);
  }

  /** The run's confinement, or `sandbox-unavailable` before any claim when it cannot be had. */
  plan(request: ConfinementRequest): PlannedConfinement {
    if (request.isolation === "none") {
      const profile = unconfinedProfile([...request.envNames, "HOME"]);
      const digest = profileDigest(profile);
      return { isolation: "none", profile, digest, record: { profile, digest } };
    }
    const probe = this.available();
    if (!probe.ok) {
      throw new WardenError(
        "sandbox-unavailable",
        `runs are confined with bubblewrap, which cannot start here (${probe.reason ?? "unknown"}): install it with \`apt-get install bubblewrap\`, or set isolation "none" for this workspace in the node's configuration`,
        503,
        { details: { bwrap: this.#bwrap } },
      );
    }
    const model = modelTarget(request.modelUrl);
    const egress = [...new Set([...(model === undefined ? [] : [model]), ...this.#egress, ...(this.#workspaceEgress[request.workspaceId] ?? [])])];
    const plan: SandboxPlan = {
      command: request.command,
      // A run's own worktree is named with {run_id} (it does not exist before the run): its parent is real already.
      workspace: request.workspace.includes("{run_id}") ? request.workspace : fs.realpathSync(request.workspace),
      workspaceAccess: request.readOnly ? "ro" : "rw",
      ...(request.bundle === undefined ? {} : { bundle: { path: request.bundle.path, access: request.bundle.writable ? "rw" : "ro" } }),
      home: join(this.#homesDir, "{run_id}"),
      envNames: [...new Set([...request.envNames, "HOME", ...Object.keys(proxyEnvironment())])],
      egress,
      limits: this.#limits,
      ...(this.#prlimit === undefined ? {} : { prlimit: this.#prlimit }),
      ...(request.decisions === true ? { decisions: true } : {}),
      ...(keyringFilter() === undefined ? {} : { seccomp: true }),
      ...(probe.disableUserns === true ? { disableUserns: true } : {}),
      ...(this.#cgroups instanceof RunCgroups ? { cgroup: { ...this.#cgroups.limits, cpu: this.#cgroups.cpu } } : {}),
    };
    const profile = sandboxProfile(plan);
    const digest = profileDigest(profile);
    return { isolation: "sandbox", profile, digest, record: { profile, digest }, plan };
  }

  /**
   * Where a governed run's decision socket is made: in the run's private directory, or a private
   * directory of its own when that path would pass Linux's limit. `remove` deletes what it made.
   */
  decisionSocket(runId: string): { readonly path: string; remove(): void } {
    const runDir = join(this.#runsDir, runId);
    ensurePrivateDirSync(runDir, { create: true });
    const path = join(runDir, "decide.sock");
    if (Buffer.byteLength(path) <= MAX_SOCKET_PATH) return { path, remove: () => fs.rmSync(path, { force: true }) };
    const dir = fs.mkdtempSync(join(os.tmpdir(), "warden-decide-"));
    fs.chmodSync(dir, 0o700);
    return { path: join(dir, "s"), remove: () => fs.rmSync(dir, { recursive: true, force: true }) };
  }

  /** Makes the run's directories (and, confined, its egress proxy) and the command that starts it. */
  async launch(
    planned: PlannedConfinement,
    runId: string,
    journal: EgressJournal,
    command: string,
    args: readonly string[],
    cwd: string,
    decisionSocket?: string,
    egressCounted = 0,
  ): Promise<RunConfinement> {
    const runDir = join(this.#runsDir, runId);
    ensurePrivateDirSync(runDir, { create: true });
    let socketDir: string | undefined;
    const remove = (): void => {
      fs.rmSync(runDir, { recursive: true, force: true });
      if (socketDir !== undefined) fs.rmSync(socketDir, { recursive: true, force: true });
    };
    if (planned.plan === undefined) {
      return { command, args, env: {}, drain: async () => undefined, signalOf: () => undefined, remove, memoryKills: () => 0 };
    }
    let socket = join(runDir, "egress.sock");
    if (Buffer.byteLength(socket) > MAX_SOCKET_PATH) {
      // A deep node home: the socket goes to a private directory of its own.
      socketDir = fs.mkdtempSync(join(os.tmpdir(), "warden-egress-"));
      fs.chmodSync(socketDir, 0o700);
      socket = join(socketDir, "s");
    }
    let proxy: EgressProxy;
    try {
      proxy = await EgressProxy.listen(socket, planned.plan.egress, journal, egressCounted);
    } catch (error) {
      remove();
      throw error;
    }
    const status = join(runDir, "status");
    fs.writeFileSync(status, "", { mode: 0o600 });
    let seccomp: string | undefined;
    const filter = planned.plan.seccomp === true ? keyringFilter() : undefined;
    if (filter !== undefined) {
      seccomp = join(runDir, "seccomp.bpf");
      fs.writeFileSync(seccomp, filter, { mode: 0o600 });
    }
    let confined = sandboxCommand(this.#bwrap, planned.plan, runId, socket, status, fs.realpathSync(cwd), fs.realpathSync(command), args, decisionSocket);
    let cgroup: RunCgroup | undefined;
    if (planned.plan.cgroup !== undefined) {
      // Planned with groups, the run has them or does not start: its profile says it is bounded.
      try {
        if (!(this.#cgroups instanceof RunCgroups)) throw new WardenError("sandbox-cgroup-failed", `the run's control groups could not be made: ${this.#cgroups.reason}`, 503);
        cgroup = this.#cgroups.create(runId);
      } catch (error) {
        await proxy.close();
        remove();
        throw error;
      }
      confined = joinedCommand(cgroup, confined.command, confined.args);
    }
    return {
      command: confined.command,
      args: confined.args,
      ...(seccomp === undefined ? {} : { seccomp }),
      env: proxyEnvironment(),
      drain: () => proxy.close(),
      signalOf: (exitCode) => signalFrom(status, exitCode),
      memoryKills: () => cgroup?.oomKills() ?? 0,
      remove: () => {
        cgroup?.remove();
        remove();
      },
    };
  }
}

function modelTarget(url: string | undefined): string | undefined {
  if (url === undefined) return undefined;
  try {
    const u = new URL(url);
    const port = u.port === "" ? (u.protocol === "https:" ? 443 : 80) : Number(u.port);
    return egressTarget(u.hostname, port);
  } catch {
    return undefined;
  }
}

function checkEgress(list: readonly string[], where: string): string[] {
  return list.map((entry) => {
    const parsed = parseEgressEntry(entry);
    if (parsed === undefined) throw new WardenError("sandbox-egress-invalid", `${where}: ${JSON.stringify(entry)} is not host:port`, 400);
    return parsed;
  });
}

function signalFrom(status: string, exitCode: number | null): NodeJS.Signals | undefined {
  if (exitCode === null || exitCode <= 128) return undefined;
  let name: string;
  try {
    name = fs.readFileSync(status, "utf8").slice(0, 32);
  } catch {
    return undefined;
  }
  const number = (os.constants.signals as Record<string, number>)[name];
  return number !== undefined && number + 128 === exitCode ? (name as NodeJS.Signals) : undefined;
}
