/**
 * The scrub a node runs (`Invocations.scrub`): a slow, endless walk over every claim that checks
 * each recorded row's journal against its seal, as a lookup would, and records what it finds, so
 * the operator's queue (`status=unresolved`, read from indexes) also shows a run whose journal or
 * row was edited though nobody has looked it up since. Its rate is bounded (SCRUB_ROWS every
 * SCRUB_STEP_MS): a node with 10⁶ claims is walked in about three hours, at a small, steady cost,
 * never a burst that would hold the node's answers. A round starts at start-up and, once the walk
 * reached the end, again after SCRUB_ROUND_PAUSE_MS.
 */
import type { Invocations } from "../invocations/service.js";

export const SCRUB_ROWS = 1000;
export const SCRUB_STEP_MS = 10_000;
export const SCRUB_ROUND_PAUSE_MS = 10 * 60 * 1000;

export interface ScrubPace {
  readonly rows?: number;
  readonly stepMs?: number;
  readonly roundPauseMs?: number;
}

export class Scrub {
  readonly #invocations: Pick<Invocations, "scrub">;
  readonly #rows: number;
  readonly #stepMs: number;
  readonly #roundPauseMs: number;
  #cursor: string | undefined;
  #timer: NodeJS.Timeout | undefined;
  #step: Promise<void> | undefined;
  #stopped = false;

  constructor(invocations: Pick<Invocations, "scrub">, pace: ScrubPace = {}) {
    this.#invocations = invocations;
    this.#rows = pace.rows ?? SCRUB_ROWS;
    this.#stepMs = pace.stepMs ?? SCRUB_STEP_MS;
    this.#roundPauseMs = pace.roundPauseMs ?? SCRUB_ROUND_PAUSE_MS;
  }

  /** Starts the walk with a step now (in the background). */
  start(): void {
    this.#schedule(0);
  }

  /** Stops the walk and waits for a step under way: the stores close next. */
  async stop(): Promise<void> {
    this.#stopped = true;
    clearTimeout(this.#timer);
    await this.#step;
  }

  #schedule(ms: number): void {
    if (this.#stopped) return;
    this.#timer = setTimeout(() => {
      this.#step = this.#once().finally(() => (this.#step = undefined));
    }, ms).unref();
  }

  async #once(): Promise<void> {
    let next = this.#stepMs;
    try {
      const pass = await this.#invocations.scrub({ rows: this.#rows, ...(this.#cursor === undefined ? {} : { cursor: this.#cursor }) });
      this.#cursor = pass.cursor;
      if (pass.cursor === undefined) next = this.#roundPauseMs;
    } catch {
      // Storage unavailable (or closing): the next step tries again from the same place.
    }
    this.#schedule(next);
  }
}
