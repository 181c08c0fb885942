/**
 * Journals of the embedded backend: one private append-only file per run, `<dir>/<run_id>.ndjson`
 * (0600 in a 0700 directory). Each append writes the whole line and fdatasyncs before resolving.
 * Files of different runs have their own descriptors and queues, so their fdatasyncs run
 * concurrently in libuv's threadpool (the filesystem shares journal commits between them).
 */
import { writeSync } from "node:fs";
import * as fsp from "node:fs/promises";
import { join } from "node:path";
import { ConflictError, LimitError, StorageError, ValidationError, errnoCode, isWardenError } from "../../core/errors.js";
import { checkFileStats, createPrivateFile, ensurePrivateDirSync, readPrivateFile, syncDir } from "../../storage/secure-fs.js";
import { isUuid } from "../../journal/schema.js";
import type { JournalAppender, JournalStore } from "../../journal/types.js";

/** Fault-injection seams for tests: each runs before the named step and may throw or delay. */
export interface JournalStoreHooks {
  beforeWrite?(runId: string, line: Uint8Array): void | Promise<void>;
  beforeSync?(runId: string): void | Promise<void>;
}

export interface EmbeddedJournalStoreOptions {
  hooks?: JournalStoreHooks;
}

export const JOURNAL_FILE_SUFFIX = ".ndjson";

function assertRunId(runId: string): void {
  if (!isUuid(runId)) throw new ValidationError("journal-bad-run-id", `run_id ${JSON.stringify(runId)} is not a UUID`);
}

interface PendingLine {
  readonly line: Uint8Array;
  resolve(): void;
  reject(error: unknown): void;
}

/**
 * Appends lines in call order. Lines that arrive while an fdatasync is in flight are written
 * together and covered by the next single fdatasync (group commit); no append resolves before an
 * fdatasync that began after its bytes were written. After a failure every queued and later line is
 * refused, so nothing is ever written after a line that may be missing.
 */
class FileJournalAppender implements JournalAppender {
  readonly #fh: fsp.FileHandle;
  readonly #runId: string;
  readonly #hooks: JournalStoreHooks;
  #size = 0;
  #failure: unknown = undefined;
  #closed = false;
  #queue: PendingLine[] = [];
  /** Settles when the flush loop has drained the queue; undefined while idle. */
  #flushing: Promise<void> | undefined;

  constructor(fh: fsp.FileHandle, runId: string, hooks: JournalStoreHooks) {
    this.#fh = fh;
    this.#runId = runId;
    this.#hooks = hooks;
  }

  get size(): number {
    return this.#size;
  }

  append(line: Uint8Array): Promise<void> {
    if (this.#closed) return Promise.reject(new ConflictError("journal-closed", `journal of run ${this.#runId} is closed`));
    return new Promise<void>((resolve, reject) => {
      this.#queue.push({ line, resolve, reject });
      this.#flushing ??= this.#flush();
    });
  }

  async #flush(): Promise<void> {
    while (this.#queue.length > 0) {
      const batch = this.#queue;
      this.#queue = [];
      try {
        await this.#writeDurably(batch.map((p) => p.line));
        for (const p of batch) p.resolve();
      } catch (error) {
        for (const p of batch) p.reject(error);
      }
    }
    this.#flushing = undefined;
  }

  async #writeDurably(lines: Uint8Array[]): Promise<void> {
    if (this.#failure !== undefined) {
      throw new StorageError("journal-append-failed", `journal of run ${this.#runId} failed earlier`, { cause: this.#failure });
    }
    try {
      for (const line of lines) await this.#hooks.beforeWrite?.(this.#runId, line);
      const bytes = lines.length === 1 ? lines[0]! : Buffer.concat(lines);
      // A page-cache copy of a few lines: cheaper on the event loop than a threadpool round trip.
      // The fdatasync, which waits for the disk, runs in the threadpool.
      let written = 0;
      while (written < bytes.byteLength) written += writeSync(this.#fh.fd, bytes, written, bytes.byteLength - written);
      await this.#hooks.beforeSync?.(this.#runId);
      await this.#fh.datasync();
      this.#size += bytes.byteLength;
    } catch (error) {
      // The file may now end in a partial line: the verifier reports it as an incomplete tail.
      this.#failure = error;
      if (isWardenError(error)) throw error;
      throw new StorageError("journal-append-failed", `journal of run ${this.#runId}: ${errnoCode(error) ?? String(error)}`, {
        cause: error,
      });
    }
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    await this.#flushing;
    await this.#fh.close();
  }
}

export class EmbeddedJournalStore implements JournalStore {
  readonly dir: string;
  readonly #hooks: JournalStoreHooks;

  constructor(dir: string, options: EmbeddedJournalStoreOptions = {}) {
    ensurePrivateDirSync(dir, { create: true, recursive: true });
    this.dir = dir;
    this.#hooks = options.hooks ?? {};
  }

  pathOf(runId: string): string {
    assertRunId(runId);
    return join(this.dir, runId + JOURNAL_FILE_SUFFIX);
  }

  async create(runId: string): Promise<JournalAppender> {
    const path = this.pathOf(runId);
    let fh: fsp.FileHandle;
    try {
      fh = await createPrivateFile(path, "append");
    } catch (error) {
      if (errnoCode(error) === "EEXIST") throw new ConflictError("journal-exists", `a journal for run ${runId} exists`);
      throw error;
    }
    try {
      // The file's name must be durable before any line in it counts as written.
      await syncDir(this.dir);
    } catch (error) {
      await fh.close();
      throw new StorageError("journal-create-failed", `journal of run ${runId}: directory fsync failed`, { cause: error });
    }
    return new FileJournalAppender(fh, runId, this.#hooks);
  }

  async read(runId: string, maxBytes: number): Promise<Uint8Array | undefined> {
    const path = this.pathOf(runId);
    try {
      return await readPrivateFile(path, maxBytes);
    } catch (error) {
      if (errnoCode(error) === "ENOENT") return undefined;
      if (isWardenError(error) && error.code === "file-too-large") {
        throw new LimitError("journal-too-large", `journal of run ${runId} is over the limit of ${maxBytes} bytes`, { status: 500 });
      }
      throw error;
    }
  }

  async exists(runId: string): Promise<boolean> {
    const path = this.pathOf(runId);
    try {
      checkFileStats(path, await fsp.lstat(path));
      return true;
    } catch (error) {
      if (errnoCode(error) === "ENOENT") return false;
      throw error;
    }
  }
}
