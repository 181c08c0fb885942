/**
 * The order rules of a run's events (DESIGN.md "Journal"): run.started first and once, each effect
 * started once and finished at most once after its start, nothing after run.terminated. The writer
 * refuses an event that breaks them, the verifier reports it, and the inspector reads the state
 * they leave behind — one set of rules for all three.
 */
import type { EffectOutcome, JournalEvent, TerminationReason } from "./types.js";
import type { Digest } from "../core/digest.js";

export type LifecycleViolation =
  | "journal-not-started"
  | "journal-duplicate-run-started"
  | "journal-after-terminated"
  | "journal-duplicate-run-spend"
  | "journal-duplicate-effect-start"
  | "journal-finish-without-start"
  | "journal-duplicate-finish"
  | "journal-duplicate-run-changes"
  | "journal-parked-with-open-effects";

export interface EffectState {
  readonly effect_id: string;
  readonly started_seq: number;
  readonly outcome?: EffectOutcome;
  readonly finished_seq?: number;
}

export class RunLifecycle {
  #started = false;
  #termination: { reason: TerminationReason; seq: number; result_hash?: Digest } | undefined;
  readonly #effects = new Map<string, EffectState>();
  #open = 0;
  #spent = false;
  #changes = false;
  /** the call a `run.parked` waits on, until its `policy.approval` */
  #parked: string | undefined;

  /** The rule `event` would break if it came next, with a reason; undefined when it may. */
  check(event: JournalEvent): { code: LifecycleViolation; reason: string } | undefined {
    if (!this.#started && event.type !== "run.started") {
      return { code: "journal-not-started", reason: `first event is ${event.type}, not run.started` };
    }
    if (this.#termination !== undefined) {
      return { code: "journal-after-terminated", reason: `${event.type} after run.terminated` };
    }
    switch (event.type) {
      case "run.started":
        return this.#started ? { code: "journal-duplicate-run-started", reason: "a second run.started" } : undefined;
      case "effect.started":
        return this.#effects.has(event.effect_id)
          ? { code: "journal-duplicate-effect-start", reason: `effect ${JSON.stringify(event.effect_id)} started twice` }
          : undefined;
      case "effect.finished": {
        const effect = this.#effects.get(event.effect_id);
        if (effect === undefined) {
          return { code: "journal-finish-without-start", reason: `effect ${JSON.stringify(event.effect_id)} finished but never started` };
        }
        return effect.outcome !== undefined
          ? { code: "journal-duplicate-finish", reason: `effect ${JSON.stringify(event.effect_id)} finished twice` }
          : undefined;
      }
      case "run.spend":
        return this.#spent ? { code: "journal-duplicate-run-spend", reason: "a second run.spend" } : undefined;
      case "run.changes":
        return this.#changes ? { code: "journal-duplicate-run-changes", reason: "a second run.changes" } : undefined;
      case "run.parked":
        // Parked means nothing is in flight: the agent is gone and every effect it started has its outcome.
        return this.#open > 0 ? { code: "journal-parked-with-open-effects", reason: `run.parked with ${this.#open} effect(s) still open` } : undefined;
      default:
        return undefined;
    }
  }

  /** Records an event that passed `check`. */
  apply(event: JournalEvent, seq: number): void {
    switch (event.type) {
      case "run.started":
        this.#started = true;
        break;
      case "effect.started":
        this.#effects.set(event.effect_id, { effect_id: event.effect_id, started_seq: seq });
        this.#open++;
        break;
      case "effect.finished": {
        const effect = this.#effects.get(event.effect_id);
        if (effect !== undefined) {
          this.#effects.set(event.effect_id, { ...effect, outcome: event.outcome, finished_seq: seq });
          this.#open--;
        }
        break;
      }
      case "run.spend":
        this.#spent = true;
        break;
      case "run.changes":
        this.#changes = true;
        break;
      case "run.parked":
        this.#parked = event.call_id;
        break;
      case "policy.approval":
        this.#parked = undefined;
        break;
      case "run.terminated":
        this.#termination = {
          reason: event.reason,
          seq,
          ...(event.result_hash !== undefined ? { result_hash: event.result_hash } : {}),
        };
        break;
      default:
        break;
    }
  }

  get started(): boolean {
    return this.#started;
  }
  get termination(): { readonly reason: TerminationReason; readonly seq: number; readonly result_hash?: Digest } | undefined {
    return this.#termination;
  }
  /** The call the run is parked on (its last entry so far is run.parked, or only notes follow it). */
  get parked(): string | undefined {
    return this.#parked;
  }
  get openEffectCount(): number {
    return this.#open;
  }
  /** Every effect in start order. */
  effects(): IterableIterator<EffectState> {
    return this.#effects.values();
  }
}
