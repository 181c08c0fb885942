/**
 * Result retention (G4, `limits.resultRetentionMs`) as a node applies it: at start and then every
 * hour, result payloads recorded before the retention period are dropped (identity and outcome
 * stay, so a late retry is answered `recorded` with `expired: true`, never re-run), and so are the
 * captured outputs (`<home>/outputs/<run>.stdout|.stderr`) last written before it. Without this,
 * the library's `prune` ran only when someone called it, and a node's disk grew with every run.
 * The queue's ended rows are pruned in the same pass, after their own period (`queue.retentionS`,
 * DESIGN.md "Queued invocations"), by the same rule: the identity stays, the bulk goes.
 */
import * as fs from "node:fs";
import { join } from "node:path";
import type { Invocations } from "../invocations/service.js";
import type { QueueStore } from "../invocations/queue-store.js";
import { RUN_ID_PATTERN } from "../journal/schema.js";

export const RETENTION_INTERVAL_MS = 60 * 60 * 1000;

/** What the runner names its captures: nothing else in the directory is touched. */
const OUTPUT_NAME_RE = new RegExp(`^${RUN_ID_PATTERN}\\.(stdout|stderr)$`);

export interface RetentionPass {
  readonly pruned: number;
  readonly outputsRemoved: number;
  /** queue rows removed (started, ended) and emptied (cancelled, expired, refused) */
  readonly queueRemoved: number;
  readonly queueEmptied: number;
  /** worktrees removed: kept for a recorded run whose change set failed, until its result was pruned */
  readonly worktreesRemoved: number;
}

/** The queue's part of a pass: its store and its own period. */
export interface QueueRetention {
  readonly store: Pick<QueueStore, "prune">;
  readonly retentionMs: number;
}

export class Retention {
  readonly #invocations: Pick<Invocations, "prune">;
  readonly #outputDir: string;
  readonly #retentionMs: number;
  readonly #queue: QueueRetention | undefined;
  readonly #worktrees: { sweep(): Promise<readonly string[]> } | undefined;
  #timer: NodeJS.Timeout | undefined;
  #pass: Promise<RetentionPass | undefined> | undefined;

  constructor(invocations: Pick<Invocations, "prune">, outputDir: string, retentionMs: number, queue?: QueueRetention, worktrees?: { sweep(): Promise<readonly string[]> }) {
    this.#invocations = invocations;
    this.#outputDir = outputDir;
    this.#retentionMs = retentionMs;
    this.#queue = queue;
    this.#worktrees = worktrees;
  }

  /** Runs a pass now (in the background) and every `intervalMs`. */
  start(intervalMs = RETENTION_INTERVAL_MS): void {
    void this.run();
    this.#timer = setInterval(() => void this.run(), intervalMs).unref();
  }

  /**
   * One pass, unless one is running (then that one). A pass that fails (storage unavailable) is
   * simply the next one's to do: it answers undefined.
   */
  run(): Promise<RetentionPass | undefined> {
    this.#pass ??= this.#once()
      .catch(() => undefined)
      .finally(() => (this.#pass = undefined));
    return this.#pass;
  }

  /** Stops the timer and waits for a pass under way: the stores close next. */
  async stop(): Promise<void> {
    clearInterval(this.#timer);
    this.#timer = undefined;
    await this.#pass;
  }

  async #once(): Promise<RetentionPass> {
    const now = Date.now();
    const cutoff = now - this.#retentionMs;
    const { pruned } = await this.#invocations.prune({ olderThan: new Date(cutoff) });
    let outputsRemoved = 0;
    for (const name of await fs.promises.readdir(this.#outputDir).catch(() => [] as string[])) {
      if (!OUTPUT_NAME_RE.test(name)) continue;
      const path = join(this.#outputDir, name);
      const st = await fs.promises.lstat(path).catch(() => undefined);
      if (st === undefined || !st.isFile() || st.mtimeMs >= cutoff) continue;
      await fs.promises.rm(path, { force: true });
      outputsRemoved++;
    }
    const queue = this.#queue === undefined ? { removed: 0, emptied: 0 } : await this.#queue.store.prune(now - this.#queue.retentionMs, now);
    // After the prune: a worktree kept for a result that is now gone is no one's any more.
    const worktreesRemoved = this.#worktrees === undefined ? 0 : (await this.#worktrees.sweep()).length;
    return { pruned, outputsRemoved, queueRemoved: queue.removed, queueEmptied: queue.emptied, worktreesRemoved };
  }
}
