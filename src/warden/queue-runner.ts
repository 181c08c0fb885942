/**
 * A node's dequeue loop (DESIGN.md "Queued invocations"): while the node has free slots it leases
 * the best eligible rows of the queue and starts them; it sweeps dead owners' leases and rows
 * past their deadline, and stops the runs of this node an operator cancelled through another
 * node. It ticks at each submission this node receives, at each run's end and every POLL_MS.
 *
 * A tick does not wait for the starts it made: a start holds its slot from the lease on (the
 * facade counts it starting until it runs), so a slot freed while other rows are still being
 * claimed is leased again at once, not after the slowest claim of the round.
 */
import type { QueuedRow, QueueLimits, QueueStore } from "../invocations/queue-store.js";
import type { Labels } from "../invocations/queue-store.js";

/** `warden.json` `queue` (all optional; DESIGN.md "Queued invocations"). */
export interface QueueConfig {
  /** runs this node starts from the queue at once (default: limits.activeRuns) */
  readonly slots?: number;
  readonly labels?: Labels;
  readonly limits?: { readonly workspace?: number; readonly provider?: number };
  /** provider → rows leased per minute */
  readonly rates?: Readonly<Record<string, number>>;
  /** a submission's default deadline_s */
  readonly deadlineS?: number;
  /** how long an ended row is kept whole, s (default: the result retention) */
  readonly retentionS?: number;
}

export const DEFAULT_DEADLINE_S = 24 * 3600;
const POLL_MS = 250;
const SWEEP_MS = 2000;

export interface QueueRunnerOptions {
  readonly queue: QueueStore;
  /** slots free now (the node's slots minus the runs it is executing or starting) */
  readonly freeSlots: () => number;
  readonly labels: Labels;
  readonly providers: readonly string[];
  readonly limits: QueueLimits;
  /** starts a leased row (the facade: parse, claim with the lease, launch); settles once claimed or refused */
  readonly start: (row: QueuedRow) => Promise<void>;
  /** stops the run of a started row of this node that someone asked to stop */
  readonly stop: (row: QueuedRow) => void;
  /** told of a failed tick (the loop goes on) */
  readonly onError?: (error: unknown) => void;
  readonly pollMs?: number;
}

export class QueueRunner {
  readonly #options: QueueRunnerOptions;
  #timer: NodeJS.Timeout | undefined;
  #ticking: Promise<void> | undefined;
  #again = false;
  #stopped = false;
  #lastSweep = 0;
  /** Starts made and not settled yet (stop waits for them). */
  readonly #starts = new Set<Promise<void>>();
  /** Stop requests already passed on (a run is stopped once; the row stays until it ends). */
  readonly #stopping = new Set<string>();

  constructor(options: QueueRunnerOptions) {
    this.#options = options;
  }

  start(): void {
    this.kick();
  }

  /** Ticks soon (a submission arrived, a run ended); a tick under way runs once more after. */
  kick(): void {
    if (this.#stopped) return;
    if (this.#ticking !== undefined) {
      this.#again = true;
      return;
    }
    clearTimeout(this.#timer);
    this.#timer = setTimeout(() => this.#tick(), 0);
    this.#timer.unref();
  }

  /** Leases nothing more; resolves when the tick under way and every start made settled. */
  async stop(): Promise<void> {
    this.#stopped = true;
    clearTimeout(this.#timer);
    await this.#ticking;
    await Promise.all(this.#starts);
  }

  #tick(): void {
    this.#ticking = this.#once()
      .catch((error: unknown) => this.#options.onError?.(error))
      .finally(() => {
        this.#ticking = undefined;
        if (this.#stopped) return;
        const again = this.#again;
        this.#again = false;
        this.#timer = setTimeout(() => this.#tick(), again ? 0 : (this.#options.pollMs ?? POLL_MS));
        this.#timer.unref();
      });
  }

  async #once(): Promise<void> {
    const o = this.#options;
    const now = Date.now();
    if (now - this.#lastSweep >= SWEEP_MS) {
      this.#lastSweep = now;
      await o.queue.sweep(now);
      await this.#passStops();
    }
    const free = o.freeSlots();
    if (free <= 0 || this.#stopped) return;
    const { leased, expired } = await o.queue.lease({ max: free, labels: o.labels, providers: o.providers, now: Date.now(), limits: o.limits });
    // Each start counts as running from here (freeSlots), so the next tick need not wait for it.
    for (const row of leased) {
      const start = o.start(row).catch((error: unknown) => o.onError?.(error));
      this.#starts.add(start);
      void start.finally(() => this.#starts.delete(start));
    }
    // A full round, or one that expired rows in the place of others: there may be more to take now.
    if (leased.length === free || expired > 0) this.#again = true;
  }

  async #passStops(): Promise<void> {
    const rows = await this.#options.queue.stopRequests();
    const live = new Set<string>();
    for (const row of rows) {
      const key = `${row.scope}\0${row.id}`;
      live.add(key);
      if (this.#stopping.has(key)) continue;
      this.#stopping.add(key);
      this.#options.stop(row);
    }
    for (const key of this.#stopping) if (!live.has(key)) this.#stopping.delete(key);
  }
}

/**
 * A node's labels: `provider.<name>: "true"` for each provider it runs, `provider.<name>.version`
 * for each whose CLI version it read at start (the pinned CLIs), then the configured ones (an
 * operator's label of the same name wins).
 */
export function nodeLabels(configured: Labels, providers: readonly string[], cliVersions: Readonly<Record<string, string | undefined>> = {}): Labels {
  const versions = providers.flatMap((p) => (cliVersions[p] === undefined ? [] : [[`provider.${p}.version`, cliVersions[p]!] as const]));
  return { ...Object.fromEntries(providers.map((p) => [`provider.${p}`, "true"])), ...Object.fromEntries(versions), ...configured };
}
