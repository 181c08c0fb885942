/**
 * Budgets and the spend meter (DESIGN.md "Spend"): what a run may spend (tokens, an estimated cost
 * from the operator's price table, wall time, model turns), what it has spent as its CLI reports
 * usage while it streams, and the daily counters per workspace and per principal that a fleet
 * shares. Pure but for the counters' store interface, which the backends implement.
 */
import { canonicalDigest } from "../core/canonical.js";
import type { Digest } from "../core/digest.js";
import { ValidationError, WardenError } from "../core/errors.js";
import type { TurnUsage } from "./events.js";

export const BUDGET_LIMITS = ["input_tokens", "output_tokens", "cost_usd", "wall_s", "turns"] as const;
export type BudgetLimit = (typeof BUDGET_LIMITS)[number];

/** Upper bounds of one run (or one day's runs); a missing one is no bound. */
export type Budget = { readonly [K in BudgetLimit]?: number };

/** USD per million tokens. */
export interface ModelPrice {
  readonly input_per_mtok: number;
  readonly output_per_mtok: number;
}

/** model name → its price; `*` prices every model not named. */
export type PriceTable = Readonly<Record<string, ModelPrice>>;

/** What a run (or a day of runs) spent. Integers, so that counters add up exactly. */
export interface SpendTotals {
  readonly input_tokens: number;
  readonly output_tokens: number;
  /** millionths of a US dollar */
  readonly cost_usd_micros: number;
  readonly turns: number;
  readonly wall_ms: number;
}

export const NO_SPEND: SpendTotals = Object.freeze({ input_tokens: 0, output_tokens: 0, cost_usd_micros: 0, turns: 0, wall_ms: 0 });

/** The operator's spend configuration (`spend` in warden.json). */
export interface SpendConfig {
  readonly prices?: PriceTable;
  /** every run's budget; a request may only lower it */
  readonly run?: Budget;
  /** what the runs of one workspace may spend per UTC day */
  readonly workspaceDay?: Budget;
  /** what the runs of one principal (the caller's scope) may spend per UTC day */
  readonly principalDay?: Budget;
}

export function pricesDigest(prices: PriceTable): Digest {
  return canonicalDigest(prices as never);
}

/** The UTC day an instant falls on, `YYYY-MM-DD`: the key of the daily counters. */
export function spendDay(ms: number): string {
  return new Date(ms).toISOString().slice(0, 10);
}

/** How far a total has gone towards a limit, in the limit's own unit. */
function usedOf(totals: SpendTotals, limit: BudgetLimit): number {
  switch (limit) {
    case "input_tokens":
      return totals.input_tokens;
    case "output_tokens":
      return totals.output_tokens;
    case "cost_usd":
      return totals.cost_usd_micros / 1e6;
    case "wall_s":
      return totals.wall_ms / 1000;
    case "turns":
      return totals.turns;
  }
}

/** The first limit of `budget` that `totals` reached or passed; undefined while all are below. */
export function breachOf(budget: Budget, totals: SpendTotals): BudgetLimit | undefined {
  return BUDGET_LIMITS.find((limit) => budget[limit] !== undefined && usedOf(totals, limit) >= budget[limit]!);
}

/** Checks a budget from untrusted input (a request): non-negative numbers of known limits only. */
export function parseBudget(value: unknown, field: string): Budget {
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    throw new ValidationError("invoke-budget-invalid", `${field} must be an object of ${BUDGET_LIMITS.join(", ")}`, { details: { field }, status: 422 });
  }
  const out: { [K in BudgetLimit]?: number } = {};
  for (const [key, v] of Object.entries(value as Record<string, unknown>)) {
    if (!(BUDGET_LIMITS as readonly string[]).includes(key)) {
      throw new ValidationError("invoke-request-unknown-field", `unknown field ${JSON.stringify(`${field}.${key}`)}`, { details: { field: `${field}.${key}` }, status: 400 });
    }
    const integer = key !== "cost_usd";
    if (typeof v !== "number" || !Number.isFinite(v) || v <= 0 || (integer && !Number.isSafeInteger(v))) {
      throw new ValidationError("invoke-budget-invalid", `${field}.${key} must be a positive ${integer ? "integer" : "number"}`, { details: { field: `${field}.${key}` }, status: 422 });
    }
    out[key as BudgetLimit] = v;
  }
  return out;
}

/**
 * The run's budget: the configured one, lowered by the request. A request may not ask for more
 * than the node allows (nor for a bound the node sets none of: that is not more), so a caller
 * cannot lift the operator's limit by asking.
 */
export function runBudget(configured: Budget, requested: Budget | undefined): Budget {
  const out: { [K in BudgetLimit]?: number } = { ...configured };
  for (const limit of BUDGET_LIMITS) {
    const asked = requested?.[limit];
    if (asked === undefined) continue;
    const allowed = configured[limit];
    if (allowed !== undefined && asked > allowed) {
      throw new WardenError("budget-over-limit", `budget.${limit} ${asked} is over this node's limit of ${allowed} per run; a request may only lower it`, 422, {
        details: { field: `budget.${limit}`, limit: allowed },
      });
    }
    out[limit] = asked;
  }
  return out;
}

/**
 * What is left of a day's budget after `spent`, as a run's budget (each limit the smaller of the
 * two); `spent` names the first limit already used up, and then no run may start.
 */
export function withinDay(budget: Budget, day: Budget | undefined, spent: SpendTotals): { budget: Budget } | { spent: BudgetLimit } {
  if (day === undefined) return { budget };
  const reached = breachOf(day, spent);
  if (reached !== undefined) return { spent: reached };
  const out: { [K in BudgetLimit]?: number } = { ...budget };
  for (const limit of BUDGET_LIMITS) {
    const cap = day[limit];
    if (cap === undefined) continue;
    const left = cap - usedOf(spent, limit);
    out[limit] = out[limit] === undefined ? left : Math.min(out[limit], left);
  }
  return { budget: out };
}

/** The daily counters (per workspace and per principal), on the node's backend. */
export interface SpendCounters {
  /** Adds one run's spend to its workspace's and its principal's counters of `day`, atomically. */
  add(day: string, subjects: SpendSubjects, spend: SpendTotals): Promise<void>;
  /** The counter of one subject on `day` (zeros when it spent nothing). */
  read(day: string, kind: SpendSubjectKind, subject: string): Promise<SpendTotals>;
  /** Every counter of `day`, for the console's Overview and `/metrics`. */
  list(day: string): Promise<readonly SpendCounter[]>;
}

export type SpendSubjectKind = "workspace" | "principal";

export interface SpendSubjects {
  readonly workspace: string;
  readonly principal: string;
}

export interface SpendCounter {
  readonly kind: SpendSubjectKind;
  readonly subject: string;
  readonly spend: SpendTotals;
}

export function addSpend(a: SpendTotals, b: SpendTotals): SpendTotals {
  return {
    input_tokens: a.input_tokens + b.input_tokens,
    output_tokens: a.output_tokens + b.output_tokens,
    cost_usd_micros: a.cost_usd_micros + b.cost_usd_micros,
    turns: a.turns + b.turns,
    wall_ms: a.wall_ms + b.wall_ms,
  };
}

interface TurnCount {
  readonly model: string | undefined;
  input_tokens: number;
  output_tokens: number;
}

/**
 * Meters one run from the usage its CLI streams. Each turn is priced at its own model's price
 * (`*`, or the profile's model when the stream names none); the CLI's end-of-run total, when it is
 * larger than the turns add up to, wins (a stream may not print a turn's last counts).
 */
export class SpendMeter {
  readonly #prices: PriceTable;
  readonly #defaultModel: string | undefined;
  readonly #startedAt: number;
  readonly #turns = new Map<string, TurnCount>();
  #total: { input_tokens: number; output_tokens: number } | undefined;
  #endedAt: number | undefined;

  constructor(prices: PriceTable, defaultModel: string | undefined, startedAt: number) {
    this.#prices = prices;
    this.#defaultModel = defaultModel;
    this.#startedAt = startedAt;
  }

  take(turn: TurnUsage): void {
    if (turn.total === true) {
      this.#total = { input_tokens: turn.input_tokens, output_tokens: turn.output_tokens };
      return;
    }
    const known = this.#turns.get(turn.id);
    if (known === undefined) {
      this.#turns.set(turn.id, { model: turn.model ?? this.#defaultModel, input_tokens: turn.input_tokens, output_tokens: turn.output_tokens });
      return;
    }
    // Counts of one turn only grow as it streams: a smaller repeat is an earlier snapshot.
    known.input_tokens = Math.max(known.input_tokens, turn.input_tokens);
    known.output_tokens = Math.max(known.output_tokens, turn.output_tokens);
  }

  /** Stops the wall clock (the agent is gone). */
  end(at: number): void {
    this.#endedAt ??= at;
  }

  totals(now: number): SpendTotals {
    let input = 0;
    let output = 0;
    let micros = 0;
    let model: string | undefined = this.#defaultModel;
    for (const t of this.#turns.values()) {
      input += t.input_tokens;
      output += t.output_tokens;
      micros += this.#cost(t.model, t.input_tokens, t.output_tokens);
      model = t.model;
    }
    if (this.#total !== undefined) {
      const moreIn = Math.max(0, this.#total.input_tokens - input);
      const moreOut = Math.max(0, this.#total.output_tokens - output);
      micros += this.#cost(model, moreIn, moreOut);
      input += moreIn;
      output += moreOut;
    }
    return {
      input_tokens: input,
      output_tokens: output,
      cost_usd_micros: Math.round(micros),
      turns: this.#turns.size,
      wall_ms: Math.max(0, (this.#endedAt ?? now) - this.#startedAt),
    };
  }

  /** USD per million tokens is exactly millionths of a USD per token. */
  #cost(model: string | undefined, input: number, output: number): number {
    const price = (model === undefined ? undefined : this.#prices[model]) ?? this.#prices["*"];
    return price === undefined ? 0 : input * price.input_per_mtok + output * price.output_per_mtok;
  }
}
