/**
 * Captures one output stream of an agent process: every byte goes to a private file (0600,
 * create-new) and through a running sha256, a bounded tail is kept for the result, and complete
 * lines are handed to a callback for event parsing. Memory stays bounded whatever the agent
 * prints: the file write queue pauses the source, and a line longer than the bound is reported
 * as oversized instead of being buffered. A disk that refuses more bytes (full, over quota) ends
 * the file, not the capture: the digest and tail still take every byte, and the summary says how
 * much the file holds and why it stopped, as it does for the bound.
 */
import type { Readable } from "node:stream";
import type { FileHandle } from "node:fs/promises";
import { DigestStream, type Digest } from "../core/digest.js";
import { errnoCode } from "../core/errors.js";
import { createPrivateFile, openPrivateFile } from "../storage/secure-fs.js";

const HIGH_WATER = 1024 * 1024;

export interface CaptureSummary {
  /** of every byte the stream carried */
  readonly sha256: Digest;
  readonly bytes: number;
  /** bytes kept in the file: the first `maxFileBytes`, or fewer when the disk refused more */
  readonly stored_bytes: number;
  /** the errno code with which the disk refused more of the file (ENOSPC, EDQUOT, EFBIG) */
  readonly store_error?: string;
}

/**
 * Errors of a write that say the disk has no more room for this file: the agent's own output (or
 * the agent itself, writing into a workspace on the node's disk) can cause them, so they must not
 * cost the run its record. Anything else (EIO) still fails the capture.
 */
const CAPACITY_CODES = new Set(["ENOSPC", "EDQUOT", "EFBIG"]);

export interface CaptureOptions {
  readonly path: string;
  readonly tailBytes: number;
  readonly maxLineBytes: number;
  /** the file keeps the stream's first bytes up to this bound: an agent cannot fill the disk */
  readonly maxFileBytes: number;
  /** complete lines (without the newline); `oversized` when one exceeded maxLineBytes (dropped) */
  readonly onLine?: (line: string) => void;
  readonly onOversizedLine?: () => void;
  /** the file exists (a parked run's first leg wrote it): the resumed agent's output goes after it */
  readonly append?: boolean;
}

export class OutputCapture {
  readonly path: string;
  readonly #fh: FileHandle;
  readonly #hash = new DigestStream();
  readonly #options: CaptureOptions;
  #tail: Buffer = Buffer.alloc(0);
  #line: Buffer[] = [];
  #lineBytes = 0;
  #skippingLine = false;
  #queue: Promise<void> = Promise.resolve();
  #queued = 0;
  /** bytes handed to the file's write queue */
  #stored = 0;
  /** bytes the file took */
  #written = 0;
  #storeError: string | undefined;
  #error: unknown;

  private constructor(fh: FileHandle, options: CaptureOptions) {
    this.#fh = fh;
    this.path = options.path;
    this.#options = options;
  }

  static async create(options: CaptureOptions): Promise<OutputCapture> {
    if (options.append !== true) return new OutputCapture(await createPrivateFile(options.path, "append"), options);
    try {
      return new OutputCapture(await openPrivateFile(options.path, "append"), options);
    } catch (error) {
      // A run taken up on another node of a fleet: its first leg's output stays on the node that ran it.
      if (errnoCode(error) !== "ENOENT") throw error;
      return new OutputCapture(await createPrivateFile(options.path, "append"), options);
    }
  }

  /** Consumes `stream` until it ends. */
  attach(stream: Readable): Promise<void> {
    return new Promise((resolve, reject) => {
      stream.on("data", (chunk: Buffer) => {
        this.#take(chunk);
        if (this.#queued > HIGH_WATER) {
          stream.pause();
          void this.#queue.then(() => stream.resume());
        }
      });
      stream.on("end", resolve);
      // A destroyed stream closes without 'end'; either way nothing more will come.
      stream.on("close", resolve);
      stream.on("error", reject);
    });
  }

  #take(chunk: Buffer): void {
    this.#hash.update(chunk);
    const room = this.#storeError === undefined ? this.#options.maxFileBytes - this.#stored : 0;
    const kept = chunk.subarray(0, Math.max(0, room));
    this.#stored += kept.byteLength;
    if (kept.byteLength > 0) this.#store(kept);
    const tailBytes = this.#options.tailBytes;
    this.#tail = Buffer.concat([this.#tail, chunk]);
    if (this.#tail.byteLength > tailBytes) this.#tail = this.#tail.subarray(this.#tail.byteLength - tailBytes);
    if (this.#options.onLine !== undefined) this.#splitLines(chunk);
  }

  #store(bytes: Buffer): void {
    this.#queued += bytes.byteLength;
    this.#queue = this.#queue.then(async () => {
      try {
        // A regular file takes a write whole unless the disk is short of room: then the part
        // that fits, and the next write is refused.
        for (let at = 0; at < bytes.byteLength && this.#error === undefined && this.#storeError === undefined; ) {
          const { bytesWritten } = await this.#fh.write(bytes, at);
          // A write that takes nothing would be asked again forever: the file takes no more.
          if (bytesWritten === 0) this.#storeError = "ENOSPC";
          at += bytesWritten;
          this.#written += bytesWritten;
        }
      } catch (error) {
        const code = errnoCode(error);
        if (code !== undefined && CAPACITY_CODES.has(code)) this.#storeError = code;
        else this.#error = error;
      }
      this.#queued -= bytes.byteLength;
    });
  }

  #splitLines(chunk: Buffer): void {
    let start = 0;
    for (;;) {
      const nl = chunk.indexOf(0x0a, start);
      const piece = chunk.subarray(start, nl === -1 ? chunk.byteLength : nl);
      if (!this.#skippingLine) {
        this.#lineBytes += piece.byteLength;
        if (this.#lineBytes > this.#options.maxLineBytes) {
          this.#skippingLine = true;
          this.#line = [];
          this.#options.onOversizedLine?.();
        } else {
          this.#line.push(piece);
        }
      }
      if (nl === -1) return;
      if (!this.#skippingLine) this.#options.onLine?.(Buffer.concat(this.#line).toString("utf8"));
      this.#line = [];
      this.#lineBytes = 0;
      this.#skippingLine = false;
      start = nl + 1;
    }
  }

  /** Flushes the file durably and returns its digest; a last line without newline is delivered. */
  async finish(): Promise<CaptureSummary> {
    if (this.#line.length > 0 && !this.#skippingLine) this.#options.onLine?.(Buffer.concat(this.#line).toString("utf8"));
    this.#line = [];
    await this.#queue;
    try {
      if (this.#error !== undefined) throw this.#error;
      await this.#fh.sync();
    } finally {
      await this.#fh.close();
    }
    return { sha256: this.#hash.digest(), bytes: this.#hash.length, stored_bytes: this.#written, ...(this.#storeError === undefined ? {} : { store_error: this.#storeError }) };
  }

  /** The last `tailBytes` bytes, decoded as UTF-8 (a character cut at the start is replaced). */
  tail(): string {
    return this.#tail.toString("utf8");
  }
}
