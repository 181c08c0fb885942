/**
 * Journals of the embedded backend: one private append-only file per run, `<dir>/<run_id>.ndjson`
 * (0600 in a 0700 directory). Lines are written in call order; a synced append resolves after an
 * fdatasync that began after its bytes (and every earlier line's) were written. Files of different
 * runs have their own descriptors and queues, so their fdatasyncs run concurrently in libuv's
 * threadpool (the filesystem shares journal commits between them).
 *
 * Creating a file and closing it are single cheap syscalls done on the event loop; a new file's
 * name is made durable by a directory fsync shared with the files created around the same time
 * (dir-sync.ts), which the run's first synced append (or its close) waits for.
 */
import { closeSync, fdatasync, fstatSync, ftruncateSync, lstatSync, readSync, writeSync } from "node:fs";
import * as fsp from "node:fs/promises";
import { join } from "node:path";
import { ConflictError, LimitError, NotFoundError, StorageError, errnoCode, isWardenError } from "../../../core/errors.js";
import { checkFileStats, createPrivateFd, ensurePrivateDirSync, openPrivateFile, openPrivateFileSync, readPrivateFile } from "../../../storage/secure-fs.js";
import { assertJournalOffset, assertJournalRunId } from "../../../journal/schema.js";
import type { AppendOptions, JournalAppender, JournalStore } from "../../../journal/types.js";
import { SharedDirSync, type DirSyncHooks } from "./dir-sync.js";

/** Fault-injection seams for tests: each runs before the named step and may throw or delay. */
export interface JournalStoreHooks extends DirSyncHooks {
  beforeWrite?(runId: string, line: Uint8Array): void | Promise<void>;
  beforeSync?(runId: string): void | Promise<void>;
}

export interface EmbeddedJournalStoreOptions {
  hooks?: JournalStoreHooks;
}

export const JOURNAL_FILE_SUFFIX = ".ndjson";

interface PendingLine {
  readonly line: Uint8Array;
  readonly sync: boolean;
  resolve(): void;
  reject(error: unknown): void;
}

/** The store's meaning of a failed read: over its bound is journal-too-large; unsafe files are raised. */
function readFailure(runId: string, maxBytes: number, error: unknown): unknown {
  if (isWardenError(error) && error.code === "file-too-large") {
    return new LimitError("journal-too-large", `journal of run ${runId} is over the limit of ${maxBytes} bytes`, { status: 500 });
  }
  return error;
}

/** What an appender needs from its store. */
interface AppenderContext {
  readonly runId: string;
  readonly path: string;
  readonly hooks: JournalStoreHooks;
  /** settles once the file's name is durable */
  readonly nameDurable: Promise<void>;
  /** the store's own read of the run's journal, by path */
  readPath(maxBytes: number): Promise<Uint8Array | undefined>;
  /** bytes already in the file (a journal taken up again); 0 for a new one */
  readonly size?: number;
}

function datasync(fd: number): Promise<void> {
  return new Promise((resolve, reject) => fdatasync(fd, (error) => (error === null ? resolve() : reject(error))));
}

/**
 * Appends lines in call order. Lines that arrive while an fdatasync is in flight are written
 * together and covered by the next single fdatasync (group commit); no synced append resolves
 * before an fdatasync that began after its bytes were written, and unsynced lines ride on the next
 * one (or on close). After a failure every queued and later line is refused, so nothing is ever
 * written after a line that may be missing.
 */
class FileJournalAppender implements JournalAppender {
  readonly #fd: number;
  readonly #runId: string;
  readonly #path: string;
  readonly #hooks: JournalStoreHooks;
  readonly #readPath: (maxBytes: number) => Promise<Uint8Array | undefined>;
  /** Settles once the file's name is durable; undefined after a sync waited for it. */
  #nameDurable: Promise<void> | undefined;
  #size = 0;
  #written = 0;
  #failure: unknown = undefined;
  #closed = false;
  #queue: PendingLine[] = [];
  /** Settles when the flush loop has drained the queue; undefined while idle. */
  #flushing: Promise<void> | undefined;

  constructor(fd: number, ctx: AppenderContext) {
    this.#fd = fd;
    this.#runId = ctx.runId;
    this.#path = ctx.path;
    this.#hooks = ctx.hooks;
    this.#readPath = ctx.readPath;
    this.#nameDurable = ctx.nameDurable;
    this.#size = ctx.size ?? 0;
    this.#written = this.#size;
    // Awaited by the first sync; a failure before then must not surface as an unhandled rejection.
    ctx.nameDurable.catch(() => undefined);
  }

  get size(): number {
    return this.#size;
  }

  append(line: Uint8Array, options: AppendOptions = {}): Promise<void> {
    if (this.#closed) return Promise.reject(new ConflictError("journal-closed", `journal of run ${this.#runId} is closed`));
    return new Promise<void>((resolve, reject) => {
      this.#queue.push({ line, sync: options.sync !== false, resolve, reject });
      this.#flushing ??= this.#flush();
    });
  }

  async #flush(): Promise<void> {
    while (this.#queue.length > 0) {
      const batch = this.#queue;
      this.#queue = [];
      try {
        await this.#writeBatch(batch);
        for (const p of batch) p.resolve();
      } catch (error) {
        for (const p of batch) p.reject(error);
      }
    }
    this.#flushing = undefined;
  }

  async #writeBatch(batch: readonly PendingLine[]): Promise<void> {
    this.#assertHealthy();
    try {
      for (const p of batch) await this.#hooks.beforeWrite?.(this.#runId, p.line);
      const bytes = batch.length === 1 ? batch[0]!.line : Buffer.concat(batch.map((p) => p.line));
      // A page-cache copy of a few lines: cheaper on the event loop than a threadpool round trip.
      // The fdatasync, which waits for the disk, runs in the threadpool.
      let written = 0;
      try {
        while (written < bytes.byteLength) written += writeSync(this.#fd, bytes, written, bytes.byteLength - written);
      } catch (error) {
        if (written > 0) this.#cutBack();
        throw error;
      }
      this.#written += bytes.byteLength;
      if (batch.some((p) => p.sync)) await this.#sync();
    } catch (error) {
      throw this.#poison(error);
    }
  }

  /**
   * A disk short of room (full, over quota: an agent can fill the disk its workspace shares with
   * the node) takes part of a batch and refuses the rest. The file is cut back to its last whole
   * line, which needs no room, so the journal of a node that lives on ends where its record does
   * (not terminated: the run reads unresolved) instead of in a torn line, which only a crash may
   * leave. What was synced before is untouched: the cut is at or past the synced size.
   */
  #cutBack(): void {
    try {
      ftruncateSync(this.#fd, this.#written);
    } catch {
      // The torn line stays, as a crash would leave it: verification reports it.
    }
  }

  /** Makes every byte written so far, and the file's name, durable. */
  async #sync(): Promise<void> {
    await this.#hooks.beforeSync?.(this.#runId);
    const upTo = this.#written;
    const name = this.#nameDurable;
    await (name === undefined ? datasync(this.#fd) : Promise.all([datasync(this.#fd), name]));
    this.#nameDurable = undefined;
    this.#size = upTo;
  }

  #assertHealthy(): void {
    if (this.#failure !== undefined) {
      throw new StorageError("journal-append-failed", `journal of run ${this.#runId} failed earlier`, { cause: this.#failure });
    }
  }

  /** Records the first failure (the file may now end in a partial or unsynced line) and types it. */
  #poison(error: unknown): unknown {
    this.#failure ??= error;
    if (isWardenError(error)) return error;
    return new StorageError("journal-append-failed", `journal of run ${this.#runId}: ${errnoCode(error) ?? String(error)}`, { cause: error });
  }

  /**
   * The journal at the run's path, read through this descriptor when the path still names the
   * file it writes (three syscalls on the event loop instead of four threadpool round trips);
   * anything else (gone, replaced, closed) is read by path, with the store's own answers.
   */
  async read(maxBytes: number): Promise<Uint8Array | undefined> {
    if (this.#closed) return this.#readPath(maxBytes);
    let own;
    let named;
    try {
      own = fstatSync(this.#fd);
      named = lstatSync(this.#path);
    } catch {
      return this.#readPath(maxBytes);
    }
    if (own.ino !== named.ino || own.dev !== named.dev) return this.#readPath(maxBytes);
    try {
      checkFileStats(this.#path, own, maxBytes);
    } catch (error) {
      throw readFailure(this.#runId, maxBytes, error);
    }
    const bytes = Buffer.allocUnsafe(own.size);
    let filled = 0;
    while (filled < bytes.byteLength) {
      const n = readSync(this.#fd, bytes, filled, bytes.byteLength - filled, filled);
      if (n === 0) break;
      filled += n;
    }
    return filled === bytes.byteLength ? bytes : bytes.subarray(0, filled);
  }

  /**
   * Closes and unlinks a journal nothing was appended to. No fsync: a name that survives a crash
   * is an empty journal no claim names.
   */
  async discard(): Promise<void> {
    if (this.#closed) return;
    if (this.#written !== 0 || this.#queue.length > 0 || this.#flushing !== undefined) {
      throw new ConflictError("journal-not-empty", `journal of run ${this.#runId} has lines; it is closed, never discarded`);
    }
    this.#closed = true;
    closeSync(this.#fd);
    await fsp.unlink(this.#path).catch((error: unknown) => {
      if (errnoCode(error) !== "ENOENT") throw error;
    });
  }

  /** Waits for queued lines, makes every written line durable, and closes the file. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    await this.#flushing;
    try {
      if (this.#failure === undefined && (this.#written !== this.#size || this.#nameDurable !== undefined)) {
        try {
          await this.#sync();
        } catch (error) {
          throw this.#poison(error);
        }
      }
    } finally {
      closeSync(this.#fd);
    }
  }
}

export class EmbeddedJournalStore implements JournalStore {
  readonly dir: string;
  readonly #hooks: JournalStoreHooks;
  readonly #dirSync: SharedDirSync;

  constructor(dir: string, options: EmbeddedJournalStoreOptions = {}) {
    ensurePrivateDirSync(dir, { create: true, recursive: true });
    this.dir = dir;
    this.#hooks = options.hooks ?? {};
    this.#dirSync = new SharedDirSync(dir, this.#hooks);
  }

  /** Directory fsyncs so far: runs created around the same time share one. */
  get dirSyncs(): number {
    return this.#dirSync.syncs;
  }

  pathOf(runId: string): string {
    assertJournalRunId(runId);
    return join(this.dir, runId + JOURNAL_FILE_SUFFIX);
  }

  async create(runId: string): Promise<JournalAppender> {
    const path = this.pathOf(runId);
    let fd: number;
    try {
      // Created in the threadpool: a create joins the filesystem's journal, which can wait behind
      // the commits other runs' fdatasyncs force, and the event loop must not wait with it.
      fd = await createPrivateFd(path, "read-append");
    } catch (error) {
      if (errnoCode(error) === "EEXIST") throw new ConflictError("journal-exists", `a journal for run ${runId} exists`);
      throw error;
    }
    // The name must be durable before any line in it counts as written: the first sync waits for it.
    return new FileJournalAppender(fd, {
      runId,
      path,
      hooks: this.#hooks,
      nameDurable: this.#dirSync.request(),
      readPath: (maxBytes) => this.read(runId, maxBytes),
    });
  }

  /**
   * Takes up a parked run's journal again (DESIGN.md "Governed tool calls"): appends after its
   * last byte, which the caller has read and verified. The name is durable already.
   */
  async reopen(runId: string): Promise<JournalAppender> {
    const path = this.pathOf(runId);
    let fd: number;
    try {
      fd = openPrivateFileSync(path, "read-append");
    } catch (error) {
      if (errnoCode(error) === "ENOENT") throw new NotFoundError("journal-not-found", `no journal for run ${runId}`);
      throw error;
    }
    return new FileJournalAppender(fd, {
      runId,
      path,
      hooks: this.#hooks,
      nameDurable: Promise.resolve(),
      readPath: (maxBytes) => this.read(runId, maxBytes),
      size: fstatSync(fd).size,
    });
  }

  async read(runId: string, maxBytes: number): Promise<Uint8Array | undefined> {
    const path = this.pathOf(runId);
    try {
      return await readPrivateFile(path, maxBytes);
    } catch (error) {
      if (errnoCode(error) === "ENOENT") return undefined;
      throw readFailure(runId, maxBytes, error);
    }
  }

  async readFrom(runId: string, offset: number, maxBytes: number): Promise<Uint8Array | undefined> {
    assertJournalOffset(offset);
    let fh;
    try {
      fh = await openPrivateFile(this.pathOf(runId), "read", maxBytes);
    } catch (error) {
      if (errnoCode(error) === "ENOENT") return undefined;
      throw readFailure(runId, maxBytes, error);
    }
    try {
      // The size the open checked against maxBytes: lines appended since are read next time.
      const { size } = await fh.stat();
      const bytes = Buffer.allocUnsafe(Math.max(0, Math.min(size, maxBytes) - offset));
      let filled = 0;
      while (filled < bytes.byteLength) {
        const { bytesRead } = await fh.read(bytes, filled, bytes.byteLength - filled, offset + filled);
        if (bytesRead === 0) break;
        filled += bytesRead;
      }
      return filled === bytes.byteLength ? bytes : bytes.subarray(0, filled);
    } finally {
      await fh.close();
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
