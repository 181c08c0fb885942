/**
 * Shared directory fsyncs. A new file's name is durable only once its directory is fsynced, and
 * one fsync of the directory covers every entry created before that fsync began. So callers that
 * create files at about the same time share one: `request()` after a create resolves once an
 * fsync that STARTED after the request has completed — the one starting now when none is in
 * flight, otherwise the next one, which starts when the current one ends and serves every request
 * made meanwhile.
 */
import { closeSync, constants, fsync, openSync } from "node:fs";

const { O_RDONLY, O_DIRECTORY } = constants;

export interface DirSyncHooks {
  /** Fault-injection seam: runs before each directory fsync and may throw or delay. */
  beforeDirSync?(dir: string): void | Promise<void>;
}

export class SharedDirSync {
  readonly #dir: string;
  readonly #hooks: DirSyncHooks;
  #inFlight: Promise<void> | undefined;
  #queued: Promise<void> | undefined;
  #syncs = 0;

  constructor(dir: string, hooks: DirSyncHooks = {}) {
    this.#dir = dir;
    this.#hooks = hooks;
  }

  /** Directory fsyncs done so far (tests and benches check they are shared). */
  get syncs(): number {
    return this.#syncs;
  }

  /** Resolves once the directory was fsynced by an fsync that began after this call. */
  request(): Promise<void> {
    if (this.#queued !== undefined) return this.#queued;
    if (this.#inFlight === undefined) return this.#start();
    // The fsync in flight may have begun before the caller's create: wait for the next one.
    const queued = this.#inFlight.then(noop, noop).then(() => {
      this.#queued = undefined;
      return this.#start();
    });
    this.#queued = queued;
    return queued;
  }

  #start(): Promise<void> {
    const run = this.#fsync();
    this.#inFlight = run;
    const clear = (): void => {
      if (this.#inFlight === run) this.#inFlight = undefined;
    };
    run.then(clear, clear);
    return run;
  }

  async #fsync(): Promise<void> {
    await this.#hooks.beforeDirSync?.(this.#dir);
    const fd = openSync(this.#dir, O_RDONLY | O_DIRECTORY);
    try {
      await new Promise<void>((resolve, reject) => fsync(fd, (error) => (error === null ? resolve() : reject(error))));
      this.#syncs++;
    } finally {
      closeSync(fd);
    }
  }
}

function noop(): void {}
