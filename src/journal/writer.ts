/**
 * Appends one run's journal (DESIGN.md "Journal"). Each append is validated, ordered, signed and
 * handed to the store, and resolves only once the store reports the line durable.
 *
 * Order is fixed when `append` is called: the entry is validated, numbered and bounded
 * synchronously (refusals are immediate), then signed as soon as the previous line's hash is known
 * — off the event loop when the key offers `signAsync` — so a caller may issue the next append
 * before the previous one resolves and the chain still follows call order, and signing the next
 * entry overlaps the previous fdatasync. The store receives lines in
 * that order, must write them in that order and must refuse every line after a failed one (the
 * embedded store does, and shares one fdatasync among lines that queue up meanwhile). Nothing here
 * is process-global: writers of different runs proceed concurrently.
 *
 * An append with `sync: false` resolves once its line is written; it becomes durable with the next
 * synced append or with `close`. The writer's durable state (nextSeq, tailHash, size, digest,
 * entries) only ever counts lines a sync covered.
 */
import { ConflictError, IntegrityError, LimitError, StorageError, ValidationError, isWardenError } from "../core/errors.js";
import { canonicalEvent as canonicalEventOf } from "./canonical-entry.js";
import { DigestStream, type Digest } from "../core/digest.js";
import { resolveLimits, type Limits } from "../core/limits.js";
import { RunLifecycle } from "./lifecycle.js";
import { LINE_OVERHEAD_BYTES, canonicalEntry, lineHash, signedLine, signingMessage } from "./line.js";
import { isUuid, journalTimestamp, validateEntry } from "./schema.js";
import {
  JOURNAL_VERSION,
  ZERO_HASH,
  type AppendOptions,
  type JournalAppender,
  type JournalEntry,
  type JournalEvent,
  type JournalStore,
  type SigningKey,
} from "./types.js";
import type { VerifyReport } from "./verify.js";

export interface JournalWriterOptions {
  store: JournalStore;
  key: SigningKey;
  runId: string;
  limits?: Limits;
  now?: () => Date;
}

/**
 * An accepted entry awaiting its `prev` and signature: its canonical form, built once, around the
 * place the 64 hex characters of `prev` go.
 */
interface Prepared {
  readonly entry: JournalEntry;
  /** the canonical entry up to `prev`'s value, and after it */
  readonly beforePrev: string;
  readonly afterPrev: string;
  readonly lineBytes: number;
}

/**
 * `"prev"` as the envelope's canonical form writes it. Every `"` inside a JSON string is escaped,
 * so `,"prev":"` occurs nowhere in a canonical entry but at the key itself; searched from the end
 * of the event, the first match is it.
 */
const PREV_FIELD = ',"prev":"';

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
  readonly #store: JournalStore;
  readonly #appender: JournalAppender;
  readonly #key: SigningKey;
  readonly #limits: Limits;
  readonly #now: () => Date;
  /** Order state, advanced when an append is accepted. */
  readonly #lifecycle = new RunLifecycle();
  #acceptedSeq = 0;
  #acceptedBytes: number;
  /** The hash of the last line signed (and handed to the store): the next line's `prev`. */
  #signedTail: Promise<string> = Promise.resolve(ZERO_HASH);
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
  /** Lines the store wrote without a sync yet, in order: durable with the next sync. */
  #unsynced: AppendResult[] = [];
  #terminated = false;
  #failure: unknown = undefined;
  #closed = false;
  /** Settles when the last accepted line is durable (or failed). */
  #tail: Promise<void> = Promise.resolve();

  private constructor(opts: JournalWriterOptions, appender: JournalAppender) {
    this.runId = opts.runId;
    this.#store = opts.store;
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

  /**
   * Takes up a parked run's journal again (DESIGN.md "Governed tool calls"): `report` is the
   * caller's verification of the journal's whole bytes as the store holds them now, which must be
   * clean; the next line chains onto its last one. Refused by a store that cannot append again.
   */
  static async reopen(opts: JournalWriterOptions, report: VerifyReport, bytes: number): Promise<JournalWriter> {
    if (!isUuid(opts.runId)) throw new ValidationError("journal-bad-run-id", "run_id must be a UUID");
    if (!report.ok || report.incomplete_tail) throw new IntegrityError("journal-not-clean", `journal of run ${opts.runId} does not verify; it is not appended to`, { status: 409 });
    if (opts.store.reopen === undefined) throw new ConflictError("journal-reopen-unsupported", "this journal store cannot append to a run's journal again");
    const appender = await opts.store.reopen(opts.runId);
    if (appender.size !== bytes) {
      await appender.close().catch(() => undefined);
      throw new ConflictError("journal-reopen-changed", `journal of run ${opts.runId} changed while it was taken up again`);
    }
    const writer = new JournalWriter(opts, appender);
    for (const entry of report.valid) {
      const violation = writer.#lifecycle.check(entry.event);
      if (violation !== undefined) {
        await appender.close().catch(() => undefined);
        throw new IntegrityError(violation.code, violation.reason, { status: 409 });
      }
      writer.#lifecycle.apply(entry.event, entry.seq);
    }
    writer.#acceptedSeq = report.entries;
    writer.#durableSeq = report.entries;
    writer.#durableHash = report.tail_hash;
    writer.#signedTail = Promise.resolve(report.tail_hash);
    return writer;
  }

  get nextSeq(): number {
    return this.#durableSeq;
  }
  /** Entries the store has written, synced or not: durable ones plus those awaiting a sync. */
  get writtenSeq(): number {
    return this.#durableSeq + this.#unsynced.length;
  }
  /** The tail hash once every written line is durable. */
  get writtenHash(): string {
    return this.#unsynced.at(-1)?.hash ?? this.#durableHash;
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
   * Appends `event`; resolves once its line is durable (with `sync: false`, once it is written:
   * durable with the next synced append or `close`). Refusals (typed errors) write nothing and
   * leave the writer usable; a store failure poisons it, and every later append is refused.
   */
  append(event: JournalEvent, options: AppendOptions = {}): Promise<AppendResult> {
    let prepared: Prepared;
    try {
      prepared = this.#accept(event);
    } catch (error) {
      return Promise.reject(error);
    }
    const sync = options.sync !== false;
    // Each line is signed once the previous one's hash (its `prev`) is known, and handed to the
    // store in the same step: the store receives lines in call order, writes them in that order,
    // refuses every line after a failed one, and may cover several with one fdatasync.
    const step = this.#signedTail.then(async (prev) => {
      const accepted = await this.#sign(prepared, prev);
      let handed: Promise<void>;
      try {
        handed = this.#appender.append(accepted.line, { sync });
      } catch (error) {
        handed = Promise.reject(error);
      }
      return { accepted, handed };
    });
    this.#signedTail = step.then(({ accepted }) => accepted.hash);
    this.#signedTail.catch(() => undefined); // a failed step is reported by its own append
    const durable = step.then(
      ({ accepted, handed }) =>
        handed.then(
          () => this.#confirm(accepted, sync),
          (error: unknown) => this.#fail(accepted.entry.seq, error),
        ),
      (error: unknown) => this.#fail(prepared.entry.seq, error),
    );
    this.#tail = durable.then(
      () => undefined,
      () => undefined,
    );
    return durable;
  }

  /**
   * Validates and orders an entry and bounds its line; advances the accepted state. Throws on
   * refusal, changing nothing. The line's length does not depend on `prev` (always 64 hex) or on
   * the signature (always 88 base64 characters), so every bound is checked before signing.
   */
  #accept(input: JournalEvent): Prepared {
    if (this.#failure !== undefined) {
      throw new StorageError("journal-writer-failed", `journal of run ${this.runId} failed earlier; it takes no more entries`, {
        cause: this.#failure,
      });
    }
    if (this.#closed) throw new ConflictError("journal-writer-closed", `journal writer of run ${this.runId} is closed`);
    const event = withoutUndefined(input);
    const canonicalEvent = canonicalEventOf(event);
    const entry = validateEntry(
      {
        v: JOURNAL_VERSION,
        run_id: this.runId,
        seq: this.#acceptedSeq,
        prev: ZERO_HASH, // the real one is filled in once the previous line is signed
        ts: journalTimestamp(this.#now()),
        key_id: this.#key.key_id,
        event,
      },
      this.#limits,
      Buffer.byteLength(canonicalEvent),
    );
    const violation = this.#lifecycle.check(entry.event);
    if (violation !== undefined) throw new ConflictError(violation.code, violation.reason);
    // Canonicalized once, with a placeholder `prev`: the real one (always 64 hex characters) takes
    // its place at signing, so the line's length is known now and nothing is serialized twice.
    const canonical = canonicalEntry(entry, canonicalEvent);
    const prevAt = canonical.indexOf(PREV_FIELD, '{"event":'.length + canonicalEvent.length) + PREV_FIELD.length;
    if (prevAt < PREV_FIELD.length || canonical.slice(prevAt, prevAt + ZERO_HASH.length) !== ZERO_HASH) {
      throw new IntegrityError("journal-line-length", `entry ${entry.seq} of run ${this.runId} has no prev field where the format puts it`, { status: 500 });
    }
    const lineBytes = Buffer.byteLength(canonical) + LINE_OVERHEAD_BYTES;
    if (lineBytes > this.#limits.journalEntryBytes) {
      throw new LimitError("journal-entry-too-large", `entry is ${lineBytes} bytes, over the limit of ${this.#limits.journalEntryBytes}`);
    }
    const reserve = entry.event.type === "run.terminated" ? 0 : TERMINATION_RESERVE_BYTES;
    if (this.#acceptedBytes + lineBytes + reserve > this.#limits.journalBytes) {
      throw new LimitError("journal-too-large", `journal of run ${this.runId} would exceed ${this.#limits.journalBytes} bytes`);
    }
    this.#lifecycle.apply(entry.event, entry.seq);
    this.#acceptedSeq++;
    this.#acceptedBytes += lineBytes;
    return { entry, beforePrev: canonical.slice(0, prevAt), afterPrev: canonical.slice(prevAt + ZERO_HASH.length), lineBytes };
  }

  /** Signs an accepted entry chained onto `prev` (off the event loop when the key can). */
  async #sign(prepared: Prepared, prev: string): Promise<AppendResult> {
    const entry: JournalEntry = { ...prepared.entry, prev };
    const canonical = prepared.beforePrev + prev + prepared.afterPrev;
    const message = signingMessage(canonical, prepared.lineBytes - LINE_OVERHEAD_BYTES);
    const signature = this.#key.signAsync === undefined ? this.#key.sign(message) : await this.#key.signAsync(message);
    const line = signedLine(canonical, signature);
    if (line.byteLength !== prepared.lineBytes) {
      throw new IntegrityError("journal-line-length", `line ${entry.seq} of run ${this.runId} came out ${line.byteLength} bytes, not ${prepared.lineBytes}`, {
        status: 500,
      });
    }
    return { entry, line, hash: lineHash(line) };
  }

  /** The store wrote `accepted` (after every earlier line); a sync also made all of them durable. */
  #confirm(accepted: AppendResult, synced: boolean): AppendResult {
    this.#unsynced.push(accepted);
    if (synced) this.#settle();
    return accepted;
  }

  /** Counts every written line as durable: a sync that began after they were written completed. */
  #settle(): void {
    for (const line of this.#unsynced) {
      this.#durableSeq = line.entry.seq + 1;
      this.#durableHash = line.hash;
      this.#durableBytes += line.line.byteLength;
      this.#durableDigest.update(line.line);
      this.#durableEntries.push(line.entry);
      if (line.entry.event.type === "run.terminated") this.#terminated = true;
    }
    this.#unsynced = [];
  }

  #fail(seq: number, error: unknown): never {
    if (this.#failure !== undefined) {
      throw new StorageError("journal-writer-failed", `an earlier entry of run ${this.runId} failed; entry ${seq} is not durable`, {
        cause: error,
      });
    }
    this.#failure = error;
    if (isWardenError(error)) throw error;
    throw new StorageError("journal-append-failed", `journal of run ${this.runId}: append failed`, { cause: error });
  }

  /**
   * The run's journal as its store reads it now (through the open appender when the store offers
   * that), refusing more than `maxBytes`; undefined when it is gone.
   */
  readBack(maxBytes: number): Promise<Uint8Array | undefined> {
    if (!this.#closed && this.#appender.read !== undefined) return this.#appender.read(maxBytes);
    return this.#store.read(this.runId, maxBytes);
  }

  /**
   * Closes and removes the journal of a run that never started (its claim went to another
   * caller): only a journal no line was accepted into. Later appends are refused.
   */
  async discard(): Promise<void> {
    if (this.#acceptedSeq !== 0) throw new ConflictError("journal-not-empty", `journal of run ${this.runId} has entries; it is closed, never discarded`);
    if (this.#closed) return;
    this.#closed = true;
    await (this.#appender.discard ?? this.#appender.close).call(this.#appender);
  }

  /**
   * Waits for accepted appends to settle, then closes the store's file, which makes every written
   * line durable. Later appends are refused.
   */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    await this.#tail;
    try {
      await this.#appender.close();
    } catch (error) {
      this.#failure ??= error;
      throw error;
    }
    if (this.#failure === undefined) this.#settle();
  }
}
