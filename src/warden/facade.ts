/**
 * The library facade (`import { openWarden } from "warden"`): one node on the embedded backend —
 * delivery, invocations with their journals and keys, the provider materializer and the runner —
 * opened together and closed together. The HTTP server and the CLI are thin adapters over it.
 */
import { randomUUID } from "node:crypto";
import * as fs from "node:fs";
import { join, sep } from "node:path";
import type { JsonValue } from "../core/canonical.js";
import { ConflictError, LimitError, NotFoundError, ValidationError, WardenError, isWardenError } from "../core/errors.js";
import type { Limits } from "../core/limits.js";
import { checkAncestorsSync, ensurePrivateDirSync } from "../storage/secure-fs.js";
import { roomOf, type Room } from "../storage/room.js";
import { openEmbeddedBackend, type EmbeddedBackend } from "../backends/embedded/index.js";
import { openEmbeddedDelivery } from "../backends/embedded/delivery/delivery-backend.js";
import type { PostgresNodeBackend, PostgresNodeOptions } from "../backends/postgres/node.js";
import type { BeginResult, ChunkAccepted, Delivery, PackAccepted, PackOptions, StageStatus, UploadProgress } from "../delivery/service.js";
import type { ByteSource } from "../delivery/blob-store.js";
import type { BundleView, RevisionView } from "../delivery/catalog.js";
import type { CommitReceipt, Manifest } from "../delivery/manifest-types.js";
import { Invocations, type ExistingOutcome } from "../invocations/index.js";
import type { InvocationCounts } from "../invocations/service.js";
import type { ListPage, ListQuery } from "../invocations/types.js";
import { checkInvocationId } from "../invocations/identity.js";
import type { RunInspection } from "../journal/inspect.js";
import type { Inspection, ReconcileResult } from "../invocations/types.js";
import type { PublicKeyRecord } from "../journal/types.js";
import { isRunId } from "../journal/schema.js";
import type { VerifyReport } from "../journal/verify.js";
import type { RunCheck } from "../invocations/run-check.js";
import { sharedRunChecker } from "../invocations/run-checker.js";
import { Materializer, type PlannedTreeFile } from "../providers/materializer.js";
import { TrustPolicy, type SigningConfig } from "../signing/policy.js";
import { resolveProfiles, type PermissionMode, type ProviderProfile } from "../providers/profiles.js";
import { PROVIDER_NAMES, isProviderName, type Materialization, type ProviderName } from "../providers/types.js";
import { parseInvocation, parseInvokeRequest, requestJson, splitQueueOptions, type InvokeRequest } from "../runner/request.js";
import { canonicalJson } from "../core/canonical.js";
import { requestHashOf } from "../invocations/identity.js";
import type { QueuedRow, QueueState, QueueStore, QueueView } from "../invocations/queue-store.js";
import { DEFAULT_DEADLINE_S, nodeLabels, QueueRunner, type QueueConfig } from "./queue-runner.js";
import { Runner, type ApprovalAnswer, type RunnerHooks, type RunnerOptions } from "../runner/runner.js";
import type { PolicyApprovalEvent } from "../journal/types.js";
import type { ClaimStore } from "../invocations/claim-store.js";
import { spendDay, type SpendConfig, type SpendCounter, type SpendCounters } from "../runner/spend.js";
import { RunWorktrees } from "../changes/run-worktrees.js";
import { RunChanges } from "./run-changes.js";
import type { OutputStream, OutputTail } from "../runner/output-files.js";
import { RunHomes } from "../providers/run-home.js";
import type { Isolation } from "../sandbox/profile.js";
import { AgentGroups, type KilledGroup } from "./agent-groups.js";
import { claimHome } from "./home-backend.js";
import { agentTagOf, reapOrphanedAgents, type Reaped } from "../runner/orphans.js";
import { PROC, procStat } from "../runner/proc-stat.js";
import { agentStopsOf, recordAgentStops } from "./stopped-agents.js";
import { LaunchRecords } from "../runner/launch-records.js";
import { JournalTap } from "./journal-tap.js";
import { Retention } from "./retention.js";
import { Scrub } from "./scrub.js";
import { Fleet, type SharedNodes } from "./fleet.js";
import { deliveryAttest, openEmbeddedLog, openLog, type LogOptions, type OpenedLog } from "./transparency.js";
import { catchUpLog } from "./log-catchup.js";
import { Tracing, type TraceCarrier, type TracingOptions } from "../tracing/tracing.js";
import { attestRun, type RunAttestation } from "./attestation.js";
import type { TransparencyLog } from "../tlog/log.js";

export interface WardenOptions {
  /** the private state directory (created 0700 when missing) */
  readonly home: string;
  readonly limits?: Partial<Limits>;
  /** workspace id → absolute directory agents run in; default: `<home>/workspaces/default` as "default" */
  readonly workspaces?: Readonly<Record<string, string>>;
  /** the workspace of requests that name none (default: the only configured one) */
  readonly defaultWorkspace?: string;
  /** workspace id → permission mode of its runs, over the provider's (profiles.ts PermissionMode) */
  readonly workspacePermissions?: Readonly<Record<string, PermissionMode>>;
  /** workspaces whose own provider configuration (`.claude/`, `.mcp.json`, `.codex/`) may run; none by default */
  readonly trustedWorkspaces?: readonly string[];
  /** provider profile overrides, e.g. `{ claude: { command: "/path/to/claude" } }` */
  readonly providers?: Partial<Record<ProviderName, Partial<ProviderProfile>>>;
  /** base environment of agents (default: the allowlisted part of this process's: runner.ts agentEnvironment) */
  readonly agentEnv?: Readonly<Record<string, string | undefined>>;
  /** names of the node's environment passed to agents besides the allowlist (configuration `agentEnv`) */
  readonly passEnv?: readonly string[];
  /** how runs are confined (default "sandbox"; "none" only by explicit configuration, recorded in every run's journal) */
  readonly isolation?: Isolation;
  /** workspace id → its runs' isolation (over `isolation`) */
  readonly workspaceIsolation?: Readonly<Record<string, Isolation>>;
  /** workspace id → the Cedar tool policy of its runs (DESIGN.md "Governed tool calls"; RunnerOptions["policies"]) */
  readonly policies?: RunnerOptions["policies"];
  /** the sandbox's settings: bubblewrap's path, the egress allowlist, resource limits (DESIGN.md "Confinement") */
  readonly sandbox?: RunnerOptions["sandbox"];
  readonly defaultTimeoutS?: number;
  readonly maxTimeoutS?: number;
  readonly killGraceMs?: number;
  readonly maxPromptBytes?: number;
  readonly runnerHooks?: RunnerHooks;
  /** keep claims, journals, keys, bundles and blobs on this PostgreSQL database (a fleet) instead of under `home` */
  readonly postgres?: PostgresNodeOptions;
  /** how often result retention runs (default: hourly, and at open) */
  readonly retentionIntervalMs?: number;
  /**
   * The transparency log (DESIGN.md "Transparency"): on by default, the node's own on the
   * embedded backend, the fleet's on PostgreSQL; `false` turns it off.
   */
  readonly log?: LogOptions | false;
  /** trust policy for bundle signatures (DESIGN.md "Bundle signatures"); none: nothing required */
  readonly signing?: SigningConfig;
  /** budgets per run and per workspace and principal per day, and the price table (DESIGN.md "Spend") */
  readonly spend?: SpendConfig;
  /** the queue of submitted invocations: this node's slots, labels, the fleet's limits (DESIGN.md "Queued invocations") */
  readonly queue?: QueueConfig;
  /**
   * How long a run parked on a call its policy decided `ask` waits for an operator, in seconds
   * (default 86400); past it the call is denied (DESIGN.md "Governed tool calls").
   */
  readonly approvalDeadlineS?: number;
  /**
   * OpenTelemetry traces of runs (DESIGN.md "Traces"): on or off by the standard `OTEL_*`
   * environment (off when it sets nothing); `false` turns them off whatever it says.
   */
  readonly traces?: TracingOptions | false;
}

/**
 * What the facade keeps of its backend: where the node lives, its limits, how to close it, and —
 * on a shared database — the owner session whose health says whether this node can claim now.
 */
type NodeBackend = Pick<EmbeddedBackend, "home" | "limits" | "close"> & {
  readonly spend: SpendCounters;
  readonly owner?: { readonly healthy: boolean; readonly id: string };
  readonly nodes?: SharedNodes["registry"];
};

/**
 * A submitted invocation not started (DESIGN.md "Queued invocations"): `queued` (also while a
 * node is starting it), or a known outcome that never ran (`cancelled`, `expired`, `refused`).
 */
export interface QueuedInvocation {
  readonly scope: string;
  readonly id: string;
  readonly status: "queued" | "cancelled" | "expired" | "refused";
  /** RFC 3339 */
  readonly queued_at: string;
  readonly priority: number;
  /** RFC 3339: still queued then, it expires */
  readonly deadline_at: string;
  readonly principal: string;
  readonly workspace: string;
  readonly provider: string;
  readonly cancelled_by?: string;
  /** a refused one's error code */
  readonly error?: string;
}

/** What `submit` answers: the queued invocation (`created`: by this call), or the state of an id already claimed. */
export type Submission = (QueuedInvocation & { readonly created: boolean }) | KnownOutcome;

/** The queue as operators watch it (`Warden.queueView`): the store's counts and this node's slots. */
export interface NodeQueueView extends QueueView {
  /** this node's owner id (the `owners` entry that is this node) */
  readonly self: string;
  /** runs this node starts from the queue at once */
  readonly slots: number;
  /** runs this node executes now (queued or not) */
  readonly active: number;
}

/** How a caller starts a run besides its request (nothing of it is part of the request's identity). */
export interface StartOptions {
  /** the caller's W3C trace context (an HTTP request's `traceparent`/`tracestate`): the run's span is its child */
  readonly trace?: TraceCarrier;
}

/** What `start` answers: this caller started the run, or the invocation's existing state. */
export type StartedRun = { readonly status: "started"; readonly run_id: string; readonly done: Promise<ExistingOutcome> };
export type InvocationStart = StartedRun | KnownOutcome;
/** An existing outcome; `run_id` is set for an in-progress run this process owns. */
export type KnownOutcome = ExistingOutcome & { readonly run_id?: string };

export interface RunVerification {
  readonly ok: boolean;
  readonly entries: number;
  readonly first_error?: VerifyReport["first_error"];
  readonly requires_reconciliation: boolean;
  readonly tail_hash: string;
  readonly incomplete_tail: boolean;
  readonly findings: RunInspection["reasons"];
}

export interface CloseOptions {
  /** how long running agents may take to finish before their process groups are killed */
  readonly graceMs?: number;
  /** told what the shutdown waits for and what it killed (`warden serve` prints it) */
  readonly onProgress?: (event: ShutdownEvent) => void;
}

/** A run of this node that a shutdown waits for. */
export interface RunningRun {
  readonly run_id: string;
  readonly scope: string;
  readonly id: string;
}

/**
 * What a shutdown is doing: `waiting` (once, when runs are active: which, and for how long at
 * most), then `killed` if some outlived the grace (their agents' pids by run, and whether the
 * stop was recorded for `inspect`, as an orphan's is).
 */
export type ShutdownEvent =
  | { readonly type: "waiting"; readonly runs: readonly RunningRun[]; readonly grace_ms: number }
  | { readonly type: "killed"; readonly runs: readonly KilledGroup[]; readonly recorded: boolean };

const DEFAULT_MAX_PROMPT_BYTES = 100_000;
const DEFAULT_MAX_TIMEOUT_S = 24 * 3600;
const DEFAULT_GRACE_MS = 10_000;
/** after killing cut agents, how long their runs get to journal the end and release their claims */
const SETTLE_AFTER_KILL_MS = 5_000;

/** One provider's answer for a revision: the files it would get, or what it refuses. */
export type MaterializationPlan =
  | { readonly provider: ProviderName; readonly materializes: true; readonly files: readonly PlannedTreeFile[] }
  | { readonly provider: ProviderName; readonly materializes: false; readonly code: string; readonly detail: string };

export class Warden {
  readonly home: string;
  readonly limits: Limits;
  /**
   * The node's claims and journals as a library (`invocations.run`, `open`, `lookup`, `list`):
   * the one service a library user calls directly. The HTTP server goes through the methods below.
   */
  readonly invocations: Invocations;
  readonly #delivery: Delivery;
  readonly #materializer: Materializer;
  readonly #runner: Runner;
  readonly #journals: JournalTap;
  /** change sets of runs in git workspaces (DESIGN.md "Change sets"): read, blobs, an unresolved run's worktree */
  readonly changes: RunChanges;
  /** the nodes sharing this node's state (the fleet on PostgreSQL; this node alone when embedded) */
  readonly #fleet: Fleet;
  /** the node's transparency log, when it keeps one */
  readonly log: TransparencyLog | undefined;
  readonly #logFailures: () => number;
  /** agent processes an earlier, dead process on this home had left running, killed at open */
  readonly reapedAgents: Reaped;
  readonly #backend: NodeBackend;
  readonly #bounds: { maxPromptBytes: number; maxTimeoutS: number };
  readonly #agents: AgentGroups;
  readonly #retention: Retention;
  readonly #scrub: Scrub | undefined;
  /** scope\0id → run id of the runs this process is executing */
  readonly #active = new Map<string, RunningRun & { done: Promise<unknown> }>();
  /**
   * Queued runs in #active whose agent has exited (their result being recorded, their home
   * removed): their queue slot is free already, so the next row's start overlaps that work.
   */
  readonly #agentsGone = new Set<string>();
  /** Starts between the capacity check and their entry in #active (claiming, launching). */
  #starting = 0;
  readonly #queue: QueueStore;
  readonly #queueConfig: QueueConfig;
  readonly #queueRunner: QueueRunner;
  readonly #queuedStarts: ((row: QueuedRow) => void)[] = [];
  /** sessions `materialize` made and not yet released */
  readonly #apiSessions = new Set<string>();
  #closing: Promise<void> | undefined;
  readonly #tracing: Tracing | undefined;

  /** Use `openWarden`. */
  constructor(parts: {
    backend: NodeBackend;
    delivery: Delivery;
    invocations: Invocations;
    materializer: Materializer;
    runner: Runner;
    journals: JournalTap;
    agents: AgentGroups;
    bounds: { maxPromptBytes: number; maxTimeoutS: number };
    reaped: Reaped;
    retention: Retention;
    log?: OpenedLog | undefined;
    scrub?: Scrub;
    changes: RunChanges;
    queue: QueueStore;
    queueConfig: QueueConfig;
    tracing?: Tracing | undefined;
  }) {
    this.changes = parts.changes;
    this.log = parts.log?.log;
    this.#logFailures = parts.log?.failures ?? (() => 0);
    this.reapedAgents = parts.reaped;
    this.#backend = parts.backend;
    const { owner, nodes } = parts.backend;
    this.#fleet = new Fleet(owner === undefined || nodes === undefined ? undefined : { registry: nodes, selfId: () => owner.id });
    this.home = parts.backend.home;
    this.limits = parts.backend.limits;
    this.#delivery = parts.delivery;
    this.invocations = parts.invocations;
    this.#materializer = parts.materializer;
    this.#runner = parts.runner;
    this.#journals = parts.journals;
    this.#agents = parts.agents;
    this.#bounds = parts.bounds;
    this.#retention = parts.retention;
    this.#scrub = parts.scrub;
    this.#tracing = parts.tracing;
    this.#queue = parts.queue;
    this.#queueConfig = parts.queueConfig;
    const limits = parts.queueConfig.limits ?? {};
    const providers = parts.runner.providers;
    this.#queueRunner = new QueueRunner({
      queue: parts.queue,
      // A home short of room takes no queued run: another node of the fleet may have room.
      freeSlots: () => (this.closing || this.#roomShort() !== undefined ? 0 : this.#slots - (this.#active.size - this.#agentsGone.size + this.#starting)),
      labels: nodeLabels(parts.queueConfig.labels ?? {}, providers, parts.runner.cliVersions()),
      providers,
      limits: { ...limits, ...(parts.queueConfig.rates === undefined ? {} : { rates: parts.queueConfig.rates }) },
      start: (row) => this.#startQueued(row),
      stop: (row) => {
        const active = this.#active.get(activeKey(row.scope, row.id));
        if (active !== undefined) this.#runner.cancel(active.run_id, row.cancelled_by ?? "operator");
      },
    });
    this.#queueRunner.start();
  }

  /** What the file system of the node's home has left (undefined when it cannot be read). */
  homeRoom(): Room | undefined {
    return roomOf(this.home);
  }

  /** What the home's file system has left when it is less than a new run needs (bytes or files), else undefined. */
  #roomShort(): Room | undefined {
    const room = this.homeRoom();
    if (room === undefined) return undefined;
    return room.bytes < this.limits.runFreeBytes || (room.files !== undefined && room.files < this.limits.runFreeFiles) ? room : undefined;
  }

  /** Runs this node starts from the queue at once. */
  get #slots(): number {
    return this.#queueConfig.slots ?? this.limits.activeRuns;
  }

  /** Statements the log could not store (a failed append is counted, never fails a run or commit). */
  get logFailures(): number {
    return this.#logFailures();
  }

  /** True once `close` was called: new runs are refused. */
  get closing(): boolean {
    return this.#closing !== undefined;
  }

  /**
   * False while the node's storage cannot take new work: on PostgreSQL, while its owner session is
   * lost (the database is unreachable; it reconnects by itself). The embedded backend is local.
   */
  get storageReady(): boolean {
    return this.#backend.owner?.healthy ?? true;
  }

  /** Where the node's state lives: one private directory, or a PostgreSQL database shared by a fleet. */
  get backendKind(): "embedded" | "postgres" {
    return "openDelivery" in this.#backend ? "postgres" : "embedded";
  }

  /** What each workspace and principal spent today (UTC), the fleet's on PostgreSQL (DESIGN.md "Spend"). */
  spendToday(): Promise<readonly SpendCounter[]> {
    return this.#backend.spend.list(spendDay(Date.now()));
  }

  /** Runs this process is executing now. */
  get activeRuns(): number {
    return this.#active.size;
  }

  /** Parses an invocation request as every door does (every rule, its own code). */
  parseRequest(input: unknown): InvokeRequest {
    return parseInvokeRequest(input, this.#bounds);
  }

  /**
   * Starts `(scope, id)` for `request` unless it exists. A known invocation is answered by a
   * read only (no claim attempt, no write): that is the replay path. A different request under
   * the same id is a ConflictError `idempotency-conflict` (422). The id and the request are
   * parsed here, once; from here on they travel parsed.
   */
  async start(scope: string, id: string, input: unknown, options: StartOptions = {}): Promise<InvocationStart> {
    const invocation = parseInvocation(scope, id, input, this.#bounds);
    const existing = await this.#lookup(invocation.scope, invocation.id, requestJson(invocation.request));
    if (existing !== undefined) return existing;
    if (this.closing) throw shuttingDown();
    // Checked before anything is claimed: a refused call leaves its id free for a later retry (G11).
    const running = this.#active.size + this.#starting;
    if (running >= this.limits.activeRuns) throw runCapacityExhausted(running, this.limits.activeRuns);
    const short = this.#roomShort();
    if (short !== undefined) throw homeFull(short, this.limits);
    this.#starting++;
    let started: Awaited<ReturnType<Runner["start"]>>;
    try {
      // The id was read as absent just now: the claim is attempted without reading it again.
      started = await this.#runner.start({ ...invocation, lookedUp: true, ...(options.trace === undefined ? {} : { trace: options.trace }) });
    } finally {
      this.#starting--;
    }
    if (started.status !== "started") return this.#withRunId(invocation.scope, invocation.id, started);
    const key = activeKey(invocation.scope, invocation.id);
    const done = started.done.finally(() => {
      this.#active.delete(key);
      this.#agents.prune();
    });
    done.catch(() => undefined);
    this.#active.set(key, { run_id: started.run_id, scope: invocation.scope, id: invocation.id, done });
    return { status: "started", run_id: started.run_id, done: started.done };
  }

  /**
   * Submits `(scope, id)` to the queue (DESIGN.md "Queued invocations"): stored as `queued` and
   * answered at once; a node with room starts it later. An id already claimed answers its state
   * (as `start` does); an id already queued answers its row (`created: false`) when the request is
   * the same, and is refused `idempotency-conflict` (422) when it is not. `priority`, `deadline_s`
   * and `labels` travel beside the request and are not part of its identity.
   */
  async submit(scope: string, id: string, input: unknown): Promise<Submission> {
    const { request, options } = splitQueueOptions(input);
    const invocation = parseInvocation(scope, id, request, this.#bounds);
    const identity = requestJson(invocation.request);
    const existing = await this.#lookup(invocation.scope, invocation.id, identity);
    if (existing !== undefined) return existing;
    if (this.closing) throw shuttingDown();
    const workspace = invocation.request.workspace ?? this.#runner.defaultWorkspace;
    if (workspace === undefined) throw new ValidationError("workspace-required", "the request names no workspace and none is the default", { status: 422 });
    const now = Date.now();
    const deadlineS = options.deadline_s ?? this.#queueConfig.deadlineS ?? DEFAULT_DEADLINE_S;
    const request_hash = requestHashOf(identity, this.limits);
    const { created, row } = await this.#queue.enqueue({
      scope: invocation.scope,
      id: invocation.id,
      request: canonicalJson(identity),
      request_hash,
      principal: invocation.scope,
      workspace,
      provider: invocation.request.provider,
      priority: options.priority,
      labels: options.labels,
      enqueued_at: now,
      deadline: now + deadlineS * 1000,
    });
    if (row.request_hash !== request_hash) {
      throw new ConflictError("idempotency-conflict", `invocation ${scope}/${invocation.id} was submitted for a different request`, { status: 422 });
    }
    if (created) this.#queueRunner.kick();
    // Started meanwhile: its claim answers.
    if (row.state === "started") return (await this.#lookup(invocation.scope, invocation.id, identity)) ?? { ...queuedViewOf(row), created };
    return { ...queuedViewOf(row), created };
  }

  /** A submitted invocation that has not started (its claim answers once it has); undefined otherwise. */
  async lookupQueued(scope: string, id: string): Promise<QueuedInvocation | undefined> {
    const row = await this.#queue.getQueued({ scope, id: checkInvocationId(id) });
    return row === undefined || row.state === "started" ? undefined : queuedViewOf(row);
  }

  /** A page of submitted invocations in one state (`queued`: also those a node is starting), in (scope, id) order. */
  async listQueued(state: Exclude<QueueState, "leased" | "started">, query: { cursor?: string; limit?: number } = {}): Promise<{ items: QueuedInvocation[]; cursor?: string }> {
    const limit = query.limit ?? 100;
    if (!Number.isSafeInteger(limit) || limit < 1 || limit > 1000) throw new ValidationError("invalid-list-limit", "limit must be an integer 1–1000");
    let after: { scope: string; id: string } | undefined;
    if (query.cursor !== undefined) {
      try {
        const value: unknown = JSON.parse(Buffer.from(query.cursor, "base64url").toString("utf8"));
        if (!Array.isArray(value) || value.length !== 2 || typeof value[0] !== "string" || typeof value[1] !== "string") throw new Error("cursor");
        after = { scope: value[0], id: value[1] };
      } catch {
        throw new ValidationError("invalid-cursor", "cursor is not one this service returned");
      }
    }
    const rows = await this.#queue.listQueued(state, after, limit);
    const items = rows.map(queuedViewOf);
    const last = rows[rows.length - 1];
    return rows.length === limit && last !== undefined ? { items, cursor: Buffer.from(JSON.stringify([last.scope, last.id]), "utf8").toString("base64url") } : { items };
  }

  /**
   * Cancels `(scope, id)` for `by` (DESIGN.md "Queued invocations"): a queued one becomes
   * `cancelled` (never run); a running one's agent is stopped by the node that runs it (this one
   * at once, another at its next sweep when the run came from the queue), and its outcome follows
   * the usual rule. A finished one is `409 invocation-finished`; an unknown one `404`.
   */
  async cancel(scope: string, id: string, by: string): Promise<KnownOutcome | QueuedInvocation> {
    const key = { scope, id: checkInvocationId(id) };
    let outcome = await this.#lookup(key.scope, key.id, undefined);
    if (outcome === undefined) {
      const row = await this.#queue.cancel(key, by, Date.now());
      if (row === undefined) throw new NotFoundError("invocation-not-found", `no invocation ${scope}/${key.id}`, { details: key });
      if (row.state === "cancelled") return queuedViewOf(row);
      if (row.state !== "started") throw finished(key, row.state);
      // It started as we cancelled: its run is stopped below.
      outcome = await this.#lookup(key.scope, key.id, undefined);
      if (outcome === undefined) throw finished(key, row.state);
    }
    if (outcome.status !== "in_progress") throw finished(key, outcome.status);
    const active = this.#active.get(activeKey(key.scope, key.id));
    if (active !== undefined) {
      this.#runner.cancel(active.run_id, by);
      await this.#queue.cancel(key, by, Date.now()).catch(() => undefined);
      return outcome;
    }
    // Running on another node: the request is written on its queue row, and that node stops it.
    const row = await this.#queue.cancel(key, by, Date.now());
    if (row?.state !== "started") {
      throw new ConflictError("cancel-elsewhere", `invocation ${scope}/${key.id} runs on another node and was not submitted through the queue; cancel it on the node that runs it`, { details: key });
    }
    return outcome;
  }

  /** The queue's depth, waits and runs per principal and per node, and this node's slots (DESIGN.md "Queued invocations"). */
  async queueView(): Promise<NodeQueueView> {
    const view = await this.#queue.view();
    return { ...view, self: this.#queue.ownerId, slots: this.#slots, active: this.#active.size };
  }

  /** Starts a row this node leased: its claim is written only while the lease holds (OpenOptions.dequeued). */
  async #startQueued(row: QueuedRow): Promise<void> {
    const key = { scope: row.scope, id: row.id };
    let started: Awaited<ReturnType<Runner["start"]>>;
    this.#starting++;
    try {
      const invocation = parseInvocation(row.scope, row.id, JSON.parse(row.request) as unknown, this.#bounds);
      started = await this.#runner.start({ ...invocation, lookedUp: true, dequeued: true });
    } catch (error) {
      // Cancelled or requeued meanwhile: not started, nothing to do.
      if (isWardenError(error) && error.code === "queue-lease-lost") return;
      // What passes by itself (a busy store, a provider's CLI being installed, a spent day)
      // waits in the queue again; anything else would fail again: the row is refused.
      const transient = !isWardenError(error) || error.status === 429 || error.status >= 500;
      await this.#queue.unlease(key, transient ? undefined : { error: error.code, at: Date.now() }).catch(() => undefined);
      return;
    } finally {
      this.#starting--;
    }
    if (started.status !== "started") {
      // The id was claimed directly meanwhile: that run is not one of the queue's to count.
      await this.#queue.ended(key, Date.now()).catch(() => undefined);
      return;
    }
    const done = started.done.finally(() => {
      this.#active.delete(activeKey(row.scope, row.id));
      this.#agentsGone.delete(activeKey(row.scope, row.id));
      this.#agents.prune();
      this.#queue.ended(key, Date.now()).catch(() => undefined);
      this.#queueRunner.kick();
    });
    done.catch(() => undefined);
    this.#active.set(activeKey(row.scope, row.id), { run_id: started.run_id, scope: row.scope, id: row.id, done });
    void started.agentGone.then(() => {
      if (!this.#active.has(activeKey(row.scope, row.id))) return;
      this.#agentsGone.add(activeKey(row.scope, row.id));
      this.#queueRunner.kick();
    });
    for (const listener of this.#queuedStarts) listener(row);
  }

  /**
   * Calls `listener` with each row this node process started from the queue, once its claim is
   * written (the metrics' wait histogram: `leased_at - enqueued_at`).
   */
  onQueuedStart(listener: (row: QueuedRow) => void): void {
    this.#queuedStarts.push(listener);
  }

  /** The state of `(scope, id)` without creating anything; with `request`, conflicts are refused. */
  async lookup(scope: string, id: string, request?: InvokeRequest): Promise<KnownOutcome | undefined> {
    return this.#lookup(scope, checkInvocationId(id), request === undefined ? undefined : requestJson(request));
  }

  async #lookup(scope: string, id: string, request: JsonValue | undefined): Promise<KnownOutcome | undefined> {
    const outcome = await this.invocations.lookup(scope, id, request);
    return outcome === undefined ? undefined : this.#withRunId(scope, id, outcome);
  }

  /** A page of invocations (Invocations.list). */
  listInvocations(query?: ListQuery): Promise<ListPage> {
    return this.invocations.list(query);
  }

  /** Invocations by status. */
  invocationCounts(): Promise<InvocationCounts> {
    return this.invocations.counts();
  }

  /** The end of what a run's agent printed on `stream`, as this node captured it (live while it runs). */
  outputTail(runId: string, stream: OutputStream, maxBytes: number): Promise<OutputTail> {
    return this.#runner.outputTail(runId, stream, maxBytes);
  }

  /** Calls `onAppend` after each line appended to a run's journal by this process; answers the unsubscribe. */
  subscribeJournal(runId: string, onAppend: () => void): () => void {
    return this.#journals.subscribe(runId, onAppend);
  }

  /** True while this process has the run's journal open for writing. */
  journalIsLive(runId: string): boolean {
    return this.#journals.isLive(runId);
  }

  /** A run's journal from byte `from` (within the journal limit); undefined when there is none. */
  readJournalFrom(runId: string, from: number): Promise<Uint8Array | undefined> {
    return this.#journals.readFrom(runId, from, this.limits.journalBytes);
  }

  /**
   * The journal store as runs write it, for tests that write a journal as a run would (the live
   * stream's); the server reads journals through the methods above.
   * @internal
   */
  get journalTap(): JournalTap {
    return this.#journals;
  }

  /** Runs `(scope, id)` to its end (`start`, then the run's outcome), or answers its existing state. */
  async invoke(scope: string, id: string, input: unknown, options: StartOptions = {}): Promise<KnownOutcome> {
    const started = await this.start(scope, id, input, options);
    return started.status === "started" ? started.done : started;
  }

  /** Journal lines this process has appended (a metric). */
  get journalAppends(): number {
    return this.#journals.appends;
  }

  /** The nodes sharing this node's state (the fleet on PostgreSQL; this node alone when embedded). */
  fleetView(): ReturnType<Fleet["view"]> {
    return this.#fleet.view();
  }

  /** Records where this node serves, in the fleet's list. */
  announce(node: Parameters<Fleet["announce"]>[0]): Promise<void> {
    return this.#fleet.announce(node);
  }

  /** Begins (or resumes) the upload of a bundle manifest, parsed by the delivery module's own parser. */
  beginStage(manifest: unknown): Promise<BeginResult> {
    return this.#delivery.begin(manifest);
  }

  /** Appends one chunk of a blob at `offset` (the route's schema has checked it; Delivery checks it for every other caller). */
  putChunk(stageId: string, digest: string, offset: number, body: ByteSource): Promise<ChunkAccepted> {
    return this.#delivery.putChunk(stageId, digest, offset, body);
  }

  /** Applies a blob pack: each frame as `putChunk` with its digest, offset and bytes (DESIGN.md "Blob packs"). */
  putPack(stageId: string, body: ByteSource, options?: PackOptions): Promise<PackAccepted> {
    return this.#delivery.putPack(stageId, body, options);
  }

  /** Where each missing blob of a stage resumes. */
  stageStatus(stageId: string): Promise<StageStatus> {
    return this.#delivery.status(stageId);
  }

  /** Commits a fully uploaded stage with the publisher's signatures, if any. */
  commitStage(stageId: string, signatures: readonly string[] = []): Promise<CommitReceipt> {
    return this.#delivery.commit(stageId, signatures);
  }

  /** Aborts a stage and drops its partial blobs. */
  abortStage(stageId: string): Promise<void> {
    return this.#delivery.abort(stageId);
  }

  /** Stages being uploaded now, with the bytes received of those declared. */
  uploads(): Promise<UploadProgress[]> {
    return this.#delivery.uploads();
  }

  /** Committed bundles with their revisions and receipts. */
  listBundles(): Promise<BundleView[]> {
    return this.#delivery.catalog.list();
  }

  /** One bundle's revisions with receipts. */
  showBundle(bundleId: string): Promise<BundleView> {
    return this.#delivery.catalog.show(bundleId);
  }

  /** The manifest a revision was committed with. */
  revisionManifest(bundleId: string, revision: string): Promise<Manifest> {
    return this.#delivery.catalog.manifest(bundleId, revision);
  }

  /** Adds a signature to a committed revision (a second signer, a release manager). */
  addSignature(bundleId: string, revision: string, signature: string): Promise<RevisionView> {
    return this.#delivery.catalog.addSignature(bundleId, revision, signature);
  }

  /**
   * Retires a revision and deletes the blobs nothing live references any more: retiring is how an
   * operator makes room, so what only it held goes now, not at a restart. Answers how many went.
   */
  async retireRevision(bundleId: string, revision: string): Promise<number> {
    await this.#delivery.catalog.retire(bundleId, revision);
    return this.#delivery.gc();
  }

  /**
   * Materializes a committed bundle revision for a provider in a new session, kept until
   * `releaseMaterialization` (or the node's restart): at most `limits.materializations` at once.
   */
  async materialize(bundleId: string, revision: string, provider: ProviderName): Promise<Materialization> {
    const limit = this.limits.materializations;
    if (this.#apiSessions.size >= limit) {
      throw new LimitError(
        "materialization-capacity-exhausted",
        `${this.#apiSessions.size} materialized trees are kept on this node, the limit is ${limit}; delete one no longer used (DELETE /v1/materializations/{session})`,
        { status: 429, details: { kept: this.#apiSessions.size, limit } },
      );
    }
    // Counted from here, so that requests arriving together cannot all pass the check.
    const session = randomUUID();
    this.#apiSessions.add(session);
    try {
      return await this.#materializer.materialize({ provider, bundle: { bundle_id: bundleId, revision }, session });
    } catch (error) {
      this.#apiSessions.delete(session);
      throw error;
    }
  }

  /**
   * What the materializer would do with a committed revision for each provider, from its own
   * planning (nothing is written): the files each gets, or the refusal a run or materialization
   * would answer. The revision not being there is the caller's error, not a provider's refusal.
   */
  async materializationPlans(bundleId: string, revision: string): Promise<MaterializationPlan[]> {
    await this.#delivery.catalog.manifest(bundleId, revision);
    const bundle = { bundle_id: bundleId, revision };
    return Promise.all(
      PROVIDER_NAMES.map(async (provider): Promise<MaterializationPlan> => {
        try {
          return { provider, materializes: true, files: [...(await this.#materializer.plan(provider, bundle))] };
        } catch (error) {
          // A refusal is the provider's answer; a damaged store or a bug is the request's failure.
          if (!isWardenError(error) || error.status >= 500) throw error;
          return { provider, materializes: false, code: error.code, detail: error.message };
        }
      }),
    );
  }

  /** Removes a tree `materialize` made (a run's own tree is its runner's to remove). */
  async releaseMaterialization(session: string): Promise<void> {
    // Taken out before the removal starts: a second DELETE of the same tree (a client's retry)
    // is then not found, instead of removing the files the first is removing (ENOENT, a 500).
    if (!this.#apiSessions.delete(session)) {
      throw new NotFoundError("materialization-not-found", `no materialized tree ${session} is kept on this node`, { details: { session } });
    }
    try {
      await this.#materializer.cleanup(session);
    } catch (error) {
      this.#apiSessions.add(session);
      throw error;
    }
  }

  /** The raw signed journal of a run. */
  async readJournal(runId: string): Promise<Uint8Array> {
    const bytes = await this.#journals.read(checkRunId(runId), this.limits.journalBytes);
    if (bytes === undefined) throw new NotFoundError("run-not-found", `no journal for run ${runId}`, { details: { run_id: runId } });
    return bytes;
  }

  /**
   * What an operator reviews (invocations.inspect), plus what this home recorded of the run's
   * agent processes being killed because their node had died: the journal of such a run ends
   * with its node, so only this says that the agent is gone and who stopped it.
   */
  async inspect(scope: string, id: string): Promise<Inspection> {
    const inspection = await this.invocations.inspect(scope, id);
    const runId = inspection.snapshot.audit.run_id;
    const stops = agentStopsOf(this.home, runId);
    // An unresolved run's worktree is kept for its review: what it holds now, stored, with its digest.
    const changes = inspection.report.status === "unresolved" ? await this.changes.ofWorktree(runId) : undefined;
    return {
      ...inspection,
      report: { ...inspection.report, ...(stops.length === 0 ? {} : { agent_stopped: stops }), ...(changes === undefined ? {} : { changes }) },
    };
  }

  /**
   * An operator's answer to a run awaiting approval (DESIGN.md "Governed tool calls"). The same
   * answer again (the run has gone on or ended) is a replay: `replayed: true`, nothing written. A
   * different answer to a call already answered is `409 approval-conflict`.
   */
  async approve(scope: string, id: string, answer: ApprovalAnswer): Promise<{ readonly replayed: boolean; readonly outcome: KnownOutcome }> {
    id = checkInvocationId(id);
    const outcome = await this.invocations.lookup(scope, id);
    if (outcome === undefined) throw new NotFoundError("invocation-not-found", `no invocation ${scope}/${id}`, { details: { scope, id } });
    if (outcome.status !== "awaiting_approval") return this.#answeredAlready(scope, id, outcome, answer);
    if (this.closing) throw shuttingDown();
    let taken: Awaited<ReturnType<Runner["answerApproval"]>>;
    try {
      taken = await this.#runner.answerApproval(scope, id, answer);
    } catch (error) {
      // Another node took the run up first (a fleet: its adopt won): answered as a retry is.
      if (!isWardenError(error) || error.code !== "claim-changed") throw error;
      const now = await this.invocations.lookup(scope, id);
      if (now === undefined || now.status === "awaiting_approval") {
        throw new ConflictError("approval-in-progress", `another node is taking ${scope}/${id} up to journal its answer; ask again`);
      }
      return this.#answeredAlready(scope, id, now, answer);
    }
    const key = activeKey(scope, id);
    const done = taken.done.finally(() => {
      this.#active.delete(key);
      this.#agents.prune();
    });
    done.catch(() => undefined);
    this.#active.set(key, { run_id: taken.run_id, scope, id, done });
    const now = await this.invocations.lookup(scope, id);
    return { replayed: false, outcome: await this.#withRunId(scope, id, now ?? { status: "in_progress" }) };
  }

  /** An answer to a run no longer parked: a replay of the answer its journal holds, or refused. */
  async #answeredAlready(scope: string, id: string, outcome: ExistingOutcome, answer: ApprovalAnswer): Promise<{ readonly replayed: boolean; readonly outcome: KnownOutcome }> {
    // A run in progress on another node of a fleet is not in #active: its claim names it.
    const runId = outcome.status === "in_progress" ? (this.#active.get(activeKey(scope, id))?.run_id ?? (await this.invocations.runIdOf(scope, id))) : outcome.status === "awaiting_approval" ? undefined : outcome.audit.run_id;
    const given = runId === undefined ? undefined : await this.#approvalOf(runId);
    if (given === undefined) {
      throw new ConflictError("invocation-not-awaiting-approval", `${scope}/${id} is ${outcome.status}; only a run awaiting approval can be approved or denied`, { details: { invocation_status: outcome.status } });
    }
    if (given.decision !== answer.decision) {
      throw new ConflictError("approval-conflict", `${scope}/${id} was already answered ${given.decision} by ${given.by.name}`, { details: { decision: given.decision } });
    }
    return { replayed: true, outcome: await this.#withRunId(scope, id, outcome) };
  }

  /** The approval a run's journal holds, if any. */
  async #approvalOf(runId: string): Promise<PolicyApprovalEvent | undefined> {
    const bytes = await this.readJournal(runId).catch(() => undefined);
    if (bytes === undefined) return undefined;
    for (const line of Buffer.from(bytes).toString("utf8").split("\n")) {
      if (line === "") continue;
      try {
        const event = (JSON.parse(line) as { entry?: { event?: { type?: string } } }).entry?.event;
        if (event?.type === "policy.approval") return event as PolicyApprovalEvent;
      } catch {
        return undefined;
      }
    }
    return undefined;
  }

  /** Closes an unresolved invocation with an operator's signed review (Invocations.reconcile), then removes its run's worktree: the review settled it. */
  async reconcile(scope: string, id: string, review: unknown, operator: string): Promise<ReconcileResult> {
    const result = await this.invocations.reconcile(scope, id, review, operator);
    await this.changes.release(result.receipt.snapshot.audit.run_id).catch(() => undefined);
    return result;
  }

  /** Verifies a run's journal with the node's keys (G5) and says whether it needs reconciliation. */
  async verifyRun(runId: string): Promise<RunVerification> {
    const bytes = await this.readJournal(runId);
    // On the invocations module's worker pool: a 64 MiB journal must not stall the event loop.
    const checker = sharedRunChecker();
    const check = (keys: readonly PublicKeyRecord[]): Promise<RunCheck> =>
      checker.check(bytes, keys, { maxBytes: this.limits.journalBytes, runId, limits: this.limits });
    let result = await check(await this.invocations.publicKeys());
    if (result.first_error?.code === "journal-unknown-key") result = await check(await this.invocations.publicKeys(true));
    return {
      ok: result.ok,
      entries: result.entries,
      ...(result.first_error === undefined ? {} : { first_error: result.first_error }),
      requires_reconciliation: result.inspection.requires_reconciliation,
      tail_hash: result.tail_hash,
      incomplete_tail: result.incomplete_tail,
      findings: result.inspection.reasons,
    };
  }

  /**
   * The node's signed in-toto statement about run `runId`'s change set (DESIGN.md "Attestations"):
   * from its verified journal, the bundle's commit and the run's log leaf.
   */
  async attestRun(runId: string): Promise<RunAttestation> {
    const journal = await this.readJournal(runId);
    const [keys, signingKey] = await Promise.all([this.invocations.publicKeys(true), this.invocations.signingKey()]);
    return attestRun(runId, {
      journal,
      maxBytes: this.limits.journalBytes,
      keys,
      signingKey,
      bundle: (bundleId, revision) => this.revisionManifest(bundleId, revision),
      log: this.log,
    });
  }

  /** The node's public keys, oldest first (journal and receipt verification). */
  publicKeys(): Promise<readonly PublicKeyRecord[]> {
    return this.invocations.publicKeys(true);
  }

  /**
   * Refuses new runs, lets running agents finish within the grace period, kills the process
   * groups of those that did not (their runs then read `unresolved` and are never re-run), and
   * closes the stores. Idempotent.
   */
  close(options: CloseOptions = {}): Promise<void> {
    this.#closing ??= this.#shutdown(options.graceMs ?? DEFAULT_GRACE_MS, options.onProgress ?? (() => undefined));
    return this.#closing;
  }

  async #shutdown(graceMs: number, onProgress: (event: ShutdownEvent) => void): Promise<void> {
    // Leases nothing more; a start under way is claimed (and counted below) or refused first.
    await this.#queueRunner.stop();
    const running = [...this.#active.values()].map(({ run_id, scope, id }) => ({ run_id, scope, id }));
    if (running.length > 0) onProgress({ type: "waiting", runs: running, grace_ms: graceMs });
    if (!(await settledWithin(this.#runs(), graceMs))) {
      const killed = this.#agents.killAll();
      if (killed.length > 0) onProgress({ type: "killed", runs: killed, recorded: this.#recordOwnKills(killed) });
      await settledWithin(this.#runs(), SETTLE_AFTER_KILL_MS);
    }
    this.invocations.close();
    this.#runner.stopDeadlines();
    // After the runs: their spans are queued; what the collector does not take now is dropped.
    await this.#tracing?.shutdown();
    await this.#retention.stop();
    await this.#scrub?.stop();
    try {
      // After the runs: their seals are in the log's last checkpoint.
      await this.log?.close().catch(() => undefined);
      await this.#delivery.close();
    } finally {
      await this.#backend.close();
    }
  }

  /**
   * Records the agents this node killed at its shutdown as it records an orphan's (at open), so
   * that `inspect` says the agent is gone and who stopped it. False when it could not be written:
   * the shutdown goes on, and the operator checks the pid as for any run without a record.
   */
  #recordOwnKills(killed: readonly KilledGroup[]): boolean {
    const self = procStat(PROC, "self");
    if (self === undefined) return false;
    try {
      const runs = killed.map((k) => ({ ...k, node_pid: process.pid }));
      recordAgentStops(this.home, runs, { pid: process.pid, startTicks: self.startTicks }, new Date(), "shutdown");
      return true;
    } catch {
      return false;
    }
  }

  #runs(): Promise<unknown>[] {
    return [...this.#active.values()].map((r) => r.done);
  }

  #withRunId(scope: string, id: string, outcome: ExistingOutcome): KnownOutcome {
    if (outcome.status !== "in_progress") return outcome;
    const active = this.#active.get(activeKey(scope, id.toLowerCase()));
    return active === undefined ? outcome : { ...outcome, run_id: active.run_id };
  }
}

/** Opens a node's state under `options.home` (embedded backend, or `options.postgres`) and everything on top of it. */
export async function openWarden(options: WardenOptions): Promise<Warden> {
  const limits = options.limits === undefined ? {} : { limits: options.limits };
  // Before any store is opened: an OTEL_* environment warden cannot honour is refused first.
  const tracing = options.traces === false ? undefined : Tracing.fromEnvironment(options.traces ?? {});
  checkAncestorsSync(options.home);
  ensurePrivateDirSync(options.home, { create: true, recursive: true });
  const home = claimHome(options.home, options.postgres === undefined ? "embedded" : "postgres");
  const homeLock = home.lock;
  let opened: EmbeddedBackend | PostgresNodeBackend;
  try {
    opened =
      options.postgres === undefined
        ? await openEmbeddedBackend({ home: options.home, ...limits })
        : // Loaded only for a fleet node: pg is some forty modules an embedded node's start would read.
          await (await import("../backends/postgres/node.js")).openPostgresNodeBackend(options.home, { ...options.postgres, ...limits });
  } catch (error) {
    homeLock.release();
    await tracing?.shutdown();
    throw error;
  }
  try {
    home.record();
  } catch (error) {
    await opened.close().catch(() => undefined);
    homeLock.release();
    await tracing?.shutdown();
    throw error;
  }
  // The home stays this process's until its stores are closed.
  const backend = {
    ...opened,
    close: async (): Promise<void> => {
      try {
        await opened.close();
      } finally {
        homeLock.release();
      }
    },
  };
  let delivery: Delivery | undefined;
  let log: OpenedLog | undefined;
  try {
    const trust = options.signing === undefined ? undefined : new TrustPolicy(options.signing);
    // A rule whose allowed_signers file cannot be used stops the node now, not at the first push.
    trust?.preload();
    const journals = new JournalTap(backend.journals);
    // The node publishes a key from its first start, so clients can verify before any run.
    await backend.keys.active();
    // On a shared database the log is the fleet's: every node appends to it and signs its checkpoints.
    // Opened before the services that tell it what they made durable, which receive it built.
    log =
      options.log === false
        ? undefined
        : "openDelivery" in backend
          ? await openLog(backend.log, backend.keys, options.log ?? {})
          : await openEmbeddedLog(backend.home, backend.keys, options.log ?? {});
    const attest = log?.attest;
    const deliveryOptions = { ...(trust === undefined ? {} : { trust }), ...(attest === undefined ? {} : { attest: deliveryAttest(attest) }) };
    delivery =
      "openDelivery" in backend
        ? await backend.openDelivery(deliveryOptions)
        : (await openEmbeddedDelivery(backend.home, { limits: backend.limits, ...deliveryOptions })).delivery;
    const invocations = new Invocations({
      claims: backend.claims,
      journals,
      keys: backend.keys,
      limits: backend.limits,
      ...(attest === undefined ? {} : { attest }),
    });
    const profiles = resolveProfiles(options.providers ?? {});
    const materializer = new Materializer({ root: join(backend.home, "materializations"), source: delivery.reads, profiles, limits: backend.limits });
    await materializer.sweep();
    // Before retention prunes anything and before new work: facts a crash kept out of the log.
    // A failure there is counted (warden_log_append_failures_total) and tried again at the next start.
    if (log !== undefined) await catchUpLog(log.log, { claims: backend.claims, delivery, onError: log.countFailure });
    // Before anything is launched: agents an earlier process on this home left running when it
    // died; their runs read unresolved, and nothing may go on acting for them.
    const reaped = reapOrphanedAgents(backend.home);
    // Durable before the node serves: an inspection must say who killed them, also after more restarts.
    const self = procStat(PROC, "self");
    if (self !== undefined && reaped.runs !== undefined) recordAgentStops(backend.home, reaped.runs, { pid: process.pid, startTicks: self.startTicks });
    // After the reaping: no agent of a dead process still uses the home it was given.
    const runHomes = new RunHomes(join(backend.home, "run-homes"));
    // A parked run's home stays: its CLI session goes on from it once approved.
    await runHomes.sweep((run) => invocations.isParked(run));
    const agentTag = agentTagOf(backend.home);
    const launchRecords = agentTag === undefined ? undefined : LaunchRecords.open(backend.home);
    const agents = new AgentGroups();
    const { workspaces, defaultWorkspace } = workspacesOf(backend.home, options);
    const bounds = {
      maxPromptBytes: options.maxPromptBytes ?? DEFAULT_MAX_PROMPT_BYTES,
      maxTimeoutS: options.maxTimeoutS ?? DEFAULT_MAX_TIMEOUT_S,
    };
    const userHooks = options.runnerHooks ?? {};
    const outputDir = join(backend.home, "outputs");
    const worktrees = new RunWorktrees(backend.home, backend.limits.changeSetBytes);
    const tlog = log?.log;
    const runner = new Runner({
      worktrees,
      ...(tracing === undefined ? {} : { tracing, ...(tlog === undefined ? {} : { logLeaf: async (runId: string) => (await tlog.leaf(`run:${runId}`))?.index }) }),
      invocations,
      materializer,
      workspaces,
      ...(defaultWorkspace === undefined ? {} : { defaultWorkspace }),
      ...(options.workspacePermissions === undefined ? {} : { workspacePermissions: options.workspacePermissions }),
      ...(options.trustedWorkspaces === undefined ? {} : { trustedWorkspaces: options.trustedWorkspaces }),
      runHomes,
      outputDir,
      maxOutputBytes: backend.limits.runOutputBytes,
      profiles,
      configuredProviders: Object.entries(options.providers ?? {}).flatMap(([name, value]) => (value !== undefined && isProviderName(name) ? [name] : [])),
      namedCommands: Object.entries(options.providers ?? {}).flatMap(([name, value]) => (value?.command !== undefined && isProviderName(name) ? [name] : [])),
      ...(options.agentEnv === undefined ? {} : { env: options.agentEnv }),
      ...(options.passEnv === undefined ? {} : { passEnv: options.passEnv }),
      ...(options.isolation === undefined ? {} : { isolation: options.isolation }),
      ...(options.workspaceIsolation === undefined ? {} : { workspaceIsolation: options.workspaceIsolation }),
      ...(options.policies === undefined ? {} : { policies: options.policies }),
      ...(options.sandbox === undefined ? {} : { sandbox: options.sandbox }),
      ...(agentTag === undefined ? {} : { agentTag }),
      ...(launchRecords === undefined ? {} : { launchRecords }),
      ...(options.defaultTimeoutS === undefined ? {} : { defaultTimeoutS: options.defaultTimeoutS }),
      ...(options.killGraceMs === undefined ? {} : { killGraceMs: options.killGraceMs }),
      ...(options.spend === undefined ? {} : { spend: options.spend }),
      // Parking needs a backend that can take a parked run up again (the embedded one can).
      ...(journals.reopen === undefined || (backend.claims as ClaimStore).adopt === undefined ? {} : { parking: { deadlineMs: (options.approvalDeadlineS ?? 86_400) * 1000 } }),
      ...("sessions" in backend ? { parkedSessions: backend.sessions } : {}),
      spendCounters: backend.spend,
      ...bounds,
      hooks: {
        ...userHooks,
        afterLaunch: async (pid: number, runId: string) => {
          agents.add(pid, runId);
          await userHooks.afterLaunch?.(pid, runId);
        },
      },
    });
    const changes = new RunChanges({
      worktrees,
      workspacePaths: () => runner.workspacePaths,
      readJournal: (runId) => journals.read(runId, backend.limits.journalBytes),
      lookup: (scope, id) => invocations.lookup(scope, id),
    });
    // After the reaping: no agent writes in a worktree any more; an unresolved run's stays for its review.
    await changes.sweep();
    const retention = new Retention(
      invocations,
      outputDir,
      backend.limits.resultRetentionMs,
      {
        store: backend.claims.queue(),
        retentionMs: (options.queue?.retentionS ?? backend.limits.resultRetentionMs / 1000) * 1000,
      },
      changes,
    );
    retention.start(options.retentionIntervalMs);
    // The queue's slow check of every recorded run (see scrub.ts).
    const scrub = new Scrub(invocations);
    scrub.start();
    // Parked runs a former process left wait on: their deadlines are kept again.
    for (let cursor: string | undefined, first = true; first || cursor !== undefined; first = false) {
      const page = await invocations.list({ status: "awaiting_approval", limit: 1000, ...(cursor === undefined ? {} : { cursor }) });
      for (const item of page.items) {
        const parked = item.status === "awaiting_approval" ? await invocations.lookup(item.scope, item.id).catch(() => undefined) : undefined;
        if (parked?.status === "awaiting_approval") runner.keepDeadline(item.scope, item.id, parked.audit.run_id, parked.parked.deadline);
      }
      cursor = page.cursor;
    }
        return new Warden({
      backend,
      delivery,
      invocations,
      materializer,
      runner,
      journals,
      agents,
      bounds,
      reaped,
      retention,
      log,
      scrub,
      changes,
      tracing,
      queue: backend.claims.queue(),
      queueConfig: options.queue ?? {},
    });

  } catch (error) {
    await tracing?.shutdown();
    await log?.log.close().catch(() => undefined);
    await delivery?.close().catch(() => undefined);
    await backend.close().catch(() => undefined);
    throw error;
  }
}

function workspacesOf(home: string, options: WardenOptions): { workspaces: Record<string, string>; defaultWorkspace?: string } {
  const configured = options.workspaces ?? {};
  const ids = Object.keys(configured);
  if (ids.length === 0) {
    // No workspace configured: agents run in an empty private directory of the node.
    const dir = join(home, "workspaces", "default");
    ensurePrivateDirSync(join(home, "workspaces"), { create: true });
    if (!fs.existsSync(dir)) ensurePrivateDirSync(dir, { create: true });
    return { workspaces: { default: dir }, defaultWorkspace: options.defaultWorkspace ?? "default" };
  }
  for (const [id, dir] of Object.entries(configured)) refuseHomeOverlap(home, id, dir);
  const chosen = options.defaultWorkspace ?? (ids.length === 1 ? ids[0] : configured.default !== undefined ? "default" : undefined);
  return chosen === undefined ? { workspaces: { ...configured } } : { workspaces: { ...configured }, defaultWorkspace: chosen };
}

function activeKey(scope: string, id: string): string {
  return `${scope}\0${id}`;
}

function checkRunId(runId: string): string {
  if (!isRunId(runId)) throw new ValidationError("run-id-invalid", "a run id is a lowercase UUID", { details: { run_id: runId } });
  return runId;
}

function runCapacityExhausted(running: number, limit: number): LimitError {
  return new LimitError("run-capacity-exhausted", `${running} runs are active on this node, the limit is ${limit}; nothing was claimed, try again later`, {
    status: 429,
    details: { active: running, limit },
  });
}

function homeFull(room: Room, limits: Limits): LimitError {
  const mib = (bytes: number): string => `${(bytes / 1024 / 1024).toFixed(1)} MiB`;
  const what =
    room.bytes < limits.runFreeBytes
      ? `${mib(room.bytes)} available, less than the ${mib(limits.runFreeBytes)} a run needs to record itself (limits.runFreeBytes)`
      : `${room.files ?? 0} free inodes (files), fewer than the ${limits.runFreeFiles} a run needs to record itself (limits.runFreeFiles)`;
  return new LimitError("capacity-exhausted", `the node's disk has ${what}; nothing was claimed: free disk space, then retry`, {
    status: 507,
    details: { available_bytes: room.bytes, needed_bytes: limits.runFreeBytes, ...(room.files === undefined ? {} : { free_files: room.files, needed_files: limits.runFreeFiles }) },
  });
}

function shuttingDown(): WardenError {
  return new WardenError("node-shutting-down", "the node is shutting down and starts no new runs", 503);
}

/** Resolves true if every promise settled within `ms`. */
async function settledWithin(promises: readonly Promise<unknown>[], ms: number): Promise<boolean> {
  if (promises.length === 0) return true;
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<false>((resolve) => {
    timer = setTimeout(() => resolve(false), ms);
  });
  try {
    return await Promise.race([Promise.allSettled(promises).then(() => true as const), timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * An agent whose workspace is, holds or lies inside the node's home could read the node's key and
 * tokens as its own files (and the sandbox binds the workspace read-write): refused at start.
 */
function refuseHomeOverlap(home: string, id: string, dir: string): void {
  const real = (p: string): string => {
    try {
      return fs.realpathSync(p);
    } catch {
      return p;
    }
  };
  const h = real(home);
  const w = real(dir);
  const inside = (a: string, b: string): boolean => a === b || a.startsWith(b.endsWith(sep) ? b : b + sep);
  if (inside(w, h) || inside(h, w)) {
    throw new ValidationError("workspace-overlaps-home", `workspace ${JSON.stringify(id)}: ${dir} is, contains or lies inside the node's home ${home}; agents must not reach the node's key and tokens`, {
      details: { workspace: id, path: dir },
    });
  }
}

function queuedViewOf(row: QueuedRow): QueuedInvocation {
  return {
    scope: row.scope,
    id: row.id,
    status: row.state === "leased" || row.state === "started" ? "queued" : row.state,
    queued_at: new Date(row.enqueued_at).toISOString(),
    priority: row.priority,
    deadline_at: new Date(row.deadline).toISOString(),
    principal: row.principal,
    workspace: row.workspace,
    provider: row.provider,
    ...(row.cancelled_by === undefined ? {} : { cancelled_by: row.cancelled_by }),
    ...(row.error === undefined ? {} : { error: row.error }),
  };
}

function finished(key: { scope: string; id: string }, status: string): ConflictError {
  return new ConflictError("invocation-finished", `invocation ${key.scope}/${key.id} is ${status}: there is nothing to cancel`, { details: { ...key, status } });
}
