/**
 * The node's counters and gauges, rendered in the Prometheus text exposition format (0.0.4).
 * Deliberately tiny: a handful of series with low-cardinality labels, no dependency.
 */
import type { TransparencyLog } from "../tlog/log.js";
import type { SpendCounter } from "../runner/spend.js";
import type { QueueView } from "../invocations/queue-store.js";
type Labels = Readonly<Record<string, string>>;

interface Family {
  readonly name: string;
  readonly help: string;
  readonly type: "counter" | "gauge" | "histogram";
  readonly series: Map<string, { labels: Labels; value: number }>;
  /** gauges read at scrape time */
  readonly read?: () => number;
  /** labelled gauges read at scrape time, one series per label set */
  readonly readSeries?: () => readonly { readonly labels: Labels; readonly value: number }[];
}

function labelKey(labels: Labels): string {
  return Object.keys(labels)
    .sort()
    .map((k) => `${k}="${escapeLabel(labels[k] as string)}"`)
    .join(",");
}

function escapeLabel(value: string): string {
  return value.replace(/\\/g, "\\\\").replace(/\n/g, "\\n").replace(/"/g, '\\"');
}

export class MetricsRegistry {
  readonly #families = new Map<string, Family>();
  readonly #refreshers: (() => Promise<void>)[] = [];
  readonly #histograms = new Map<string, Histogram>();

  /** Reads, before each scrape, what only an asynchronous store can tell (the day's spend). */
  refreshEachScrape(refresh: () => Promise<void>): void {
    this.#refreshers.push(refresh);
  }

  /** Runs the refreshers; one that fails leaves its series as they were last read. */
  async refresh(): Promise<void> {
    await Promise.all(this.#refreshers.map((r) => r().catch(() => undefined)));
  }

  counter(name: string, help: string): Counter {
    return new Counter(this.#family(name, help, "counter"));
  }

  /** A series whose value is read when scraped (a gauge, or a counter kept elsewhere). */
  observe(name: string, help: string, type: "counter" | "gauge", read: () => number): void {
    this.#families.set(name, { name, help, type, series: new Map(), read });
  }

  /** Series read when scraped, one per label set (a gauge per witness). */
  observeSeries(name: string, help: string, type: "counter" | "gauge", read: () => readonly { readonly labels: Labels; readonly value: number }[]): void {
    this.#families.set(name, { name, help, type, series: new Map(), readSeries: read });
  }

  /** A histogram with fixed upper bounds (seconds, ascending); `+Inf` is added. */
  histogram(name: string, help: string, bounds: readonly number[]): Histogram {
    const histogram = new Histogram(bounds);
    this.#histograms.set(name, histogram);
    this.#families.set(name, { name, help, type: "histogram", series: new Map() });
    return histogram;
  }

  render(): string {
    const out: string[] = [];
    for (const f of this.#families.values()) {
      out.push(`# HELP ${f.name} ${f.help}`, `# TYPE ${f.name} ${f.type}`);
      const histogram = this.#histograms.get(f.name);
      if (histogram !== undefined) {
        histogram.render(f.name, out);
        continue;
      }
      if (f.read !== undefined) {
        out.push(`${f.name} ${f.read()}`);
        continue;
      }
      // A series without labels is written without braces.
      const line = (key: string, value: number): string => (key === "" ? `${f.name} ${value}` : `${f.name}{${key}} ${value}`);
      if (f.readSeries !== undefined) {
        for (const s of f.readSeries()) out.push(line(labelKey(s.labels), s.value));
        continue;
      }
      for (const [key, s] of f.series) out.push(line(key, s.value));
    }
    return out.join("\n") + "\n";
  }

  #family(name: string, help: string, type: "counter" | "gauge"): Family {
    const family = { name, help, type, series: new Map<string, { labels: Labels; value: number }>() };
    this.#families.set(name, family);
    return family;
  }
}

export class Counter {
  readonly #family: Family;
  constructor(family: Family) {
    this.#family = family;
  }

  inc(labels: Labels = {}, by = 1): void {
    this.series(labels).value += by;
  }

  /** The series of `labels`, for a caller that increments it often without re-keying each time. */
  series(labels: Labels = {}): { value: number } {
    const key = labelKey(labels);
    let series = this.#family.series.get(key);
    if (series === undefined) {
      series = { labels, value: 0 };
      this.#family.series.set(key, series);
    }
    return series;
  }
}

/**
 * A Prometheus histogram, one per label set: cumulative `_bucket{le}` counts, `_sum`, `_count`.
 * Observations are rare (one per queued run's start), so each walks the bounds.
 */
export class Histogram {
  readonly #bounds: readonly number[];
  readonly #series = new Map<string, { labels: Labels; buckets: number[]; sum: number; count: number; max: number }>();

  constructor(bounds: readonly number[]) {
    this.#bounds = bounds;
  }

  observe(value: number, labels: Labels = {}): void {
    const key = labelKey(labels);
    let series = this.#series.get(key);
    if (series === undefined) {
      series = { labels, buckets: this.#bounds.map(() => 0), sum: 0, count: 0, max: 0 };
      this.#series.set(key, series);
    }
    this.#bounds.forEach((bound, i) => {
      if (value <= bound) series.buckets[i]!++;
    });
    series.sum += value;
    series.count++;
    series.max = Math.max(series.max, value);
  }

  /** count, sum and max of every observation (all label sets) */
  totals(): { readonly count: number; readonly sum: number; readonly max: number } {
    let [count, sum, max] = [0, 0, 0];
    for (const s of this.#series.values()) {
      count += s.count;
      sum += s.sum;
      max = Math.max(max, s.max);
    }
    return { count, sum, max };
  }

  render(name: string, out: string[]): void {
    for (const [key, s] of this.#series) {
      const labelled = (extra: string): string => (key === "" ? extra : extra === "" ? key : `${key},${extra}`);
      const braces = (inner: string): string => (inner === "" ? "" : `{${inner}}`);
      this.#bounds.forEach((bound, i) => out.push(`${name}_bucket{${labelled(`le="${bound}"`)}} ${s.buckets[i]}`));
      out.push(`${name}_bucket{${labelled('le="+Inf"')}} ${s.count}`);
      out.push(`${name}_sum${braces(labelled(""))} ${s.sum}`, `${name}_count${braces(labelled(""))} ${s.count}`);
    }
  }
}

/** Upper bounds (seconds) of the queue's wait histogram: from a dequeue at once to a day's backlog. */
export const QUEUE_WAIT_BOUNDS: readonly number[] = [0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600, 14400, 86400];

/** The series warden exports. */
export interface NodeMetrics {
  readonly registry: MetricsRegistry;
  readonly requests: Counter;
  readonly requestSeconds: Counter;
  readonly bytesReceived: Counter;
  readonly invocations: Counter;
  readonly stages: Counter;
  readonly runs: Counter;
  readonly requestsAborted: Counter;
  /** how long each queued run this node started waited in the queue, by principal */
  readonly queueWait: Histogram;
}

export interface GaugeSources {
  activeStages(): number;
  activeRuns(): number;
  journalAppends(): number;
  /** the transparency log's state, when the node keeps one */
  log?: { snapshot(): LogSnapshot; failures(): number };
  /** what each workspace and principal spent today */
  spendToday?(): Promise<readonly SpendCounter[]>;
  /** the queue of submitted invocations (the fleet's on PostgreSQL) and this node's slots */
  queueView?(): Promise<QueueView & { readonly slots: number }>;
  /** what the file system of the node's home has left (a new run needs limits.runFreeBytes / runFreeFiles) */
  homeRoom?(): { readonly bytes: number; readonly files: number | undefined } | undefined;
}

type LogSnapshot = ReturnType<TransparencyLog["snapshot"]>;

export function createNodeMetrics(sources: GaugeSources): NodeMetrics {
  const registry = new MetricsRegistry();
  const metrics: NodeMetrics = {
    registry,
    requests: registry.counter("warden_http_requests_total", "HTTP requests answered, by method, route and status"),
    requestSeconds: registry.counter("warden_http_request_seconds_total", "Time spent answering HTTP requests, by route"),
    bytesReceived: registry.counter("warden_delivery_bytes_received_total", "Blob bytes received in chunk uploads"),
    invocations: registry.counter("warden_invocations_total", "Invocation requests by outcome"),
    stages: registry.counter("warden_stages_total", "Stage operations by event (begun, resumed, committed, aborted)"),
    runs: registry.counter("warden_runs_total", "Runs started over HTTP that ended, by outcome (recorded, unresolved, error)"),
    requestsAborted: registry.counter(
      "warden_http_requests_aborted_total",
      "Requests whose client went away before the request ended (a push cut off mid-chunk), by route: the client's doing, not a failure of the node",
    ),
    queueWait: registry.histogram(
      "warden_queue_wait_seconds",
      "Time each queued invocation this node started waited in the queue (submitted to leased), by principal",
      QUEUE_WAIT_BOUNDS,
    ),
  };
  registry.observe("warden_stages_active", "Stages begun through this node process and not yet committed or aborted", "gauge", sources.activeStages);
  registry.observe("warden_runs_active", "Agent runs executing in this node process", "gauge", sources.activeRuns);
  registry.observe("warden_journal_appends_total", "Journal entries durably appended by this node process", "counter", sources.journalAppends);
  if (sources.homeRoom !== undefined) homeMetrics(registry, sources.homeRoom);
  if (sources.log !== undefined) logMetrics(registry, sources.log);
  if (sources.spendToday !== undefined) spendMetrics(registry, sources.spendToday);
  if (sources.queueView !== undefined) queueMetrics(registry, sources.queueView);
  return metrics;
}

/** What the home's file system has left (read once a scrape): what to alert on before a full disk refuses runs (507 capacity-exhausted). */
function homeMetrics(registry: MetricsRegistry, read: NonNullable<GaugeSources["homeRoom"]>): void {
  let room: ReturnType<typeof read>;
  registry.refreshEachScrape(async () => {
    room = read();
  });
  const one = (value: number | undefined) => (value === undefined ? [] : [{ labels: {}, value }]);
  registry.observeSeries("warden_home_available_bytes", "Bytes the file system of the node's home has available (new runs are refused below limits.runFreeBytes)", "gauge", () => one(room?.bytes));
  registry.observeSeries("warden_home_free_files", "Free inodes of the file system of the node's home (new runs are refused below limits.runFreeFiles)", "gauge", () => one(room?.files));
}

/** The queue as the claims store counts it (DESIGN.md "Queued invocations"), read at each scrape. */
function queueMetrics(registry: MetricsRegistry, read: () => Promise<QueueView & { readonly slots: number }>): void {
  let view: (QueueView & { readonly slots: number }) | undefined;
  registry.refreshEachScrape(async () => {
    view = await read();
  });
  const perPrincipal = (value: (p: QueueView["principals"][number]) => number | undefined) => () =>
    (view?.principals ?? []).flatMap((p) => {
      const v = value(p);
      return v === undefined ? [] : [{ labels: { principal: p.principal }, value: v }];
    });
  const fleet = "the fleet's on PostgreSQL";
  registry.observe("warden_queue_slots", "Runs this node starts from the queue at once (queue.slots)", "gauge", () => view?.slots ?? 0);
  registry.observeSeries("warden_queue_depth", `Submitted invocations waiting in the queue, by principal (${fleet})`, "gauge", perPrincipal((p) => p.queued));
  registry.observeSeries("warden_queue_running", `Queued invocations leased or running, by principal (${fleet})`, "gauge", perPrincipal((p) => p.running));
  registry.observeSeries(
    "warden_queue_oldest_wait_seconds",
    `Age of each principal's oldest waiting invocation (${fleet})`,
    "gauge",
    perPrincipal((p) => (p.oldest_enqueued_at === undefined ? undefined : Math.max(0, Date.now() - p.oldest_enqueued_at) / 1000)),
  );
  registry.observeSeries("warden_queue_node_running", `Queued invocations leased or running, by the node (owner id) holding them (${fleet})`, "gauge", () =>
    (view?.owners ?? []).map((o) => ({ labels: { node: o.owner }, value: o.running })),
  );
}

/** Today's spend per workspace and per principal (DESIGN.md "Spend"), as the day's counters hold it. */
function spendMetrics(registry: MetricsRegistry, read: () => Promise<readonly SpendCounter[]>): void {
  let today: readonly SpendCounter[] = [];
  registry.refreshEachScrape(async () => {
    today = await read();
  });
  const series = (value: (c: SpendCounter) => number) => () => today.map((c) => ({ labels: { kind: c.kind, subject: c.subject }, value: value(c) }));
  const about = "spent today (UTC) by the runs of each workspace and principal (kind, subject), the fleet's on PostgreSQL";
  registry.observeSeries("warden_spend_today_input_tokens", `Input tokens ${about}`, "gauge", series((c) => c.spend.input_tokens));
  registry.observeSeries("warden_spend_today_output_tokens", `Output tokens ${about}`, "gauge", series((c) => c.spend.output_tokens));
  registry.observeSeries("warden_spend_today_cost_usd", `Estimated cost in USD ${about}`, "gauge", series((c) => c.spend.cost_usd_micros / 1e6));
  registry.observeSeries("warden_spend_today_turns", `Model turns ${about}`, "gauge", series((c) => c.spend.turns));
  registry.observeSeries("warden_spend_today_wall_seconds", `Agent wall time in seconds ${about}`, "gauge", series((c) => c.spend.wall_ms / 1000));
}

/** The transparency log's gauges (DESIGN.md "Transparency"): how far checkpoints and each witness are behind the log. */
function logMetrics(registry: MetricsRegistry, log: NonNullable<GaugeSources["log"]>): void {
  registry.observe("warden_log_size", "Leaves in the transparency log", "gauge", () => log.snapshot().size);
  registry.observe("warden_log_checkpoint_size", "Leaves covered by the latest signed checkpoint", "gauge", () => log.snapshot().checkpoint_size);
  registry.observe("warden_log_unlogged", "Statements whose append failed and that are being tried again", "gauge", () => log.snapshot().unlogged);
  registry.observe("warden_log_append_failures_total", "Appends to the transparency log that failed (each tried again; never failed a run or commit)", "counter", log.failures);
  const perWitness = (value: (w: LogSnapshot["witnesses"][number]) => number) => () => log.snapshot().witnesses.map((w) => ({ labels: { witness: w.name }, value: value(w) }));
  registry.observeSeries("warden_log_witness_cosigned_size", "Largest checkpoint size the witness cosigned", "gauge", perWitness((w) => w.size));
  registry.observeSeries("warden_log_witness_behind_leaves", "Leaves of the latest checkpoint the witness has not cosigned", "gauge", perWitness((w) => w.behind));
  registry.observeSeries("warden_log_witness_lag_seconds", "Age of the oldest checkpoint the witness has not cosigned (0: it has the latest)", "gauge", perWitness((w) => w.lag_seconds));
}
