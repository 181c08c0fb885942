/**
 * Runs this process gave up whose release could not be stored (a full disk, a lost database).
 * This process answers them `unresolved` itself. Everyone else reads the stored row: its owner,
 * this process, is alive, so other processes and fleet nodes would read `in_progress` for as long
 * as this process lives — a run that is over, which can be neither retried nor reconciled. So the
 * release is stored again at each sighting here and, between sightings, every few seconds in the
 * background, until it is stored.
 */
import type { ClaimKey, ClaimStore } from "./claim-store.js";

/** How often a release that could not be stored is tried again, with nobody asking. */
export const RELEASE_RETRY_MS = 5_000;

export class UnreleasedRuns {
  readonly #claims: Pick<ClaimStore, "release">;
  readonly #retryMs: number;
  /** By run id. */
  readonly #runs = new Map<string, ClaimKey>();
  /** Runs whose release is being stored now: a store that hangs gets one try at a time. */
  readonly #trying = new Set<string>();
  #timer: NodeJS.Timeout | undefined;
  /** Set by stop(): the stores are closing, and a release failing later starts no timer. */
  #stopped = false;

  constructor(claims: Pick<ClaimStore, "release">, retryMs = RELEASE_RETRY_MS) {
    this.#claims = claims;
    this.#retryMs = retryMs;
  }

  /** Marks the claim released; when that cannot be stored, remembers the run and rejects. */
  async release(key: ClaimKey, runId: string): Promise<void> {
    try {
      await this.#claims.release(key, runId);
    } catch (error) {
      this.#runs.set(runId, { scope: key.scope, id: key.id });
      if (!this.#stopped) this.#timer ??= setInterval(() => this.#retryAll(), this.#retryMs).unref();
      throw error;
    }
  }

  /** True for a run given up here whose release is not stored yet; tries to store it now. */
  givenUp(runId: string): boolean {
    const key = this.#runs.get(runId);
    if (key === undefined) return false;
    this.#retry(runId, key);
    return true;
  }

  /** Stops retrying (the store is closing); the runs stay unresolved, as their owner is gone then. */
  stop(): void {
    this.#stopped = true;
    this.#pause();
  }

  #pause(): void {
    clearInterval(this.#timer);
    this.#timer = undefined;
  }

  #retryAll(): void {
    for (const [runId, key] of this.#runs) this.#retry(runId, key);
  }

  #retry(runId: string, key: ClaimKey): void {
    if (this.#trying.has(runId)) return;
    this.#trying.add(runId);
    this.#claims
      .release(key, runId)
      .then(
        () => {
          this.#runs.delete(runId);
          if (this.#runs.size === 0) this.#pause();
        },
        () => undefined, // still no room: the next sighting or tick tries again
      )
      .finally(() => this.#trying.delete(runId));
  }
}
