/**
 * Appends one run's journal (DESIGN.md "Journal"). Each append is validated, ordered, signed and
 * handed to the store, and resolves only once the store reports the line durable.
 *
 * Order is fixed when `append` is called: the entry is built and signed synchronously, so a caller
 * may issue the next append before the previous one resolves and the chain still follows call
 * order — and signing the next entry overlaps the previous fdatasync. The store receives lines in
 * that order, must write them in that order and must refuse every line after a failed one (the
 * embedded store does, and shares one fdatasync among lines that queue up meanwhile). Nothing here
 * is process-global: writers of different runs proceed concurrently.
 */
import { ConflictError, LimitError, StorageError, ValidationError, isWardenError } from "../core/errors.js";
import { canonicalJson } from "../core/canonical.js";
import { DigestStream, type Digest } from "../core/digest.js";
import { resolveLimits, type Limits } from "../core/limits.js";
import { RunLifecycle } from "./lifecycle.js";
import { encodeValidatedLine, lineHash } from "./line.js";
import { isUuid, journalTimestamp, validateEntry } from "./schema.js";
import {
  JOURNAL_VERSION,
  ZERO_HASH,
  type JournalAppender,
  type JournalEntry,
  type JournalEvent,
  type JournalStore,
  type SigningKey,
} from "./types.js";

export interface JournalWriterOptions {
  store: JournalStore;
  key: SigningKey;
  runId: string;
  limits?: Limits;
  now?: () => Date;
}

export interface AppendResult {
  entry: JournalEntry;
  line: Buffer;
  /** lowercase hex sha256 of `line`: the journal's tail hash once it is durable */
  hash: string;
}

/**
 * Bytes kept free below the journal limit for everything but run.terminated, so a run that fills
 * its journal can still close it; a run.terminated line is a few hundred bytes.
 */
export const TERMINATION_RESERVE_BYTES = 2048;

/** Drops top-level fields set to undefined: TypeScript callers write optional fields that way. */
function withoutUndefined(event: JournalEvent): JournalEvent {
  if (typeof event !== "object" || event === null) return event;
  const values = Object.values(event) as unknown[];
  if (!values.includes(undefined)) return event;
  return Object.fromEntries(Object.entries(event).filter(([, v]) => v !== undefined)) as unknown as JournalEvent;
}

export class JournalWriter {
  readonly runId: string;
  readonly #appender: JournalAppender;
  readonly #key: SigningKey;
  readonly #limits: Limits;
  readonly #now: () => Date;
  /** Order state, advanced when an append is accepted. */
  readonly #lifecycle = new RunLifecycle();
  #acceptedSeq = 0;
  #acceptedHash = ZERO_HASH;
  #acceptedBytes: number;
  /** Durable state, advanced when the store confirms a line. */
  #durableSeq = 0;
  #durableHash = ZERO_HASH;
  #durableBytes: number;
  /**
   * sha256 over every durable line in append order, and their entries: a reader can tell whether
   * the journal it reads back is exactly what this writer made durable without re-verifying it.
   */
  readonly #durableDigest = new DigestStream();
  readonly #durableEntries: JournalEntry[] = [];
  #terminated = false;
  #failure: unknown = undefined;
  #closed = false;
  /** Settles when the last accepted line is durable (or failed). */
  #tail: Promise<void> = Promise.resolve();

  private constructor(opts: JournalWriterOptions, appender: JournalAppender) {
    this.runId = opts.runId;
    this.#appender = appender;
    this.#key = opts.key;
    this.#limits = opts.limits ?? resolveLimits();
    this.#now = opts.now ?? (() => new Date());
    this.#acceptedBytes = appender.size;
    this.#durableBytes = appender.size;
  }

  /** Creates the run's journal in `store`; fails if one exists for runId. */
  static async create(opts: JournalWriterOptions): Promise<JournalWriter> {
    if (!isUuid(opts.runId)) throw new ValidationError("journal-bad-run-id", "run_id must be a UUID");
    const appender = await opts.store.create(opts.runId);
    return new JournalWriter(opts, appender);
  }

  get nextSeq(): number {
    return this.#durableSeq;
  }
  get tailHash(): string {
    return this.#durableHash;
  }
  get size(): number {
    return this.#durableBytes;
  }
  /**
   * sha256 of the lines this writer made durable, in order: the sha256 of the whole journal when
   * its bytes are exactly those (the journal starts empty at create).
   */
  get digest(): Digest {
    return this.#durableDigest.copy().digest();
  }
  /** The entries this writer made durable, in order. */
  entries(): readonly JournalEntry[] {
    return this.#durableEntries.slice();
  }
  get terminated(): boolean {
    return this.#terminated;
  }
  get failed(): boolean {
    return this.#failure !== undefined;
  }

  /**
   * Appends `event`; resolves once its line is durable. Refusals (typed errors) write nothing and
   * leave the writer usable; a store failure poisons it, and every later append is refused.
   */
  append(event: JournalEvent): Promise<AppendResult> {
    let accepted: AppendResult;
    try {
      accepted = this.#accept(event);
    } catch (error) {
      return Promise.reject(error);
    }
    // Handed over at once, in call order: the store writes lines in that order and refuses every
    // line after a failed one, and may cover several with one fdatasync.
    let handed: Promise<void>;
    try {
      handed = this.#appender.append(accepted.line);
    } catch (error) {
      handed = Promise.reject(error);
    }
    const durable = handed.then(
      () => this.#confirm(accepted),
      (error: unknown) => this.#fail(accepted, error),
    );
    this.#tail = durable.then(
      () => undefined,
      () => undefined,
    );
    return durable;
  }

  /** Validates, orders and signs; advances the accepted state. Throws on refusal, changing nothing. */
  #accept(input: JournalEvent): AppendResult {
    if (this.#failure !== undefined) {
      throw new StorageError("journal-writer-failed", `journal of run ${this.runId} failed earlier; it takes no more entries`, {
        cause: this.#failure,
      });
    }
    if (this.#closed) throw new ConflictError("journal-writer-closed", `journal writer of run ${this.runId} is closed`);
    const event = withoutUndefined(input);
    const canonicalEvent = canonicalJson(event);
    const entry = validateEntry(
      {
        v: JOURNAL_VERSION,
        run_id: this.runId,
        seq: this.#acceptedSeq,
        prev: this.#acceptedHash,
        ts: journalTimestamp(this.#now()),
        key_id: this.#key.key_id,
        event,
      },
      this.#limits,
      Buffer.byteLength(canonicalEvent),
    );
    const violation = this.#lifecycle.check(entry.event);
    if (violation !== undefined) throw new ConflictError(violation.code, violation.reason);
    const line = encodeValidatedLine(entry, this.#key, canonicalEvent);
    if (line.byteLength > this.#limits.journalEntryBytes) {
      throw new LimitError("journal-entry-too-large", `entry is ${line.byteLength} bytes, over the limit of ${this.#limits.journalEntryBytes}`);
    }
    const reserve = entry.event.type === "run.terminated" ? 0 : TERMINATION_RESERVE_BYTES;
    if (this.#acceptedBytes + line.byteLength + reserve > this.#limits.journalBytes) {
      throw new LimitError("journal-too-large", `journal of run ${this.runId} would exceed ${this.#limits.journalBytes} bytes`);
    }
    const hash = lineHash(line);
    this.#lifecycle.apply(entry.event, entry.seq);
    this.#acceptedSeq++;
    this.#acceptedHash = hash;
    this.#acceptedBytes += line.byteLength;
    return { entry, line, hash };
  }

  #confirm(accepted: AppendResult): AppendResult {
    this.#durableSeq = accepted.entry.seq + 1;
    this.#durableHash = accepted.hash;
    this.#durableBytes += accepted.line.byteLength;
    this.#durableDigest.update(accepted.line);
    this.#durableEntries.push(accepted.entry);
    if (accepted.entry.event.type === "run.terminated") this.#terminated = true;
    return accepted;
  }

  #fail(accepted: AppendResult, error: unknown): never {
    if (this.#failure !== undefined) {
      throw new StorageError("journal-writer-failed", `an earlier entry of run ${this.runId} failed; entry ${accepted.entry.seq} is not durable`, {
        cause: error,
      });
    }
    this.#failure = error;
    if (isWardenError(error)) throw error;
    throw new StorageError("journal-append-failed", `journal of run ${this.runId}: append failed`, { cause: error });
  }

  /** Waits for accepted appends to settle, then closes the store's file. Later appends are refused. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    await this.#tail;
    await this.#appender.close();
  }
}
