/**
 * A JournalStore decorator that tells listeners when a run's journal grew or closed, so the
 * server can stream journal entries as they are appended (SSE) without polling the disk, and
 * count appends for /metrics. It never changes what is stored: every call goes to the inner store,
 * and listeners hear of an append only after the inner store made it durable.
 */
import type { AppendOptions, JournalAppender, JournalDigest, JournalStore } from "../journal/types.js";

export type JournalSignal = "appended" | "closed";
export type JournalListener = (signal: JournalSignal) => void;

export class JournalTap implements JournalStore {
  readonly #inner: JournalStore;
  readonly #listeners = new Map<string, Set<JournalListener>>();
  /** runs with an appender open in this process */
  readonly #live = new Set<string>();
  #appends = 0;

  readonly digest?: (runId: string, maxBytes: number) => Promise<JournalDigest | undefined>;

  readonly reopen?: (runId: string) => Promise<JournalAppender>;

  constructor(inner: JournalStore) {
    this.#inner = inner;
    if (inner.digest !== undefined) this.digest = inner.digest.bind(inner);
    if (inner.reopen !== undefined) {
      const reopen = inner.reopen.bind(inner);
      this.reopen = async (runId) => this.#tapped(runId, await reopen(runId));
    }
  }

  /** Durable appends seen since start. */
  get appends(): number {
    return this.#appends;
  }

  /** True while this process holds the run's journal open for appending. */
  isLive(runId: string): boolean {
    return this.#live.has(runId);
  }

  /** Subscribes to a run's journal; returns the unsubscribe function. */
  subscribe(runId: string, listener: JournalListener): () => void {
    let set = this.#listeners.get(runId);
    if (set === undefined) {
      set = new Set();
      this.#listeners.set(runId, set);
    }
    set.add(listener);
    return () => {
      const current = this.#listeners.get(runId);
      if (current === undefined) return;
      current.delete(listener);
      if (current.size === 0) this.#listeners.delete(runId);
    };
  }

  async create(runId: string): Promise<JournalAppender> {
    return this.#tapped(runId, await this.#inner.create(runId));
  }

  #tapped(runId: string, appender: JournalAppender): JournalAppender {
    this.#live.add(runId);
    const tap = this;
    let closed = false;
    const tapped: JournalAppender = {
      get size(): number {
        return appender.size;
      },
      // The options go through: a line the writer leaves unsynced (its durability comes with the
      // run's next synced line) must not cost an fsync here. Listeners hear of it once written.
      async append(line: Uint8Array, options?: AppendOptions): Promise<void> {
        await appender.append(line, options);
        tap.#appends++;
        tap.#emit(runId, "appended");
      },
      async close(): Promise<void> {
        try {
          await appender.close();
        } finally {
          if (!closed) {
            closed = true;
            tap.#live.delete(runId);
            tap.#emit(runId, "closed");
          }
        }
      },
    };
    if (appender.read !== undefined) tapped.read = (maxBytes) => appender.read!(maxBytes);
    return tapped;
  }

  read(runId: string, maxBytes: number): Promise<Uint8Array | undefined> {
    return this.#inner.read(runId, maxBytes);
  }

  readFrom(runId: string, offset: number, maxBytes: number): Promise<Uint8Array | undefined> {
    return this.#inner.readFrom(runId, offset, maxBytes);
  }

  exists(runId: string): Promise<boolean> {
    return this.#inner.exists(runId);
  }

  #emit(runId: string, signal: JournalSignal): void {
    const set = this.#listeners.get(runId);
    if (set === undefined) return;
    for (const listener of [...set]) {
      try {
        listener(signal);
      } catch {
        // A listener's failure is its own (a closed client stream); the run goes on.
      }
    }
  }
}
