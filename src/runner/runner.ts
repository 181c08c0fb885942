/**
 * Runs a provider CLI under an exactly-once claim (DESIGN.md G1, G2, G6, G8):
 *
 *   check the request (provider, prompt, workspace, bundle binding) — nothing claimed yet
 *   open the claim                    durable, run.started journaled with provider and bundle
 *   materialize the bundle            session = run id; journaled as a note
 *   effect.started (process)          durable before the spawn
 *   revalidate the tree byte for byte drift → the agent is never launched (recorded failure)
 *   spawn in its own process group    stdout/stderr to private files, sha256 as they stream
 *   tool calls from the event stream  each its own effect.started / effect.finished
 *   effect.finished (process)         exit code, signal, output digests
 *   finish                            recorded only if the journal is clean; timeout, a signal,
 *                                     a tool call left open or a journal failure → unresolved
 *   cleanup the materialization
 *
 * A run whose node dies at any point reads `unresolved` (its claim's owner is gone) and is never
 * launched again: only an operator's reconciliation closes it.
 */
import { randomBytes } from "node:crypto";
import * as fs from "node:fs";
import { dirname, isAbsolute, join } from "node:path";
import { hostname } from "node:os";
import { canonicalDigest, type JsonValue } from "../core/canonical.js";
import { EMPTY_SHA256 } from "../core/digest.js";
import { DEFAULT_LIMITS } from "../core/limits.js";
import { ConflictError, NotFoundError, ValidationError, WardenError, errnoCode, isWardenError } from "../core/errors.js";
import { ensurePrivateDirSync } from "../storage/secure-fs.js";
import type { Invocations, InvocationHandle, ExistingOutcome } from "../invocations/index.js";
import type { JournalEntry } from "../journal/types.js";
import type { Materializer } from "../providers/materializer.js";
import { expandLaunchArgs, expandRunLaunch, resolveProfiles, type PermissionMode, type ProviderProfile, type ProviderProfiles } from "../providers/profiles.js";
import { modelLaunch, type ModelLaunch } from "../providers/model-endpoint.js";
import { checkProviderConfigured } from "../providers/availability.js";
import { needsTreeWithoutBundle } from "../providers/materializer.js";
import { runHomeEnvNames, type RunHome, type RunHomes } from "../providers/run-home.js";
import type { ParkedSessionStore } from "../invocations/parked-sessions.js";
import { PROVIDER_NAMES, type BundleRef, type BundleSigner, type Materialization, type ProviderName } from "../providers/types.js";
import { AgentProcess, type AgentExit, type AgentSpawn } from "./agent-process.js";
import { findCommand } from "./command-path.js";
import { cliVersionOf } from "../providers/cli-version.js";
import { OutputCapture, type CaptureSummary } from "./capture.js";
import { outputPath, readOutputTail, type OutputStream, type OutputTail } from "./output-files.js";
import { eventReader, stderrReader, STDERR_LINE_BYTES, type ParsedEvent } from "./events.js";
import { parseInvocation, requestJson, type InvokeRequest, type ParsedInvocation, type RequestBounds } from "./request.js";
import { ToolEffects } from "./tool-effects.js";
import { RunAnswer } from "./run-answer.js";
import { AGENT_TAG_VAR } from "./orphans.js";
import { RUN_TAG_VAR } from "./stragglers.js";
import type { LaunchRecords } from "./launch-records.js";
import { Confinement, type ConfinementOptions, type PlannedConfinement, type RunConfinement } from "../sandbox/confinement.js";
import { inheritedEnvironment } from "../sandbox/environment.js";
import { DECISION_HOST, DECISION_PORT, DECISION_SOCKET_INSIDE, type Isolation } from "../sandbox/profile.js";
import { breachOf, pricesDigest, runBudget, spendDay, withinDay, SpendMeter, type Budget, type BudgetLimit, type SpendConfig, type SpendCounters, type SpendTotals } from "./spend.js";
import { DECIDE_PATH, DecisionGate } from "../policy/gate.js";
import type { JournalEvent, PolicyApprovalEvent, PolicyDecisionEvent, RunParkedEvent } from "../journal/types.js";
import { CodexCalls } from "./codex-calls.js";
import { hookCommand, type HttpHook } from "../policy/hook.js";
import { ToolPolicy, type ToolRequest } from "../policy/tool-policy.js";
import type { PlannedWorktree, RunWorktrees } from "../changes/run-worktrees.js";
import type { Worktree } from "../changes/worktrees.js";
import { TRACE_ENV_NAMES, type RunTrace, type TraceCarrier, type Tracing } from "../tracing/tracing.js";
import type { RunJournal } from "../invocations/handle.js";

export interface RunnerHooks {
  /** After the bundle is materialized, before it is revalidated and the agent launched. */
  afterMaterialize?(materialization: Materialization): void | Promise<void>;
  /** Right after the agent process started (the leader of its own process group). */
  afterLaunch?(pid: number, runId: string): void | Promise<void>;
}

export interface RunnerOptions {
  readonly invocations: Invocations;
  /** needed for requests that name a bundle */
  readonly materializer?: Materializer;
  /** workspace id → absolute directory the agent runs in */
  readonly workspaces: Readonly<Record<string, string>>;
  /** the workspace of requests that name none; without it such requests are refused */
  readonly defaultWorkspace?: string;
  /** workspace id → permission mode of every run in it (over the provider's `permission`) */
  readonly workspacePermissions?: Readonly<Record<string, PermissionMode>>;
  /** workspaces whose own provider configuration (`.claude/`, `.mcp.json`, `.codex/`) may run */
  readonly trustedWorkspaces?: readonly string[];
  /** where every run gets its fresh private home (HOME, the provider's configuration) */
  readonly runHomes: RunHomes;
  /** private directory for the captured stdout/stderr of every run */
  readonly outputDir: string;
  readonly profiles?: ProviderProfiles;
  /** the providers the operator configured (availability.ts); default: all of them */
  readonly configuredProviders?: readonly ProviderName[];
  /** providers whose command the operator named: a bare name is looked up on PATH alone (command-path.ts) */
  readonly namedCommands?: readonly ProviderName[];
  /** base environment of agents (default: the allowlisted part of this process's: agentEnvironment) */
  readonly env?: Readonly<Record<string, string | undefined>>;
  /** names of the node's environment passed to agents besides the allowlist (ignored with `env`) */
  readonly passEnv?: readonly string[];
  /** how every run is confined unless its workspace says otherwise (default "sandbox": fail closed) */
  readonly isolation?: Isolation;
  /** workspace id → its runs' isolation (over `isolation`) */
  readonly workspaceIsolation?: Readonly<Record<string, Isolation>>;
  /** the sandbox's settings; `runsDir` defaults to `runs` beside `outputDir` */
  readonly sandbox?: Omit<ConfinementOptions, "runsDir" | "homesDir"> & { readonly runsDir?: string };
  /**
   * workspace id → the tool policy of its runs (DESIGN.md "Governed tool calls"): per provider, or
   * `default` for every provider without its own; compiled and validated when the runner is made
   */
  readonly policies?: Readonly<Record<string, WorkspacePolicies>>;
  /** given to every agent as AGENT_TAG_VAR, so a later node can tell it was orphaned (orphans.ts) */
  readonly agentTag?: string;
  /** where every agent is recorded while it runs, so a later node can find its session (launch-records.ts) */
  readonly launchRecords?: LaunchRecords;
  readonly defaultTimeoutS?: number;
  readonly maxTimeoutS?: number;
  /** between SIGTERM and SIGKILL of a timed-out agent's process group */
  readonly killGraceMs?: number;
  readonly maxPromptBytes?: number;
  /** how much of the end of stdout the result keeps */
  readonly outputTailBytes?: number;
  /** longest stdout line read for events; a longer one makes the run unresolved */
  readonly maxEventLineBytes?: number;
  /** bytes of each output stream of a run kept on disk (the rest is hashed and read, not stored) */
  readonly maxOutputBytes?: number;
  readonly hooks?: RunnerHooks;
  /** budgets and the price table (DESIGN.md "Spend"); without it runs are metered, never stopped */
  readonly spend?: SpendConfig;
  /** the daily counters per workspace and principal (the backend's); needed for day budgets */
  readonly spendCounters?: SpendCounters;
  /** git workspaces get a worktree per run and a change set (DESIGN.md "Change sets"); without it every workspace is a plain directory */
  readonly worktrees?: RunWorktrees;
  /** OpenTelemetry traces of runs (DESIGN.md "Traces"); without it nothing is traced */
  readonly tracing?: Tracing;
  /** the index of a recorded run's seal in the node's transparency log (a traced run's `warden.log.leaf`) */
  readonly logLeaf?: (runId: string) => Promise<number | undefined>;
  /**
   * Runs may park on a call their policy decided `ask` and wait for an operator (DESIGN.md
   * "Governed tool calls"); needs a backend that can take a parked run up again. Without it an ask
   * is a denial. `deadlineMs`: how long an approval may wait; past it, the call is denied.
   */
  readonly parking?: { readonly deadlineMs: number };
  /**
   * Where a parked run's session transcript is kept for the other nodes of a fleet (any of them
   * may answer its approval and resume it); without it, only this node's run home holds it.
   */
  readonly parkedSessions?: ParkedSessionStore;
}

/** An operator's answer to a parked run (or the node's, at the deadline). */
export interface ApprovalAnswer {
  readonly decision: "allow" | "deny";
  readonly by: { readonly name: string; readonly role: string };
  readonly reason?: string;
}

/** What a resumed run carries from its parking into its launch. */
interface Resume {
  readonly parked: RunParkedEvent;
  /** network effects the journal has already: the egress proxy's ids go on after them */
  readonly egressCounted: number;
  /** the asked call's decision fingerprint and tool (its effect, held for the resumed hook's allow) */
  readonly fingerprint: string;
}

/** A policy's Cedar text and where it came from (named in its errors). */
export interface PolicySource {
  readonly text: string;
  readonly source: string;
}

/** A workspace's tool policies: one per provider, `default` for the others. */
export type WorkspacePolicies = Partial<Record<ProviderName | "default", PolicySource>>;

/** The providers whose CLI's pre-tool hook warden drives: a policy for another refuses its runs. */
const GOVERNABLE_PROVIDERS: ReadonlySet<ProviderName> = new Set(["claude", "codex"]);

/** An invocation as a caller of `invoke` hands it over: the request not yet parsed. */
export interface InvokeInput {
  readonly scope: string;
  readonly id: string;
  readonly request: unknown;
}

/** What `start` takes: an invocation parsed at its door (request.ts parseInvocation). */
export interface StartInput extends ParsedInvocation {
  /** the caller read the id as absent just before (Warden.start): the claim is attempted without reading it again */
  readonly lookedUp?: boolean;
  /** the invocation was leased from the queue: its claim is written only while the lease holds (OpenOptions.dequeued) */
  readonly dequeued?: boolean;
  /** the caller's trace context (the HTTP request's `traceparent`): the run's span is its child; not part of the request */
  readonly trace?: TraceCarrier;
}

/** What the runner records for a run: the replayed result of its invocation. */
export interface RunResult {
  readonly [key: string]: JsonValue;
  readonly exit_code: number | null;
  readonly output_sha256: string;
  readonly output_tail: string;
}

export type StartOutcome =
  | {
      readonly status: "started";
      readonly run_id: string;
      readonly done: Promise<ExistingOutcome>;
      /**
       * Settles when the agent's process has exited (or the run ended without one), before the
       * run's result is recorded and its home removed: what holds a slot is the agent.
       */
      readonly agentGone: Promise<void>;
    }
  | ExistingOutcome;

const PROCESS_EFFECT = "process";

/** What the end of a run keeps: a parked run its home and worktree, a failed change set its worktree. */
interface RunEnding {
  parked: boolean;
  changeSetFailed: boolean;
}

export class Runner {
  readonly #invocations: Invocations;
  readonly #materializer: Materializer | undefined;
  readonly #workspaces: ReadonlyMap<string, string>;
  readonly #defaultWorkspace: string | undefined;
  readonly #workspacePermissions: Readonly<Record<string, PermissionMode>>;
  readonly #trustedWorkspaces: ReadonlySet<string>;
  readonly #runHomes: RunHomes;
  readonly #outputDir: string;
  readonly #profiles: ProviderProfiles;
  readonly #configured: ReadonlySet<ProviderName> | undefined;
  readonly #namedCommands: ReadonlySet<ProviderName>;
  readonly #env: Readonly<Record<string, string | undefined>>;
  readonly #agentTagEnv: Readonly<Record<string, string>>;
  readonly #launchRecords: LaunchRecords | undefined;
  readonly #defaultTimeoutS: number;
  readonly #maxTimeoutS: number;
  readonly #killGraceMs: number;
  /** run id → how to cancel its agent, while it runs */
  readonly #cancels = new Map<string, (by: string) => void>();
  /** run id → settles its StartOutcome.agentGone */
  readonly #agentGone = new Map<string, () => void>();
  /** run id → who cancelled it before its agent was spawned (it is stopped as it spawns) */
  readonly #pendingCancels = new Map<string, string>();
  readonly #maxPromptBytes: number;
  readonly #tailBytes: number;
  readonly #maxLineBytes: number;
  readonly #maxOutputBytes: number;
  readonly #hooks: RunnerHooks;
  readonly #tools = new Map<string, ToolEffects>();
  readonly #isolation: Isolation;
  readonly #workspaceIsolation: Readonly<Record<string, Isolation>>;
  readonly #confinement: Confinement;
  readonly #spend: SpendConfig;
  readonly #counters: SpendCounters | undefined;
  readonly #policies: ReadonlyMap<string, Partial<Record<ProviderName | "default", ToolPolicy>>>;
  readonly #worktrees: RunWorktrees | undefined;
  readonly #parking: RunnerOptions["parking"];
  readonly #parkedSessions: ParkedSessionStore | undefined;
  /** parked runs' deadlines, by run id */
  readonly #deadlines = new Map<string, NodeJS.Timeout>();
  /** runs an approval is being answered for in this process */
  readonly #answering = new Set<string>();
  readonly #tracing: Tracing | undefined;
  readonly #logLeaf: ((runId: string) => Promise<number | undefined>) | undefined;

  constructor(options: RunnerOptions) {
    this.#invocations = options.invocations;
    this.#materializer = options.materializer;
    this.#workspaces = checkWorkspaces(options.workspaces);
    this.#defaultWorkspace = options.defaultWorkspace;
    if (this.#defaultWorkspace !== undefined && !this.#workspaces.has(this.#defaultWorkspace)) {
      throw new ValidationError("workspace-unknown", `default workspace ${JSON.stringify(this.#defaultWorkspace)} is not configured`);
    }
    this.#workspacePermissions = options.workspacePermissions ?? {};
    for (const id of Object.keys(this.#workspacePermissions)) {
      if (!this.#workspaces.has(id)) throw new ValidationError("workspace-unknown", `workspacePermissions names workspace ${JSON.stringify(id)}, which is not configured`);
    }
    this.#trustedWorkspaces = new Set(options.trustedWorkspaces ?? []);
    for (const id of this.#trustedWorkspaces) {
      if (!this.#workspaces.has(id)) throw new ValidationError("workspace-unknown", `trustedWorkspaces names workspace ${JSON.stringify(id)}, which is not configured`);
    }
    this.#runHomes = options.runHomes;
    this.#outputDir = options.outputDir;
    ensurePrivateDirSync(this.#outputDir, { create: true, recursive: true });
    this.#profiles = options.profiles ?? resolveProfiles();
    const keyNames = Object.values(this.#profiles).flatMap((p) => (p.model?.apiKeyEnv === undefined ? [] : [p.model.apiKeyEnv]));
    this.#env = options.env ?? agentEnvironment(process.env, [...keyNames, ...(options.passEnv ?? [])]);
    this.#isolation = options.isolation ?? "sandbox";
    this.#workspaceIsolation = options.workspaceIsolation ?? {};
    for (const id of Object.keys(this.#workspaceIsolation)) {
      if (!this.#workspaces.has(id)) throw new ValidationError("workspace-unknown", `workspaceIsolation names workspace ${JSON.stringify(id)}, which is not configured`);
    }
    this.#confinement = new Confinement({
      ...options.sandbox,
      runsDir: options.sandbox?.runsDir ?? join(dirname(this.#outputDir), "runs"),
      homesDir: options.runHomes.root,
    });
    this.#policies = compilePolicies(options.policies ?? {}, this.#workspaces);
    this.#configured = options.configuredProviders === undefined ? undefined : new Set(options.configuredProviders);
    this.#namedCommands = new Set(options.namedCommands ?? []);
    // Last, so nothing a materialization sets can hide an agent from the next node's reaping.
    this.#agentTagEnv = options.agentTag === undefined ? {} : { [AGENT_TAG_VAR]: options.agentTag };
    this.#launchRecords = options.launchRecords;
    this.#defaultTimeoutS = options.defaultTimeoutS ?? 3600;
    this.#maxTimeoutS = options.maxTimeoutS ?? 24 * 3600;
    this.#killGraceMs = options.killGraceMs ?? 5000;
    this.#maxPromptBytes = options.maxPromptBytes ?? 100_000;
    this.#tailBytes = options.outputTailBytes ?? 4096;
    this.#maxLineBytes = options.maxEventLineBytes ?? 8 * 1024 * 1024;
    this.#maxOutputBytes = options.maxOutputBytes ?? DEFAULT_LIMITS.runOutputBytes;
    this.#hooks = options.hooks ?? {};
    this.#spend = options.spend ?? {};
    this.#counters = options.spendCounters;
    if ((this.#spend.workspaceDay !== undefined || this.#spend.principalDay !== undefined) && this.#counters === undefined) {
      throw new ValidationError("spend-counters-required", "day budgets (workspaceDay, principalDay) need the node's spend counters (spendCounters)");
    }
    this.#worktrees = options.worktrees;
    this.#parking = options.parking;
    this.#parkedSessions = options.parkedSessions;
    this.#tracing = options.tracing;
    this.#logLeaf = options.logLeaf;
  }

  /** The configured workspaces' directories (where a dead node's worktrees are looked up). */
  get workspacePaths(): string[] {
    return [...this.#workspaces.values()];
  }

  /** The bounds a request is parsed against (request.ts): the node's, so every door checks alike. */
  get bounds(): RequestBounds {
    return { maxPromptBytes: this.#maxPromptBytes, maxTimeoutS: this.#maxTimeoutS };
  }

  /** The end of what a run's agent printed on `stream`, as this node captured it (live while it runs). */
  outputTail(runId: string, stream: OutputStream, maxBytes: number): Promise<OutputTail> {
    return readOutputTail(this.#outputDir, runId, stream, maxBytes);
  }

  /** Runs the invocation to its end (or answers its existing state without launching anything). */
  async invoke(input: InvokeInput): Promise<ExistingOutcome> {
    const started = await this.start(parseInvocation(input.scope, input.id, input.request, this.bounds));
    return started.status === "started" ? started.done : started;
  }

  /** The workspace of requests that name none. */
  get defaultWorkspace(): string | undefined {
    return this.#defaultWorkspace;
  }

  /** The providers this runner can run (configured, or with their credentials in the agents' environment). */
  get providers(): ProviderName[] {
    return PROVIDER_NAMES.filter((provider) => {
      try {
        checkProviderConfigured(provider, this.#configured?.has(provider) ?? true, this.#env);
        return true;
      } catch {
        return false;
      }
    });
  }

  /**
   * The CLI version of each provider this runner can run whose command is an npm package's
   * executable (the pinned CLIs: cli-version.ts), found as a launch would find it. A relative
   * command is resolved from the default workspace (else the first), as a run there would.
   */
  cliVersions(): Partial<Record<ProviderName, string>> {
    const cwd = this.#workspaces.get(this.#defaultWorkspace ?? "") ?? [...this.#workspaces.values()][0] ?? process.cwd();
    const versions: Partial<Record<ProviderName, string>> = {};
    for (const provider of this.providers) {
      const found = findCommand(this.#profiles[provider].command, this.#env, cwd, this.#namedCommands.has(provider) ? null : undefined);
      const version = found === undefined ? undefined : cliVersionOf(found);
      if (version !== undefined) versions[provider] = version;
    }
    return versions;
  }

  /**
   * Stops the agent of a run of this runner at an operator's request (DESIGN.md "Queued
   * invocations"): false when no agent of that run is running here (not started yet, or ended).
   */
  cancel(runId: string, by: string): boolean {
    const cancel = this.#cancels.get(runId);
    if (cancel === undefined) {
      // Claimed and not spawned yet (materializing, preparing its home): stopped as it spawns.
      // The caller asks only for runs it is executing; the entry goes with the run's end.
      this.#pendingCancels.set(runId, by);
      return false;
    }
    cancel(by);
    return true;
  }

  /**
   * Claims the invocation and, when this caller owns it, starts the run in the background:
   * `done` settles with its outcome. Any existing state is answered at once, nothing launched.
   */
  async start(input: StartInput): Promise<StartOutcome> {
    const request = input.request;
    const workspace = this.#workspaceOf(request);
    const cwd = workspace.path;
    // Before the claim: an unknown base, or a base for a plain directory, leaves the id free.
    let worktree: PlannedWorktree | undefined;
    if (this.#worktrees !== undefined) worktree = await this.#worktrees.plan(cwd, request.base);
    else if (request.base !== undefined) throw new ValidationError("workspace-not-git", "this runner keeps no worktrees: a request cannot name a base", { status: 422, details: { field: "base" } });
    let signers: readonly BundleSigner[] = [];
    if (request.bundle !== undefined) {
      if (this.#materializer === undefined) {
        throw new ValidationError("invoke-bundles-unavailable", "this runner has no materializer; requests cannot name a bundle", { status: 422 });
      }
      // Before the claim: a revision the trust policy no longer lets run is refused with the id still free.
      signers = await this.#materializer.check(request.provider, request.bundle);
    }
    // Before the claim: a CLI with no model or key to talk to retries until the node stops.
    checkProviderConfigured(request.provider, this.#configured?.has(request.provider) ?? true, this.#env);
    const profile = this.#profiles[request.provider];
    const command = profile.command;
    const found = findCommand(command, this.#env, cwd, this.#namedCommands.has(request.provider) ? null : undefined);
    if (found === undefined) {
      // Before the claim: the id stays free for a retry once the operator installs the CLI.
      throw new WardenError("provider-unavailable", `${request.provider}: ${JSON.stringify(command)} is not an executable file on this node (not in warden's node_modules/.bin nor on the agents' PATH)`, 503, {
        details: { provider: request.provider, command },
      });
    }
    const { launch: planned, policy, confinement } = this.#planLaunch(input.scope, request, workspace, found, signers, worktree, cwd);
    const spend = await this.#planSpend(input, request, workspace.id);
    if ("existing" in spend) return spend.existing;
    const launch: RunLaunch = { ...planned, spend };
    const opened = await this.#invocations.open(input.scope, input.id, requestJson(request), request.provider, {
      ...(input.lookedUp === true ? { lookedUp: true } : {}),
      ...(input.dequeued === true ? { dequeued: true } : {}),
      provider: request.provider,
      isolation: confinement.record,
      ...(policy === undefined ? {} : { policy: { schema: policy.schema, digest: policy.digest } }),
      ...(worktree === undefined ? {} : { base: worktree.base }),
      ...(request.bundle === undefined
        ? {}
        : {
            bundle: {
              bundle_id: request.bundle.bundle_id,
              revision: request.bundle.revision,
              ...(signers.length === 0 ? {} : { signers: signers.map((s) => ({ ...s, principals: [...s.principals] })) }),
            },
          }),
    });
    if (opened.status !== "fresh") return opened;
    const handle = opened.handle;
    const trace = this.#tracing?.startRun({
      runId: handle.run_id,
      scope: input.scope,
      idempotencyId: input.id,
      provider: request.provider,
      ...(profile.model === undefined ? {} : { model: profile.model.name }),
      ...(input.trace === undefined ? {} : { parent: input.trace }),
    });
    let gone!: () => void;
    const agentGone = new Promise<void>((resolve) => (gone = resolve));
    this.#agentGone.set(handle.run_id, gone);
    const done = this.#run(handle, request, cwd, trace === undefined ? launch : { ...launch, trace }).finally(() => {
      this.#agentGone.delete(handle.run_id);
      gone();
    });
    done.catch(() => undefined); // the caller may only want run_id; the rejection is theirs to read
    return { status: "started", run_id: handle.run_id, done, agentGone };
  }


  /** The launch of a run (a new one's before its claim, a resumed one's at its approval): nothing written. */
  #planLaunch(
    scope: string,
    request: InvokeRequest,
    workspace: { id: string; path: string },
    found: string,
    signers: readonly BundleSigner[],
    worktree: PlannedWorktree | undefined,
    cwd: string,
  ): { launch: Omit<RunLaunch, "spend">; policy: ToolPolicy | undefined; confinement: PlannedConfinement } {
    const profile = this.#profiles[request.provider];
    const permission = this.#workspacePermissions[workspace.id] ?? profile.permission;
    const policy = this.#policyOf(workspace.id, request.provider);
    const model = modelLaunch(request.provider, profile, this.#env);
    const treeWanted = request.bundle !== undefined || (this.#materializer !== undefined && needsTreeWithoutBundle(request.provider));
    // Before the claim: a node that cannot confine refuses the run with the id still free.
    const isolation = this.#workspaceIsolation[workspace.id] ?? this.#isolation;
    // Confined, warden's sandbox replaces the provider's own (bubblewrap does not nest).
    const confined = isolation === "sandbox";
    const confinement = this.#confinement.plan({
      isolation,
      workspaceId: workspace.id,
      workspace: worktree === undefined ? cwd : (this.#worktrees as RunWorktrees).profilePath,
      readOnly: permission === "read-only",
      command: found,
      ...(profile.model === undefined ? {} : { modelUrl: profile.model.baseUrl }),
      // Read-only for every provider: what the agent writes (Codex's sessions) goes to its run home.
      ...(treeWanted && this.#materializer !== undefined ? { bundle: { path: join(this.#materializer.root, "{run_id}"), writable: false } } : {}),
      envNames: agentEnvNames(this.#env, expandRunLaunch(profile, permission, confined).env, model, [
        ...Object.keys(this.#agentTagEnv),
        ...Object.keys(profile.bundleEnv ?? {}),
        ...runHomeEnvNames(request.provider),
        ...(this.#tracing === undefined ? [] : TRACE_ENV_NAMES),
      ]),
      ...(policy === undefined ? {} : { decisions: true }),
    });
    const launch: Omit<RunLaunch, "spend"> = {
      permission,
      model,
      command: found,
      confinement,
      trusted: this.#trustedWorkspaces.has(workspace.id),
      ...(policy === undefined
        ? {}
        : {
            governance: {
              policy,
              principal: principalOf(scope),
              context: {
                workspace: workspace.id,
                run: "",
                provider: request.provider,
                bundle_id: request.bundle?.bundle_id ?? "",
                revision: request.bundle?.revision ?? "",
                signers: [...new Set(signers.flatMap((s) => s.principals))].sort(),
              },
            },
          }),
      ...(worktree === undefined ? {} : { worktree }),
    };
    return { launch, policy, confinement };
  }


  /**
   * Answers a parked run's approval (DESIGN.md "Governed tool calls"): takes the run up (its claim
   * and journal, on this node), journals the answer, and then either resumes the CLI's session in
   * the same run (allow: `done` settles with its outcome) or ends the run with the call refused
   * (deny, or the deadline: recorded as a failure, `approval-denied`). Refused, with the run left
   * as it is, when it is not awaiting approval.
   */
  async answerApproval(scope: string, id: string, answer: ApprovalAnswer): Promise<{ readonly run_id: string; readonly done: Promise<ExistingOutcome> }> {
    const key = `${scope.length}:${scope}:${id}`;
    if (this.#answering.has(key)) throw new ConflictError("approval-in-progress", `an answer to ${scope}/${id} is being journaled; ask again`);
    this.#answering.add(key);
    try {
      const { handle, parked, events } = await this.#invocations.takeUp(scope, id, answer.decision === "allow" ? (runId, p, e) => this.#canResume(runId, p, e) : undefined);
      this.#unschedule(handle.run_id);
      const approval: PolicyApprovalEvent = {
        type: "policy.approval",
        call_id: parked.call_id,
        decision: answer.decision,
        by: { name: answer.by.name, role: answer.by.role },
        ...(answer.reason === undefined ? {} : { reason: answer.reason }),
      };
      try {
        await handle.journal.append(approval);
      } catch (error) {
        await handle.release({ reason: "crashed" }).catch(() => undefined);
        throw error;
      }
      const done = answer.decision === "allow" ? this.#resume(handle, parked, events) : this.#endDenied(handle, parked, approval);
      done.catch(() => undefined); // the caller may only want to know it was taken
      return { run_id: handle.run_id, done };
    } finally {
      this.#answering.delete(key);
    }
  }

  /** Parked runs found at start: their deadlines are kept again (one past already is answered at once). */
  keepDeadline(scope: string, id: string, runId: string, deadline: string): void {
    this.#schedule(scope, id, runId, deadline);
  }

  /** Stops the deadline timers (the node is closing; a restarted node keeps them again). */
  stopDeadlines(): void {
    for (const timer of this.#deadlines.values()) clearTimeout(timer);
    this.#deadlines.clear();
  }

  #schedule(scope: string, id: string, runId: string, deadline: string): void {
    this.#unschedule(runId);
    // setTimeout holds 2^31-1 ms at most: a longer wait is taken in steps.
    const wait = Math.min(Math.max(0, Date.parse(deadline) - Date.now()), 2 ** 31 - 1);
    const timer = setTimeout(() => {
      this.#deadlines.delete(runId);
      if (Date.parse(deadline) > Date.now()) return this.#schedule(scope, id, runId, deadline);
      void this.answerApproval(scope, id, { decision: "deny", by: { name: "deadline", role: "node" }, reason: `no operator answered before ${deadline}` }).catch(() => undefined);
    }, wait);
    timer.unref();
    this.#deadlines.set(runId, timer);
  }

  #unschedule(runId: string): void {
    const timer = this.#deadlines.get(runId);
    if (timer !== undefined) clearTimeout(timer);
    this.#deadlines.delete(runId);
  }

  /** Denied (or past its deadline): the run ends with the call refused, a recorded failure. */
  async #endDenied(handle: InvocationHandle, parked: RunParkedEvent, approval: PolicyApprovalEvent): Promise<ExistingOutcome> {
    try {
      await this.#runHomes.remove(handle.run_id).catch(() => undefined);
      await this.#parkedSessions?.remove(handle.run_id).catch(() => undefined);
      const workspace = this.#workspaces.get(parked.workspace);
      const worktree = workspace === undefined || this.#worktrees === undefined ? undefined : await this.#worktrees.find(handle.run_id, [workspace]);
      const why = `${approval.by.role === "node" ? "no answer before the deadline" : `denied by ${approval.by.name}`}${approval.reason === undefined ? "" : `: ${approval.reason}`}`;
      const result: RunResult = {
        exit_code: null,
        output_sha256: EMPTY_SHA256,
        output_tail: "",
        refused: [{ tool: parked.tool, effect_id: parked.call_id, reason: `policy ask: ${why}` }],
        error: { code: "approval-denied", message: `the ${parked.tool} call the run waited on was not approved (${why}), so the run ended without it` },
      };
      const outcome = await handle.finish(result, { failed: true });
      if (worktree !== undefined && outcome.status === "recorded") await this.#worktrees?.remove(worktree).catch(() => undefined);
      return outcome;
    } catch (error) {
      await handle.release({ reason: "crashed" }).catch(() => undefined);
      throw error;
    }
  }

  /**
   * An approved run of a git workspace goes on only in its own worktree, which holds what the
   * agent did before it parked and lives on the node that parked it: a node without it refuses
   * (a denial needs no worktree and is taken anywhere).
   */
  async #canResume(runId: string, parked: RunParkedEvent, events: readonly JournalEvent[]): Promise<void> {
    const started = events[0];
    if (started?.type !== "run.started" || typeof started.base !== "string") return;
    const workspace = this.#workspaceOf(parked);
    const here = this.#worktrees === undefined ? undefined : await this.#worktrees.find(runId, [workspace.path]);
    if (here === undefined) {
      throw new ConflictError("approval-worktree-elsewhere", `run ${runId} went on in a worktree of the node that parked it, which this node does not have; approve it there (a denial can be given on any node)`);
    }
  }

  /** Approved: the same run goes on, the CLI resuming its session, its hook answered allow for the call. */
  async #resume(handle: InvocationHandle, parked: RunParkedEvent, events: readonly JournalEvent[]): Promise<ExistingOutcome> {
    let launch: RunLaunch;
    let request: InvokeRequest;
    let workspacePath: string;
    let fingerprint: string;
    try {
      const started = events[0];
      const decision = events.find((e): e is PolicyDecisionEvent => e.type === "policy.decision" && e.call_id === parked.call_id);
      if (started?.type !== "run.started" || decision === undefined) throw new ConflictError("journal-not-parked", `run ${handle.run_id}'s journal does not hold the parked call's decision`);
      fingerprint = decision.fingerprint;
      const provider = handle.agent as ProviderName;
      const bundle = started.bundle as BundleRef | undefined;
      request = { provider, prompt: "", workspace: parked.workspace, ...(bundle === undefined ? {} : { bundle: { bundle_id: bundle.bundle_id, revision: bundle.revision } }) } as InvokeRequest;
      const workspace = this.#workspaceOf(request);
      workspacePath = workspace.path;
      const profile = this.#profiles[provider];
      const found = findCommand(profile.command, this.#env, workspace.path, this.#namedCommands.has(provider) ? null : undefined);
      if (found === undefined) throw new WardenError("provider-unavailable", `${provider}: ${JSON.stringify(profile.command)} is not an executable file on this node`, 503);
      const signers = bundle === undefined || this.#materializer === undefined ? [] : await this.#materializer.check(provider, bundle);
      // A git workspace's run goes on in its own worktree, from the base it started on: the sandbox
      // binds the worktrees and the change set is recorded against that base, as at the first launch.
      const parkedIn = this.#worktrees === undefined ? undefined : await this.#worktrees.find(handle.run_id, [workspace.path]);
      const base = typeof started.base === "string" ? started.base : undefined;
      const worktree = parkedIn === undefined || base === undefined ? undefined : { workspace: parkedIn.workspace, base };
      const planned = this.#planLaunch(handle.scope, request, workspace, found, signers, worktree, workspace.path);
      if (planned.policy === undefined || planned.policy.digest !== (started.policy as { digest?: string } | undefined)?.digest) {
        throw new ConflictError("tool-policy-changed", `the workspace's tool policy is not the one run ${handle.run_id} started under; it is not resumed`);
      }
      const budget = runBudget(this.#spend.run ?? {}, undefined);
      const prices = this.#spend.prices ?? {};
      launch = { ...planned.launch, spend: { budget, day: spendDay(Date.now()), subjects: { workspace: workspace.id, principal: handle.scope }, prices, prices_digest: pricesDigest(prices) } };
    } catch (error) {
      if (!isWardenError(error)) {
        await handle.release({ reason: "crashed" }).catch(() => undefined);
        throw error;
      }
      return handle.finish(notLaunched(error), { failed: true });
    }
    return this.#run(handle, request, workspacePath, launch, { parked, fingerprint, egressCounted: events.filter((e) => e.type === "effect.started" && e.kind === "network").length });
  }

  /**
   * The run's budget: the node's, lowered by the request, and by what is left of its workspace's
   * and its principal's day. Before the claim: a day already spent is refused with the id still
   * free (an id already used answers its own state, whatever the day).
   */
  async #planSpend(input: { readonly scope: string; readonly id: string }, request: InvokeRequest, workspace: string): Promise<RunSpend | { existing: ExistingOutcome }> {
    let budget = runBudget(this.#spend.run ?? {}, request.budget);
    const startedAt = Date.now();
    const day = spendDay(startedAt);
    const subjects = { workspace, principal: input.scope };
    const prices = this.#spend.prices ?? {};
    for (const [kind, limits] of [["workspace", this.#spend.workspaceDay], ["principal", this.#spend.principalDay]] as const) {
      if (limits === undefined || this.#counters === undefined) continue;
      const spent = await this.#counters.read(day, kind, subjects[kind]);
      const left = withinDay(budget, limits, spent);
      if ("budget" in left) {
        budget = left.budget;
        continue;
      }
      const existing = await this.#invocations.lookup(input.scope, input.id);
      if (existing !== undefined) return { existing };
      throw new WardenError("budget-day-spent", `${kind} ${JSON.stringify(subjects[kind])} has spent its ${left.spent} budget for ${day} (UTC); runs start again the next day`, 429, {
        details: { [kind]: subjects[kind], limit: left.spent, day },
      });
    }
    return { budget, day, subjects, prices, prices_digest: pricesDigest(prices) };
  }

  /** The run's tool policy; refused before the claim for a provider whose calls warden cannot decide. */
  #policyOf(workspace: string, provider: ProviderName): ToolPolicy | undefined {
    const policies = this.#policies.get(workspace);
    const policy = policies?.[provider] ?? policies?.default;
    if (policy !== undefined && !GOVERNABLE_PROVIDERS.has(provider)) {
      throw new WardenError(
        "tool-policy-provider-unsupported",
        `workspace ${JSON.stringify(workspace)} decides tool calls by a policy, and warden cannot ask it before a ${provider} tool call (only claude's and codex's pre-tool hooks are driven): the run is refused`,
        422,
        { details: { workspace, provider } },
      );
    }
    return policy;
  }

  #workspaceOf(request: { readonly workspace?: string | undefined }): { id: string; path: string } {
    const id = request.workspace ?? this.#defaultWorkspace;
    if (id === undefined) throw new ValidationError("workspace-required", "the request names no workspace and none is the default", { status: 422 });
    const path = this.#workspaces.get(id);
    if (path === undefined) {
      throw new NotFoundError("workspace-unknown", `workspace ${JSON.stringify(id)} is not configured on this node`, { details: { workspace: id } });
    }
    return { id, path };
  }

  async #run(handle: InvocationHandle, request: InvokeRequest, workspacePath: string, launch: RunLaunch, resume?: Resume): Promise<ExistingOutcome> {
    let materialization: Materialization | undefined;
    const ended: RunEnding = { parked: false, changeSetFailed: false };
    let home: RunHome | undefined;
    let gate: DecisionGate | undefined;
    let gateSocket: { path: string; remove(): void } | undefined;
    let worktree: Worktree | undefined;
    let outcome: ExistingOutcome | undefined;
    let cwd = workspacePath;
    try {
      try {
        if (request.bundle !== undefined || (this.#materializer !== undefined && needsTreeWithoutBundle(request.provider))) {
          materialization = await this.#materialize(handle, request.provider, request.bundle);
        }
        if (resume !== undefined && this.#worktrees !== undefined) {
          // The parked run's own worktree, with what the agent did before it parked.
          worktree = await this.#worktrees.find(handle.run_id, [workspacePath]);
          if (worktree !== undefined) cwd = worktree.path;
        } else if (launch.worktree !== undefined) {
          worktree = await (this.#worktrees as RunWorktrees).add(launch.worktree, handle.run_id);
          cwd = worktree.path;
        }
        let preToolHook: string | undefined;
        let preToolHttpHook: HttpHook | undefined;
        if (launch.governance !== undefined) {
          gateSocket = this.#confinement.decisionSocket(handle.run_id);
          const runId = handle.run_id;
          gate = await DecisionGate.listen(gateSocket.path, {
            provider: request.provider === "codex" ? "codex" : "claude",
            policy: launch.governance.policy,
            workspace: cwd,
            principal: launch.governance.principal,
            context: { ...launch.governance.context, run: runId },
            // The decisions go into the same ordered stream as the calls they decide.
            journal: { append: (event) => this.#tools.get(runId)?.append(event) ?? Promise.resolve(false) },
            ...(this.#parking === undefined || request.provider !== "claude" ? {} : { defers: true }),
            ...(resume === undefined ? {} : { approved: { callId: resume.parked.call_id } }),
          });
          const confined = launch.confinement.isolation === "sandbox";
          if (request.provider === "claude") {
            // No process per call: confined, the sandbox bridge's decision port carries the request
            // to the run's socket; unconfined, the gate's own loopback port, behind the run's token.
            if (confined) preToolHttpHook = { url: `http://${DECISION_HOST}:${DECISION_PORT}${DECIDE_PATH}` };
            else {
              const token = randomBytes(32).toString("base64url");
              preToolHttpHook = { url: `http://127.0.0.1:${await gate.listenLoopback(token)}${DECIDE_PATH}`, headers: { Authorization: `Bearer ${token}` } };
            }
          } else {
            // Codex has command hooks only. Confined, the socket is bound at a fixed place; unconfined, the hook reaches it where it is.
            preToolHook = hookCommand(fs.realpathSync(process.execPath), confined ? DECISION_SOCKET_INSIDE : gateSocket.path);
          }
        }
        const homeRequest = {
          run: handle.run_id,
          provider: request.provider,
          profile: this.#profiles[request.provider],
          workspace: cwd,
          trusted: launch.trusted,
          ...(materialization === undefined ? {} : { materialization }),
          ...(preToolHook === undefined ? {} : { preToolHook }),
          ...(preToolHttpHook === undefined ? {} : { preToolHttpHook }),
          ...(launch.trace === undefined ? {} : { trace: { env: traceEnv(launch.trace.carrier()), tracesEndpoint: launch.trace.agentExport.endpoint } }),
        };
        home =
          resume === undefined
            ? await this.#runHomes.create(homeRequest)
            : await this.#runHomes.renew(homeRequest, resume.parked.session, (await this.#parkedSessions?.get(handle.run_id)) ?? []);
      } catch (error) {
        if (!isWardenError(error)) throw error;
        // The agent was never launched: a clean, recorded failure that says why.
        return (outcome = await handle.finish(notLaunched(error), { failed: true }));
      }
      return (outcome = await this.#launch(handle, request, cwd, launch, home, materialization, gate, worktree, resume, ended));
    } catch (error) {
      await handle.release({ reason: "crashed" }).catch(() => undefined);
      throw error;
    } finally {
      this.#pendingCancels.delete(handle.run_id);
      if (launch.trace !== undefined) this.#endTrace(launch.trace, handle, outcome);
      await gate?.close().catch(() => undefined);
      gateSocket?.remove();
      // Removed whatever the outcome, an unresolved run's too: the agent wrote it, so it is no
      // evidence (the journal and the captured output are), and it may hold what the run read.
      // A parked run's stays: its CLI session goes on from it.
      if (home !== undefined && !ended.parked) await this.#runHomes.remove(handle.run_id).catch(() => undefined);
      if (resume !== undefined && !ended.parked) await this.#parkedSessions?.remove(handle.run_id).catch(() => undefined);
      if (materialization !== undefined) await this.#materializer?.cleanup(materialization.session).catch(() => undefined);
      // An unresolved run keeps its worktree: the operator's review looks at it (removed once reconciled).
      // So does a recorded run whose change set could not be made: the worktree is then the only
      // copy of the agent's work (removed by result retention).
      if (worktree !== undefined && outcome !== undefined && outcome.status === "recorded" && !ended.parked && !ended.changeSetFailed) await this.#worktrees?.remove(worktree).catch(() => undefined);
    }
  }

  /**
   * Ends a traced run's span; a recorded run's log leaf is read first, off the run's path: the
   * outcome is the caller's as soon as it is known, the span follows.
   */
  #endTrace(trace: RunTrace, handle: InvocationHandle, outcome: ExistingOutcome | undefined): void {
    const end = { ...traceEnd(handle, outcome), at: Date.now() };
    const leaf = outcome?.status === "recorded" && this.#logLeaf !== undefined ? this.#logLeaf(handle.run_id).catch(() => undefined) : Promise.resolve(undefined);
    void leaf.then((logLeaf) => trace.end(logLeaf === undefined ? end : { ...end, logLeaf }));
  }

  async #materialize(handle: InvocationHandle, provider: ProviderName, bundle: BundleRef | undefined): Promise<Materialization> {
    const materialization = await (this.#materializer as Materializer).materialize({ provider, ...(bundle === undefined ? {} : { bundle }), session: handle.run_id });
    await handle.journal.append({
      type: "note",
      materialization: {
        session: materialization.session,
        ...(materialization.bundle === undefined ? {} : { manifest_digest: materialization.bundle.manifest_digest }),
        files: materialization.files,
      },
    });
    await this.#hooks.afterMaterialize?.(materialization);
    return materialization;
  }

  async #launch(
    handle: InvocationHandle,
    request: InvokeRequest,
    cwd: string,
    launch: RunLaunch,
    home: RunHome,
    materialization: Materialization | undefined,
    gate: DecisionGate | undefined,
    worktree: Worktree | undefined,
    resume: Resume | undefined,
    ended: RunEnding,
  ): Promise<ExistingOutcome> {
    const profile = this.#profiles[request.provider];
    const run = expandRunLaunch(profile, launch.permission, launch.confinement.isolation === "sandbox");
    // The run home's arguments (where the CLI reads its settings) are options: before the prompt's `--`.
    const options = [...run.args, ...home.args, ...(materialization?.args ?? []), ...cliBudgetArgs(profile, launch.spend.budget)];
    // Resumed, the CLI goes on with its session (the session id was checked to be a UUID): no prompt.
    const args = resume === undefined ? expandLaunchArgs(profile, request.prompt, options) : [...profile.promptArgs.slice(0, -2), ...options, "--resume", resume.parked.session];
    // A resumed run's process is an effect of its own: the first one's id is taken.
    const processEffect = resume === undefined ? PROCESS_EFFECT : `${PROCESS_EFFECT}-${handle.journal.entries}`;
    // What the launch is made of, minus the model key (launch.model.secretEnv): recorded nowhere.
    // The run's home last: nothing configured points the agent back at the node user's own.
    const env = { ...run.env, ...launch.model.env, ...(materialization?.env ?? {}), ...home.env };
    await handle.journal.append({
      type: "effect.started",
      effect_id: processEffect,
      kind: "process",
      name: profile.command,
      fingerprint: canonicalDigest({ command: profile.command, args, cwd, env }),
    });
    if (materialization !== undefined) {
      try {
        // Right before the spawn: what the agent reads is exactly what was verified (G8).
        await (this.#materializer as Materializer).revalidate(materialization.session);
      } catch (error) {
        if (!isWardenError(error)) throw error;
        await handle.journal.append({ type: "effect.finished", effect_id: processEffect, outcome: "failed", detail: { not_launched: error.code } });
        return await handle.finish(notLaunched(error), { failed: true });
      }
    }
    const journal = { append: (event: Parameters<ToolEffects["append"]>[0]) => (this.#tools.get(handle.run_id)?.append(event) ?? Promise.resolve(false)) };
    let confined: RunConfinement;
    try {
      confined = await this.#confinement.launch(launch.confinement, handle.run_id, journal, launch.command, args, cwd, gate?.socketPath, resume?.egressCounted ?? 0);
    } catch (error) {
      // A sandbox the node refused to start (its control groups could not be made) ran nothing: the run failed.
      if (isWardenError(error)) {
        await handle.journal.append({ type: "effect.finished", effect_id: processEffect, outcome: "failed", detail: { not_launched: error.code } });
        return await handle.finish(notLaunched(error), { failed: true });
      }
      await handle.journal.append({ type: "effect.finished", effect_id: processEffect, outcome: "failed", detail: { not_launched: "sandbox-launch-failed" } });
      throw error;
    }
    try {
      const followed = await this.#follow(
        handle,
        profile,
        launch,
        {
          command: confined.command,
          args: confined.args,
          cwd,
          home: home.path,
          env: { ...this.#env, ...env, ...confined.env, ...launch.model.secretEnv, ...this.#agentTagEnv },
          timeoutMs: (request.timeout_s ?? this.#defaultTimeoutS) * 1000,
          killGraceMs: this.#killGraceMs,
          runTag: handle.run_id,
          ...(confined.seccomp === undefined ? {} : { fd3: confined.seccomp }),
        },
        confined,
        gate,
        processEffect,
        resume,
      );
      const deferred = followed.deferred;
      if (deferred !== undefined && gate !== undefined && this.#parking !== undefined && followed.journaled && followed.exit.exit_code === 0 && followed.answer.session !== undefined) {
        // Nothing is in flight (the agent is gone, every effect finished): the run waits for an operator.
        const event: RunParkedEvent = {
          type: "run.parked",
          call_id: deferred.callId,
          tool: deferred.tool,
          policies: [...(gate.decision(deferred.callId)?.policies ?? [])],
          deadline: new Date(Date.now() + this.#parking.deadlineMs).toISOString(),
          session: followed.answer.session,
          workspace: request.workspace ?? this.#defaultWorkspace ?? "",
        };
        // Kept for the fleet before the run reads parked: whichever node answers resumes it from there.
        if (this.#parkedSessions !== undefined) await this.#parkedSessions.put(handle.run_id, await this.#runHomes.transcript(handle.run_id, event.session));
        await handle.journal.append(event);
        await handle.park();
        ended.parked = true;
        this.#schedule(handle.scope, handle.id, handle.run_id, event.deadline);
        return (await this.#invocations.lookup(handle.scope, handle.id)) as ExistingOutcome;
      }
      let changed = followed;
      if (worktree !== undefined) {
        const recorded = await this.#recordChanges(handle, worktree, launch);
        ended.changeSetFailed = recorded.failed;
        changed = { ...followed, journaled: recorded.journaled && followed.journaled };
      }
      return await this.#conclude(handle, profile, launch.spend, changed, launch.trace);
    } finally {
      confined.remove();
    }
  }

  /**
   * What the agent changed in its worktree, stored and journaled before the run's seal (its
   * process tree is gone: nothing writes there any more). `journaled` false when the journal could
   * not take it; `failed` when the change set could not be made (the event says why).
   */
  async #recordChanges(handle: InvocationHandle, worktree: Worktree, launch: RunLaunch): Promise<{ journaled: boolean; failed: boolean }> {
    const base = (launch.worktree as PlannedWorktree).base;
    const { event } = await (this.#worktrees as RunWorktrees).record(worktree, base);
    const journaled = await handle.journal.append(event).then(
      () => true,
      () => false,
    );
    return { journaled, failed: "error" in event };
  }

  /** Spawns the agent and journals what it does until it is gone. */
  async #follow(
    handle: InvocationHandle,
    profile: ProviderProfile,
    launch: RunLaunch,
    spawn: AgentSpawn,
    confined: RunConfinement,
    gate: DecisionGate | undefined,
    processEffect: string,
    resume: Resume | undefined,
  ): Promise<Followed> {
    let agent: AgentProcess | undefined;
    // An effect the journal cannot record must not happen unrecorded: stop the agent.
    const trace = launch.trace;
    // A traced run's tool spans are made of its effect entries as they become durable.
    const tools = new ToolEffects(trace === undefined ? handle.journal : observedJournal(handle.journal, (entry) => trace.take(entry)), () => agent?.kill());
    if (gate !== undefined) {
      tools.govern();
      if (resume !== undefined) tools.resumed(resume.parked.call_id, resume.parked.tool, resume.fingerprint);
      const defers = this.#parking !== undefined && profile.events === "claude-stream-json";
      gate.onDecision((callId, verdict, call) => (verdict.decision === "ask" && defers ? tools.deferred(callId, call.resource.tool) : tools.decided(callId, verdict.decision, verdict.reason)));
    }
    // The egress proxy journals into the same ordered stream as the agent's tool calls.
    this.#tools.set(handle.run_id, tools);
    try {
      const followed = await this.#followWith(handle, profile, launch, spawn, confined, tools, gate, processEffect, (a) => {
        agent = a;
      });
      const deferred = followed.answer.deferred ? tools.deferredCall : undefined;
      return deferred === undefined ? followed : { ...followed, deferred };
    } finally {
      this.#tools.delete(handle.run_id);
    }
  }

  async #followWith(
    handle: InvocationHandle,
    profile: ProviderProfile,
    launch: RunLaunch,
    spawn: AgentSpawn,
    confined: RunConfinement,
    tools: ToolEffects,
    gate: DecisionGate | undefined,
    processEffect: string,
    started: (agent: AgentProcess) => void,
  ): Promise<Followed> {
    let agent: AgentProcess;
    const answer = new RunAnswer();
    const read = eventReader(profile.events);
    let streamIncomplete = false;
    const budget = launch.spend.budget;
    const meter = new SpendMeter(launch.spend.prices, profile.model?.name, Date.now());
    let breached: BudgetLimit | undefined;
    let stoppedFor: StopCause | undefined;
    let stopAgent: (() => void) | undefined;
    // A breach stops the agent only between tool calls: a call in flight is let finish (or the
    // usual rule judges it), so what the journal records of it is whole.
    const checkBudget = (): void => {
      if (stoppedFor !== undefined) return;
      breached ??= breachOf(budget, meter.totals(Date.now()));
      if (breached === undefined || tools.openCount > 0 || stopAgent === undefined) return;
      stoppedFor = { reason: "budget", limit: breached };
      stopAgent();
    };
    const take = (parsed: ParsedEvent): void => {
      const e = tools.governed(parsed);
      if (e.type === "turn") meter.take(e);
      else if (e.type === "session") launch.trace?.conversation(e.id);
      tools.apply(e);
      answer.take(e);
    };
    // A governed Codex run: its items take their hook calls' ids, and a call not allowed, of
    // which Codex prints nothing, is journaled refused from its decision (codex-calls.ts).
    const codexCalls = gate !== undefined && profile.events === "codex-jsonl" ? new CodexCalls() : undefined;
    if (codexCalls !== undefined) gate?.onDecision((_, verdict, call) => codexCalls.decided(call, verdict.decision === "allow").forEach(take));
    // A resumed run's agent writes after what its first leg wrote.
    const append = processEffect !== PROCESS_EFFECT;
    const stdout = await OutputCapture.create({
      append,
      path: outputPath(this.#outputDir, handle.run_id, "stdout"),
      tailBytes: this.#tailBytes,
      maxLineBytes: this.#maxLineBytes,
      maxFileBytes: this.#maxOutputBytes,
      ...(read === undefined
        ? {}
        : {
            onLine: (line: string) => {
              for (const parsed of read(line)) take(codexCalls?.paired(parsed) ?? parsed);
              checkBudget();
            },
            onOversizedLine: () => {
              streamIncomplete = true;
            },
          }),
    });
    const readErr = stderrReader(profile.events);
    const stderr = await OutputCapture.create({
      append,
      path: outputPath(this.#outputDir, handle.run_id, "stderr"),
      tailBytes: 0,
      maxLineBytes: readErr === undefined ? 0 : STDERR_LINE_BYTES,
      maxFileBytes: this.#maxOutputBytes,
      ...(readErr === undefined ? {} : { onLine: (line: string) => readErr(line).forEach((e) => answer.take(e)) }),
    });
    let record: string | undefined;
    let unrecorded: unknown;
    agent = await AgentProcess.start({
      ...spawn,
      onSpawn: (pid) => {
        try {
          record = this.#launchRecords?.add(pid);
        } catch (error) {
          unrecorded = error;
        }
      },
    });
    started(agent);
    stopAgent = () => agent.kill();
    // An operator's cancel (Runner.cancel): journaled first, then SIGTERM to the agent's group and
    // SIGKILL after the grace. It does not wait for a tool call in flight: that one is left
    // unknown, and the run unresolved (the usual rule).
    let cancelKiller: NodeJS.Timeout | undefined;
    this.#cancels.set(handle.run_id, (by) => {
      if (stoppedFor?.reason === "cancelled") return;
      stoppedFor = { reason: "cancelled", by };
      tools.append({ type: "note", cancelled: { by, at: new Date().toISOString() } });
      agent.signalGroup("SIGTERM");
      cancelKiller = setTimeout(() => agent.signalGroup("SIGKILL"), this.#killGraceMs);
    });
    const pendingCancel = this.#pendingCancels.get(handle.run_id);
    if (pendingCancel !== undefined) this.#cancels.get(handle.run_id)?.(pendingCancel);
    const wallClock = budget.wall_s === undefined ? undefined : setTimeout(checkBudget, budget.wall_s * 1000);
    checkBudget();
    if (unrecorded !== undefined) {
      // Were this node to die, the next could not find what the agent leaves behind: it must not run.
      agent.kill();
      tools.append({ type: "note", launch_record: { failed: isWardenError(unrecorded) ? unrecorded.code : (errnoCode(unrecorded) ?? "launch-record-failed") } });
    }
    const { stdout: outStream, stderr: errStream } = agent.child;
    const streams = outStream !== null && errStream !== null ? Promise.all([stdout.attach(outStream), stderr.attach(errStream)]) : Promise.resolve();
    if (agent.pid !== undefined) {
      // Where to look for the agent: a run whose node died or lost its database reads unresolved
      // while the agent may still be at work, and a pid alone does not say on which machine.
      // A trusted workspace's own configuration (hooks, MCP servers) ran too: the journal says so.
      const processNote: { [key: string]: JsonValue } = { pid: agent.pid, host: hostname(), permission: launch.permission };
      if (launch.trusted) processNote.workspace_trusted = true;
      tools.append({ type: "note", process: processNote });
      await this.#hooks.afterLaunch?.(agent.pid, handle.run_id);
    }
    const exited = await agent.exited().finally(() => {
      this.#agentGone.get(handle.run_id)?.();
      clearTimeout(wallClock);
      clearTimeout(cancelKiller);
      this.#cancels.delete(handle.run_id);
    });
    meter.end(Date.now());
    // Confined, a killed agent reaches us as bubblewrap's exit code 128 + signal.
    const signal = confined.signalOf(exited.exit_code);
    const exit: AgentExit = signal === undefined ? exited : { ...exited, exit_code: null, signal };
    // Connections still open end now, and each is journaled before the process effect finishes (G6).
    await confined.drain();
    // The agent's process group was killed when it exited: there is nothing left to find.
    if (record !== undefined) this.#launchRecords?.remove(record);
    await streams.catch(() => undefined);
    const out = await stdout.finish();
    const err = await stderr.finish();
    tools.closeOpen({ reason: exit.timed_out ? "timeout" : exit.signal !== null ? `signal ${exit.signal}` : "the agent exited without reporting it" });
    const memoryKills = confined.memoryKills();
    if (memoryKills > 0) {
      // The kernel killed processes of the run at its memory bound: what the run did next is why.
      tools.append({ type: "note", memory_bound: { bytes: launch.confinement.plan?.cgroup?.memoryBytes ?? null, processes_killed: memoryKills } });
    }
    if (exit.output_held_open) {
      // A process of the agent outside its group, not found to be killed, held its output past
      // its exit: it may still be acting, and the rest of the event stream was not read.
      tools.append({ type: "note", output_held_open: { after_ms: this.#killGraceMs } });
    }
    if (streamIncomplete) {
      // Part of the event stream could not be read: tool calls may have gone unjournaled.
      tools.append({ type: "effect.started", effect_id: "event-stream", kind: "tool", name: "unread events", fingerprint: out.sha256 });
      tools.append({ type: "effect.finished", effect_id: "event-stream", outcome: "unknown", detail: { reason: "an event line exceeded the bound" } });
    }
    await tools.settled();
    // Stopped by the node between tool calls, the process's end is known: it did not end by itself.
    const stopped = stoppedFor !== undefined && exit.signal !== null && !exit.timed_out && !exit.output_held_open ? stoppedFor : undefined;
    const outcome = stopped !== undefined && !tools.lost ? "failed" : processOutcome(exit, tools.lost);
    const detail = processDetail(exit, out, err);
    const journaled = await handle.journal
      .append({ type: "effect.finished", effect_id: processEffect, outcome, detail: stopped === undefined ? detail : { ...(detail as { [key: string]: JsonValue }), stopped: { ...stopped } } })
      .then(
        () => !tools.lost,
        () => false,
      );
    return { exit, out, tail: stdout.tail(), journaled, answer, spend: meter.totals(Date.now()), ...(stopped === undefined ? {} : { stopped }), ...(breached === undefined ? {} : { breached }) };
  }

  /**
   * The signed account of what the run spent, before its end is journaled, and the day's counters
   * of its workspace and principal. A journal that can no longer be written leaves the run
   * unresolved anyway; the counters count what was spent whatever the outcome.
   */
  async #recordSpend(handle: InvocationHandle, spend: RunSpend, run: Followed, trace: RunTrace | undefined): Promise<void> {
    const totals = run.spend;
    trace?.spent(totals.input_tokens, totals.output_tokens);
    const uncounted = await this.#counters?.add(spend.day, spend.subjects, totals).then(
      () => undefined,
      (error: unknown) => (isWardenError(error) ? error.code : (errnoCode(error) ?? "spend-count-failed")),
    );
    if (run.journaled) {
      // The day's budget may now let through more than it should: the journal says why.
      if (uncounted !== undefined) await handle.journal.append({ type: "note", spend_uncounted: { error: uncounted, day: spend.day } }).catch(() => undefined);
      await handle.journal
        .append({
          type: "run.spend",
          tokens: { input: totals.input_tokens, output: totals.output_tokens },
          cost_usd_micros: totals.cost_usd_micros,
          turns: totals.turns,
          wall_ms: totals.wall_ms,
          prices: spend.prices_digest as `sha256:${string}`,
          ...(run.breached === undefined ? {} : { breached: run.breached }),
        })
        .catch(() => undefined);
    }
  }

  /** Records the run when it ended knowably; anything uncertain leaves the claim unresolved. */
  async #conclude(handle: InvocationHandle, profile: ProviderProfile, spend: RunSpend, run: Followed, trace: RunTrace | undefined): Promise<ExistingOutcome> {
    const { exit, out } = run;
    await this.#recordSpend(handle, spend, run, trace);
    if (run.journaled && run.stopped !== undefined) {
      const result: RunResult = {
        exit_code: null,
        output_sha256: out.sha256,
        output_tail: run.tail,
        ...run.answer.fields(),
        stopped: { ...run.stopped },
      };
      return handle.finish(result, { stopped: true });
    }
    if (!run.journaled || exit.timed_out || exit.output_held_open || (exit.spawned && exit.exit_code === null)) {
      await handle.release({ reason: exit.timed_out ? "timeout" : "crashed" });
      return (await this.#invocations.lookup(handle.scope, handle.id)) as ExistingOutcome;
    }
    if (!exit.spawned) {
      const error = { code: "agent-spawn-failed", message: `${profile.command}: ${exit.spawn_error ?? "not started"}` };
      return handle.finish({ exit_code: null, output_sha256: out.sha256, output_tail: "", error }, { failed: true });
    }
    const reported = run.answer.errorDetail();
    const result: RunResult = {
      exit_code: exit.exit_code,
      output_sha256: out.sha256,
      output_tail: run.tail,
      ...run.answer.fields(),
      ...(reported === undefined ? {} : { error: reported }),
    };
    return handle.finish(result, { failed: exit.exit_code !== 0 || reported !== undefined });
  }
}

/** Why the node stopped a run's agent ("Spend", "Queued invocations"): what its result's `stopped` says. */
export type StopCause = { readonly reason: "budget"; readonly limit: BudgetLimit } | { readonly reason: "cancelled"; readonly by: string };

interface Followed {
  /** the call the CLI stopped on, deferred for an operator */
  readonly deferred?: { readonly callId: string; readonly tool: string };
  /** why the node stopped the agent: a budget's limit (between tool calls), or an operator's cancel */
  readonly stopped?: StopCause;
  /** the first limit the run crossed (it may have ended by itself before it could be stopped) */
  readonly breached?: BudgetLimit;
  readonly spend: SpendTotals;
  readonly exit: AgentExit;
  readonly out: CaptureSummary;
  readonly tail: string;
  /** every entry of the run reached the journal */
  readonly journaled: boolean;
  readonly answer: RunAnswer;
}

/** What start() decided about the launch before the claim (a refusal there claims nothing). */
interface RunLaunch {
  readonly permission: PermissionMode;
  readonly model: ModelLaunch;
  /** the file findCommand found for the profile's command: what was checked is what is launched */
  readonly command: string;
  readonly confinement: PlannedConfinement;
  /** the workspace's own provider configuration may run */
  readonly trusted: boolean;
  readonly spend: RunSpend;
  /** the policy deciding the run's tool calls, and who and what it decides about */
  readonly governance?: {
    readonly policy: ToolPolicy;
    readonly principal: ToolRequest["principal"];
    readonly context: ToolRequest["context"];
  };
  /** a git workspace: the run gets its own worktree at this base */
  readonly worktree?: PlannedWorktree;
  /** the run's span, once it is claimed and traced */
  readonly trace?: RunTrace;
}

/** What a run may spend and where its spend is counted, decided before the claim. */
interface RunSpend {
  readonly budget: Budget;
  /** the UTC day the run counts towards */
  readonly day: string;
  readonly subjects: { readonly workspace: string; readonly principal: string };
  readonly prices: NonNullable<SpendConfig["prices"]>;
  readonly prices_digest: string;
}

/**
 * Claude Code's own limits, a second line of defence behind the node's meter (which stops the
 * run first: Claude's cost is a list-price estimate of its own). Codex's exec has none.
 */
function cliBudgetArgs(profile: ProviderProfile, budget: Budget): string[] {
  if (profile.events !== "claude-stream-json") return [];
  return [
    ...(budget.turns === undefined ? [] : ["--max-turns", String(budget.turns)]),
    ...(budget.cost_usd === undefined ? [] : ["--max-budget-usd", String(budget.cost_usd)]),
  ];
}

/**
 * Who asked for the run, as a policy sees it. An API scope is `api:<token name>`, and only an
 * operator token may start a run (G12), so its role is `operator`; a library caller's scope is
 * its own, with the role `library`.
 */
function principalOf(scope: string): ToolRequest["principal"] {
  return scope.startsWith("api:") ? { scope, name: scope.slice(4), role: "operator" } : { scope, name: scope, role: "library" };
}

function compilePolicies(
  policies: Readonly<Record<string, WorkspacePolicies>>,
  workspaces: ReadonlyMap<string, string>,
): ReadonlyMap<string, Partial<Record<ProviderName | "default", ToolPolicy>>> {
  const out = new Map<string, Partial<Record<ProviderName | "default", ToolPolicy>>>();
  for (const [id, sources] of Object.entries(policies)) {
    if (!workspaces.has(id)) throw new ValidationError("workspace-unknown", `policies names workspace ${JSON.stringify(id)}, which is not configured`);
    const compiled: Partial<Record<ProviderName | "default", ToolPolicy>> = {};
    for (const [key, source] of Object.entries(sources) as [ProviderName | "default", PolicySource | undefined][]) {
      if (source !== undefined) compiled[key] = ToolPolicy.compile(source.text, source.source);
    }
    out.set(id, compiled);
  }
  return out;
}

/**
 * What an agent inherits of the node's environment: the allowlisted names only (sandbox/
 * environment.ts), plus the variables the providers' model keys are read from (`keyNames`). Never
 * the node's environment minus a denylist: its bearer tokens, a fleet's database URL and whatever
 * the operator's shell exported would reach every agent under any name a denylist forgets.
 */
export function agentEnvironment(env: Readonly<Record<string, string | undefined>>, keyNames: readonly string[] = []): Record<string, string> {
  return inheritedEnvironment(env, keyNames);
}

/** The names of the environment a run's agent gets, as its isolation profile records them. */
function agentEnvNames(base: Readonly<Record<string, string | undefined>>, run: Readonly<Record<string, string>>, model: ModelLaunch, extra: readonly string[]): string[] {
  const names = [...Object.entries(base).filter(([, v]) => v !== undefined).map(([k]) => k), ...Object.keys(run), ...Object.keys(model.env), ...Object.keys(model.secretEnv), RUN_TAG_VAR, ...extra];
  return [...new Set(names)].sort();
}

function checkWorkspaces(workspaces: Readonly<Record<string, string>>): ReadonlyMap<string, string> {
  const out = new Map<string, string>();
  for (const [id, path] of Object.entries(workspaces)) {
    if (!isAbsolute(path)) throw new ValidationError("workspace-invalid", `workspace ${JSON.stringify(id)}: ${path} is not an absolute path`);
    let st: fs.Stats;
    try {
      st = fs.statSync(path);
    } catch {
      throw new ValidationError("workspace-invalid", `workspace ${JSON.stringify(id)}: ${path} does not exist`);
    }
    if (!st.isDirectory()) throw new ValidationError("workspace-invalid", `workspace ${JSON.stringify(id)}: ${path} is not a directory`);
    out.set(id, path);
  }
  return out;
}


/** The run span's context as the agent's environment: `TRACEPARENT`, `TRACESTATE`. */
function traceEnv(carrier: TraceCarrier): Record<string, string> {
  return {
    ...(carrier.traceparent === undefined ? {} : { TRACEPARENT: carrier.traceparent }),
    ...(carrier.tracestate === undefined ? {} : { TRACESTATE: carrier.tracestate }),
  };
}

/** What the run's span says of its end: the invocation's state, a recorded failure, the journal's head. */
function traceEnd(handle: InvocationHandle, outcome: ExistingOutcome | undefined): Parameters<RunTrace["end"]>[0] {
  const result = outcome?.status === "recorded" && typeof outcome.result === "object" && outcome.result !== null && !Array.isArray(outcome.result) ? outcome.result : undefined;
  const stopped = result?.stopped;
  return {
    status: outcome?.status ?? "crashed",
    journalHead: handle.journal.tailHash,
    ...(result === undefined ? {} : { failed: result.error !== undefined || result.exit_code !== 0 }),
    ...(typeof stopped === "object" && stopped !== null && !Array.isArray(stopped) && typeof stopped.reason === "string" ? { stopped: stopped.reason } : {}),
  };
}

/** The run's journal, telling `take` of every entry once it is durable. */
function observedJournal(journal: RunJournal, take: (entry: JournalEntry) => void): RunJournal {
  return {
    get runId() {
      return journal.runId;
    },
    get entries() {
      return journal.entries;
    },
    get tailHash() {
      return journal.tailHash;
    },
    append: async (event) => {
      const appended = await journal.append(event);
      take(appended.entry);
      return appended;
    },
  };
}

function notLaunched(error: WardenError): RunResult {
  return { exit_code: null, output_sha256: EMPTY_SHA256, output_tail: "", error: { code: error.code, message: error.message } };
}

/**
 * The process's own outcome: exiting by itself is known (0 succeeded, else failed); a timeout or
 * a signal leaves what it was doing unknown, and so does a run the journal stopped following.
 */
function processOutcome(exit: AgentExit, journalLost: boolean): "succeeded" | "failed" | "unknown" {
  if (!exit.spawned) return "failed";
  if (journalLost || exit.timed_out || exit.output_held_open || exit.exit_code === null) return "unknown";
  return exit.exit_code === 0 ? "succeeded" : "failed";
}

/**
 * A stream cut short on disk says how much of it the file holds (its digest is of all of it), and
 * why, when the disk refused more.
 */
function streamDetail(capture: CaptureSummary): JsonValue {
  return {
    sha256: capture.sha256,
    bytes: capture.bytes,
    ...(capture.stored_bytes === capture.bytes ? {} : { stored_bytes: capture.stored_bytes }),
    ...(capture.store_error === undefined ? {} : { store_error: capture.store_error }),
  };
}

function processDetail(exit: AgentExit, out: CaptureSummary, err: CaptureSummary): JsonValue {
  return {
    exit_code: exit.exit_code,
    signal: exit.signal,
    timed_out: exit.timed_out,
    ...(exit.spawn_error === undefined ? {} : { spawn_error: exit.spawn_error }),
    ...(exit.stragglers_killed === 0 ? {} : { stragglers_killed: exit.stragglers_killed }),
    ...(exit.output_held_open ? { output_held_open: true } : {}),
    stdout: streamDetail(out),
    stderr: streamDetail(err),
  };
}
