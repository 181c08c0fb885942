/**
 * Per-key shared/exclusive async locks. Delivery operations are multi-step and async (a chunk is
 * written, synced, then recorded), so two requests on one stage or one blob must not interleave:
 * chunks of one blob are serialised, while a commit or abort waits for the chunks in flight on its
 * stage. Waiters are served first come, first served, so a writer is never starved by readers.
 */
interface Waiter {
  readonly exclusive: boolean;
  readonly grant: () => void;
}

interface Entry {
  readers: number;
  writer: boolean;
  readonly queue: Waiter[];
}

export class LockTable {
  readonly #entries = new Map<string, Entry>();

  async shared<T>(key: string, fn: () => Promise<T>): Promise<T> {
    return this.#with(key, false, fn);
  }

  async exclusive<T>(key: string, fn: () => Promise<T>): Promise<T> {
    return this.#with(key, true, fn);
  }

  async #with<T>(key: string, exclusive: boolean, fn: () => Promise<T>): Promise<T> {
    await this.#acquire(key, exclusive);
    try {
      return await fn();
    } finally {
      this.#release(key, exclusive);
    }
  }

  #acquire(key: string, exclusive: boolean): Promise<void> {
    let entry = this.#entries.get(key);
    if (entry === undefined) {
      entry = { readers: 0, writer: false, queue: [] };
      this.#entries.set(key, entry);
    }
    if (entry.queue.length === 0 && compatible(entry, exclusive)) {
      take(entry, exclusive);
      return Promise.resolve();
    }
    const queued = entry;
    return new Promise((resolve) => queued.queue.push({ exclusive, grant: resolve }));
  }

  #release(key: string, exclusive: boolean): void {
    const entry = this.#entries.get(key);
    if (entry === undefined) return;
    if (exclusive) entry.writer = false;
    else entry.readers--;
    while (entry.queue.length > 0 && compatible(entry, entry.queue[0]!.exclusive)) {
      const next = entry.queue.shift()!;
      take(entry, next.exclusive);
      next.grant();
    }
    if (entry.readers === 0 && !entry.writer && entry.queue.length === 0) this.#entries.delete(key);
  }
}

function compatible(entry: Entry, exclusive: boolean): boolean {
  return exclusive ? !entry.writer && entry.readers === 0 : !entry.writer;
}

function take(entry: Entry, exclusive: boolean): void {
  if (exclusive) entry.writer = true;
  else entry.readers++;
}
