/**
 * Journals of the postgres backend: one row per line, `(run_id, line_no)`, with the byte offset
 * where the line ends, so a read can refuse an over-limit journal without fetching it. A journal
 * exists once its `warden_journals` row does.
 *
 * Every create and append of every run on this node goes through one group commit: the lines
 * that arrive while a statement is in flight are inserted together by the next one, and an
 * append resolves only after the statement that inserted its line committed (synchronous_commit
 * is on). One statement is in flight at a time, so one run's lines commit in call order; after a
 * failure the run's appender refuses every later line, so a journal never has a line after a
 * missing one.
 */
import { ConflictError, LimitError, NotFoundError, StorageError, isWardenError } from "../../core/errors.js";
import { assertJournalOffset, assertJournalRunId } from "../../journal/schema.js";
import { sha256Digest } from "../../core/digest.js";
import type { JournalAppender, JournalDigest, JournalStore } from "../../journal/types.js";
import { Batcher, type Outcome } from "./batcher.js";
import { query, type PgPool } from "./connection.js";

type JournalWrite =
  | { readonly kind: "create"; readonly runId: string; readonly at: number }
  | { readonly kind: "line"; readonly appender: RowJournalAppender; readonly lineNo: number; readonly line: Buffer };

const WRITE_BATCH = `
  WITH created AS (
    INSERT INTO warden_journals (run_id, created_at)
    SELECT * FROM unnest($1::text[], $2::bigint[])
    ON CONFLICT (run_id) DO NOTHING
    RETURNING run_id
  ), lines AS (
    -- All lines travel as one binary parameter (no hex text), cut apart here.
    INSERT INTO warden_journal_lines (run_id, line_no, line)
    SELECT t.run_id, t.line_no, substring($5::bytea FROM t.start FOR t.len)
    FROM unnest($3::text[], $4::int[], $6::int[], $7::int[]) AS t(run_id, line_no, start, len)
  )
  SELECT COALESCE(array_agg(run_id), '{}') AS created FROM created`;

/**
 * The lines of each run that start at or before its bound and end after byte `from_byte`, each
 * with the byte offset where it ends, counted on the stored bytes themselves: at most the bound
 * plus one line travels, and a last end past the bound says the journal is longer than that (a
 * line appended right at the bound included; it travels whatever `from_byte` is, so that a read
 * from the end of a journal over its bound is refused as a whole read is).
 */
const READ_BATCH = `
  SELECT r.i, j.run_id IS NOT NULL AS present, s.line, s.end_at
  FROM unnest($1::text[], $2::bigint[], $3::bigint[]) WITH ORDINALITY AS r(run_id, max_bytes, from_byte, i)
  LEFT JOIN warden_journals j ON j.run_id = r.run_id
  LEFT JOIN LATERAL (
    SELECT w.line_no, w.line, w.end_at FROM (
      SELECT l.line_no, l.line, sum(octet_length(l.line)) OVER (ORDER BY l.line_no) AS end_at
      FROM warden_journal_lines l WHERE l.run_id = j.run_id
    ) w WHERE w.end_at - octet_length(w.line) <= r.max_bytes AND (w.end_at > r.from_byte OR w.end_at > r.max_bytes)
  ) s ON true
  ORDER BY r.i, s.line_no`;

/** Statements in flight at once (one run's lines are never in two: they commit in order). */
const WRITES_IN_FLIGHT = 3;
const READS_IN_FLIGHT = 3;

interface JournalRead {
  readonly runId: string;
  readonly maxBytes: number;
  /** byte offset the read starts at */
  readonly from: number;
}

/** A journal as read: whether it exists, its lines (those starting below the bound) and where the last ends. */
interface StoredJournal {
  readonly present: boolean;
  readonly bytes: Buffer | null;
  readonly end: number;
}

/** The bytes `read(runId, maxBytes)` answers for a stored journal, or journal-too-large. */
function journalOf(runId: string, maxBytes: number, stored: StoredJournal): Uint8Array | undefined {
  if (!stored.present) return undefined;
  if (stored.end > maxBytes) {
    throw new LimitError("journal-too-large", `journal of run ${runId} is over the limit of ${maxBytes} bytes`, { status: 500 });
  }
  return stored.bytes ?? Buffer.alloc(0);
}

/**
 * Digests of journals read in the same statement as their claims (a replay needs both): handed
 * from the claim store to the journal store for the `digest` that follows in the same event-loop
 * turn, then dropped. Nothing is cached across calls; a call that finds no entry goes to the
 * database.
 */
export class JournalPrefetch {
  readonly #entries = new Map<string, { readonly digest: JournalDigest | null; readonly maxBytes: number }>();
  #sweeping = false;

  /** `digest` null: the run has no journal. */
  offer(runId: string, maxBytes: number, digest: JournalDigest | null): void {
    this.#entries.set(runId, { digest, maxBytes });
    if (this.#sweeping) return;
    this.#sweeping = true;
    setImmediate(() => {
      this.#sweeping = false;
      this.#entries.clear();
    });
  }

  /** undefined: nothing prefetched for this call; null: prefetched, and the run has no journal. */
  take(runId: string, maxBytes: number): JournalDigest | null | undefined {
    const entry = this.#entries.get(runId);
    if (entry === undefined || entry.maxBytes !== maxBytes) return undefined;
    this.#entries.delete(runId);
    return entry.digest;
  }
}

class RowJournalAppender implements JournalAppender {
  readonly runId: string;
  readonly #writes: Batcher<JournalWrite, void>;
  /** lines accepted (submitted) so far */
  #lines = 0;
  #size = 0;
  #failure: unknown = undefined;
  #closed = false;
  #last: Promise<void> = Promise.resolve();

  /** `lines` and `size`: what the journal already holds (a parked run's, taken up again); 0 for a new one. */
  constructor(runId: string, writes: Batcher<JournalWrite, void>, lines = 0, size = 0) {
    this.runId = runId;
    this.#writes = writes;
    this.#lines = lines;
    this.#size = size;
  }

  get size(): number {
    return this.#size;
  }

  get failure(): unknown {
    return this.#failure;
  }

  fail(error: unknown): void {
    this.#failure ??= error;
  }

  append(line: Uint8Array): Promise<void> {
    if (this.#closed) return Promise.reject(new ConflictError("journal-closed", `journal of run ${this.runId} is closed`));
    if (this.#failure !== undefined) return Promise.reject(this.#failedEarlier());
    const bytes = Buffer.from(line);
    const write = this.#writes.submit({ kind: "line", appender: this, lineNo: this.#lines++, line: bytes });
    const done = write.then(
      () => {
        this.#size += bytes.byteLength;
      },
      (error: unknown) => {
        this.fail(error);
        throw error;
      },
    );
    this.#last = done.catch(() => undefined);
    return done;
  }

  #failedEarlier(): StorageError {
    return new StorageError("journal-append-failed", `journal of run ${this.runId} failed earlier`, { cause: this.#failure });
  }

  /** Refusal of a line queued behind a failed one of the same run. */
  refusal(): StorageError {
    return this.#failedEarlier();
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    await this.#last;
  }
}

export class PostgresJournalStore implements JournalStore {
  readonly #pool: PgPool;
  readonly #prefetch: JournalPrefetch;
  readonly #writes: Batcher<JournalWrite, void>;
  readonly #reads: Batcher<JournalRead, Uint8Array | undefined>;

  /** `prefetch` receives journals the claim store read together with their claims. */
  constructor(pool: PgPool, prefetch: JournalPrefetch) {
    this.#pool = pool;
    this.#prefetch = prefetch;
    this.#writes = new Batcher((items) => this.#writeBatch(items), {
      maxInFlight: WRITES_IN_FLIGHT,
      keyOf: (w) => (w.kind === "create" ? w.runId : w.appender.runId),
    });
    this.#reads = new Batcher((items) => this.#readBatch(items), { maxInFlight: READS_IN_FLIGHT, keyOf: (r) => r.runId });
  }

  /** Write statements sent so far. */
  get commits(): number {
    return this.#writes.batches;
  }

  /** Read statements sent so far (digests answered from a prefetch send none). */
  get reads(): number {
    return this.#reads.batches;
  }

  async create(runId: string): Promise<JournalAppender> {
    assertJournalRunId(runId);
    await this.#writes.submit({ kind: "create", runId, at: Date.now() });
    return new RowJournalAppender(runId, this.#writes);
  }

  /**
   * Takes up a parked run's journal again (DESIGN.md "Governed tool calls"): the next line is
   * numbered after the last stored one, so of two nodes that took the same journal up at once
   * only the first line written commits (the (run_id, line_no) key refuses the other, and that
   * appender refuses every later line): a journal never forks.
   */
  async reopen(runId: string): Promise<JournalAppender> {
    assertJournalRunId(runId);
    const result = await query<{ present: boolean; lines: string; bytes: string }>(this.#pool, "take up a journal", {
      name: "warden-journal-reopen",
      text:
        "SELECT EXISTS (SELECT 1 FROM warden_journals WHERE run_id = $1) AS present, COALESCE(max(line_no) + 1, 0)::text AS lines, " +
        "COALESCE(sum(octet_length(line)), 0)::text AS bytes FROM warden_journal_lines WHERE run_id = $1",
      values: [runId],
    });
    const row = result.rows[0];
    if (row?.present !== true) throw new NotFoundError("journal-not-found", `no journal for run ${runId}`);
    return new RowJournalAppender(runId, this.#writes, Number(row.lines), Number(row.bytes));
  }

  async read(runId: string, maxBytes: number): Promise<Uint8Array | undefined> {
    assertJournalRunId(runId);
    return this.#reads.submit({ runId, maxBytes, from: 0 });
  }

  async readFrom(runId: string, offset: number, maxBytes: number): Promise<Uint8Array | undefined> {
    assertJournalRunId(runId);
    assertJournalOffset(offset);
    return this.#reads.submit({ runId, maxBytes, from: offset });
  }

  /** From the claim read's prefetch when there is one (no statement), else from the bytes. */
  async digest(runId: string, maxBytes: number): Promise<JournalDigest | undefined> {
    assertJournalRunId(runId);
    const prefetched = this.#prefetch.take(runId, maxBytes);
    if (prefetched !== undefined) return prefetched ?? undefined;
    const bytes = await this.#reads.submit({ runId, maxBytes, from: 0 });
    return bytes === undefined ? undefined : { bytes: bytes.byteLength, sha256: sha256Digest(bytes), tail: bytes };
  }

  async exists(runId: string): Promise<boolean> {
    assertJournalRunId(runId);
    const result = await query(this.#pool, "find a journal", {
      name: "warden-journal-exists",
      text: "SELECT 1 FROM warden_journals WHERE run_id = $1",
      values: [runId],
    });
    return result.rows.length > 0;
  }

  /** Resolves once every queued write has committed or failed. */
  async settled(): Promise<void> {
    await Promise.all([this.#writes.settled(), this.#reads.settled()]);
  }

  async #readBatch(items: readonly JournalRead[]): Promise<Outcome<Uint8Array | undefined>[]> {
    const result = await query<{ i: number; present: boolean; line: Buffer | null; end_at: number | null }>(this.#pool, "read journals", {
      name: "warden-journal-read",
      text: READ_BATCH,
      values: [items.map((r) => r.runId), items.map((r) => r.maxBytes), items.map((r) => r.from)],
    });
    const found = items.map((): { present: boolean; lines: Buffer[]; end: number } => ({ present: false, lines: [], end: 0 }));
    for (const row of result.rows) {
      const entry = found[row.i - 1]!;
      entry.present = row.present;
      if (row.line !== null) {
        const end = Number(row.end_at);
        // The first line may start before the offset asked for: only its bytes from there on.
        const skip = entry.lines.length === 0 ? items[row.i - 1]!.from - (end - row.line.byteLength) : 0;
        entry.lines.push(skip > 0 ? row.line.subarray(skip) : row.line);
        entry.end = end;
      }
    }
    return items.map((r, i) => {
      const entry = found[i]!;
      const stored: StoredJournal = {
        present: entry.present,
        bytes: entry.lines.length === 0 ? null : entry.lines.length === 1 ? entry.lines[0]! : Buffer.concat(entry.lines),
        end: entry.end,
      };
      try {
        return { ok: true, value: journalOf(r.runId, r.maxBytes, stored) };
      } catch (error) {
        return { ok: false, error };
      }
    });
  }

  async #writeBatch(items: readonly JournalWrite[]): Promise<Outcome<void>[]> {
    const outcomes: (Outcome<void> | undefined)[] = items.map((w) =>
      // A line queued behind a failed line of its run is refused, never written after the gap.
      w.kind === "line" && w.appender.failure !== undefined ? { ok: false, error: w.appender.refusal() } : undefined,
    );
    const creates = items.filter((w, i) => w.kind === "create" && outcomes[i] === undefined) as Extract<JournalWrite, { kind: "create" }>[];
    const lines = items.filter((w, i) => w.kind === "line" && outcomes[i] === undefined) as Extract<JournalWrite, { kind: "line" }>[];
    let created: Set<string>;
    try {
      const result = await query<{ created: string[] }>(this.#pool, "append journal lines", {
        name: "warden-journal-write",
        text: WRITE_BATCH,
        values: [
          creates.map((c) => c.runId),
          creates.map((c) => c.at),
          lines.map((l) => l.appender.runId),
          lines.map((l) => l.lineNo),
          Buffer.concat(lines.map((l) => l.line)),
          startsOf(lines.map((l) => l.line.byteLength)),
          lines.map((l) => l.line.byteLength),
        ],
      });
      created = new Set(result.rows[0]?.created ?? []);
    } catch (error) {
      const failure = isWardenError(error) && error.code !== "database-error" ? error : asAppendFailure(error);
      for (const l of lines) l.appender.fail(failure);
      throw failure;
    }
    return items.map((w, i) => {
      const refused = outcomes[i];
      if (refused !== undefined) return refused;
      if (w.kind === "create" && !created.has(w.runId)) {
        return { ok: false, error: new ConflictError("journal-exists", `a journal for run ${w.runId} exists`) };
      }
      return { ok: true, value: undefined };
    });
  }
}

/** 1-based start of each piece in their concatenation (SQL substring positions). */
function startsOf(lengths: readonly number[]): number[] {
  const starts: number[] = [];
  let at = 1;
  for (const n of lengths) {
    starts.push(at);
    at += n;
  }
  return starts;
}

function asAppendFailure(error: unknown): StorageError {
  return new StorageError("journal-append-failed", `journal append failed: ${error instanceof Error ? error.message : String(error)}`, {
    cause: error,
  });
}
