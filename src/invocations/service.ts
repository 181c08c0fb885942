/**
 * Exactly-once invocations (G1–G4, G6, G11) over any ClaimStore, JournalStore and KeyStore.
 *
 * Reading a claim is where the guarantees are enforced: a row is trusted only when its claim hash
 * matches; a result is replayed only when its payload matches its hash and the journal still
 * matches the seal stored with it (a length and sha256 compare — never a second signature
 * verification); a receipt only when its signature verifies. Anything else is an IntegrityError
 * or `unresolved`: never a replay of wrong data, never `fresh`.
 */
import { randomUUID } from "node:crypto";
import { setImmediate as yieldToLoop } from "node:timers/promises";
import { canonicalJson, type JsonValue } from "../core/canonical.js";
import { sha256Digest, type Digest } from "../core/digest.js";
import { ConflictError, IntegrityError, LimitError, NotFoundError, ValidationError, isWardenError } from "../core/errors.js";
import { resolveLimits, type Limits } from "../core/limits.js";
import { journalTimestamp, validateEvent } from "../journal/schema.js";
import { ZERO_HASH, type JournalEvent, type JournalStore, type KeyStore, type PublicKeyRecord, type RunParkedEvent, type RunStartedEvent, type SigningKey } from "../journal/types.js";
import { verifyJournal, type Checkpoint, type VerifyReport } from "../journal/verify.js";
import { JournalWriter } from "../journal/writer.js";
import { claimHashOf } from "./claim-hash.js";
import { checkClaimIntegrity, ReplayChecks } from "./replay-checks.js";
import {
  isDamagedClaim,
  type ClaimKey,
  type ClaimListFilter,
  type ClaimState,
  type ClaimStore,
  type DamagedClaim,
  type JournalSeal,
  type ListedClaim,
} from "./claim-store.js";
import { InvocationHandle, UNSYNCED, type HandleContext, type OpenOutcome } from "./handle.js";
import type { RunCheck } from "./run-check.js";
import { sharedRunChecker, type RunChecker } from "./run-checker.js";
import { checkInvocationId, checkName, checkScope, requestHashOf } from "./identity.js";
import { parseReceipt, parseReview, sameSubmission, signReceipt, snapshotHashOf, verifyReceipt } from "./reconciliation.js";
import { UnreleasedRuns } from "./unreleased.js";
import type { Attest } from "../tlog/statements.js";
import { reconciliationStatement } from "./statements.js";
import type {
  Audit,
  ClaimSnapshot,
  ClaimSummary,
  ExistingOutcome,
  ExistingStatus,
  Inspection,
  JournalReport,
  ListPage,
  ListQuery,
  OpenOptions,
  PruneOptions,
  ReconcileResult,
  ReconciledOutcome,
  ReconciliationReceipt,
  RecordedOutcome,
  UnresolvedOutcome,
} from "./types.js";


export type { Attest } from "../tlog/statements.js";

/**
 * Asked before a parked run is taken up (its journal read and verified, its claim not yet
 * adopted): throws to refuse, leaving the run parked for a node that can go on with it.
 */
export type TakeUpCheck = (runId: string, parked: RunParkedEvent, events: readonly JournalEvent[]) => Promise<void>;

export interface InvocationsOptions {
  readonly claims: ClaimStore;
  readonly journals: JournalStore;
  readonly keys: KeyStore;
  readonly limits?: Limits;
  /** clock seam for tests */
  readonly now?: () => Date;
  /** where journals are verified; default: the process-wide worker pool */
  readonly checker?: RunChecker;
  /** how often a release that could not be stored is tried again (default RELEASE_RETRY_MS) */
  readonly releaseRetryMs?: number;
  /** told of each recorded seal and reconciliation once durable (the transparency log) */
  readonly attest?: Attest;
}

const LIST_DEFAULT = 100;
const LIST_MAX = 1000;
/** Rows one listing call reads at most before it answers with a cursor (each recorded one costs a journal read). */
const LIST_SCAN_ROWS = 10_000;
/** Rows asked of the store at once: a filter that keeps few of them must not cost a query per row. */
const LIST_READ_ROWS = 100;
/** Rows `scrub` checks between two turns of the event loop. */
const SCRUB_YIELD_ROWS = 10;
/** Findings `#noteProblem` remembers before it forgets them all (each then costs one more write). */
const NOTED_PROBLEMS_MAX = 10_000;
/** The errors that are a row's own problem: the row is listed unresolved with the code, and queued. */
const ROW_PROBLEMS = new Set(["claim-record-malformed", "claim-record-corrupt", "receipt-invalid"]);

/** What `scrub` checks: `rows` rows from `cursor` (default: from the start, LIST_SCAN_ROWS). */
export interface ScrubOptions {
  readonly cursor?: string;
  readonly rows?: number;
}

/** One `scrub` call: rows checked, problems found among them, and where to go on (none at the end). */
export interface ScrubPass {
  readonly checked: number;
  readonly problems: number;
  readonly cursor?: string;
}

/** Pages of open rows `counts` reads at most (LIST_MAX each). */
const COUNT_OPEN_PAGES = 100;

/** Invocations by status (`counts`). */
export interface InvocationCounts {
  readonly total: number;
  readonly in_progress: number;
  /** parked runs (open claims that are neither running nor unresolved) */
  readonly awaiting_approval: number;
  readonly unresolved: number;
  readonly recorded: number;
  readonly reconciled: number;
}
/** Room a run.started line needs beside its event (envelope and signature). */
const ENTRY_ENVELOPE_BYTES = 1024;

export class Invocations {
  readonly limits: Limits;
  readonly #claims: ClaimStore;
  readonly #journals: JournalStore;
  readonly #keys: KeyStore;
  readonly #now: () => Date;
  readonly #handleContext: HandleContext;
  readonly #checker: RunChecker;
  readonly #replayChecks = new ReplayChecks();
  readonly #unreleased: UnreleasedRuns;
  readonly #attest: Attest | undefined;
  /** Problems this process has recorded (or cleared, null), so a row read again and again is written once. */
  readonly #notedProblems = new Map<string, string | null>();
  #signingKey: Promise<SigningKey> | undefined;
  #publicKeys: Promise<readonly PublicKeyRecord[]> | undefined;

  constructor(options: InvocationsOptions) {
    this.limits = options.limits ?? resolveLimits();
    this.#claims = options.claims;
    this.#journals = options.journals;
    this.#keys = options.keys;
    this.#now = options.now ?? (() => new Date());
    this.#checker = options.checker ?? sharedRunChecker();
    this.#unreleased = new UnreleasedRuns(this.#claims, options.releaseRetryMs);
    this.#handleContext = {
      claims: this.#claims,
      journals: this.#journals,
      limits: this.limits,
      now: this.#now,
      checkRun: (bytes, runId, expect) => this.#checkRun(bytes, runId, expect),
      unreleased: this.#unreleased,
      writing: new Set(),
      ...(options.attest === undefined ? {} : { attest: options.attest }),
    };
    this.#attest = options.attest;
  }

  /**
   * Stops trying to store the releases that could not be stored: the stores are closing, and with
   * them this process's ownership, so those runs read unresolved everywhere from then on.
   */
  close(): void {
    this.#unreleased.stop();
  }

  /**
   * Claims `(scope, id)` for `request`. `fresh` means this caller owns the run: the claim is
   * durable and the journal's run.started is written. Otherwise the existing state is answered
   * and nothing is written; a different request under the same id is a ConflictError
   * (`idempotency-conflict`).
   */
  async open(scope: string, id: string, request: JsonValue, agent: string, options: OpenOptions = {}): Promise<OpenOutcome> {
    const key = this.#key(scope, id);
    const request_hash = requestHashOf(request, this.limits);
    const started = this.#runStarted(key, request_hash, checkName(agent, "agent"), options);
    // Existing claims (replays, retries) are answered from a read: no write lock, no fsync. The
    // facade has just read the id itself (one read per new id), and says so.
    if (options.lookedUp !== true && options.dequeued !== true) {
      const existing = await this.#noting(key, () => this.#claims.get(key));
      if (existing !== undefined) return this.#outcomeOf(existing, request_hash);
    }
    // Everything that could fail before the run is settled first: a claim is never burnt by a
    // missing key or a malformed option.
    const signingKey = await this.#activeKey();
    const run_id = randomUUID();
    const created_at = this.#now().getTime();
    const identity = { ...key, request_hash, agent: started.agent, run_id, created_at };
    // The run's journal file is created (and its name's directory fsync begun) while the claim
    // commits, once the store finds no claim to answer instead: a file is no side effect of the
    // run (G1 holds: the caller learns `fresh`, and the run's first effect waits for its write-ahead
    // sync, only after the claim is durable). A claim another caller won leaves it discarded; a
    // crash meanwhile, an empty journal no claim names.
    let creating: Promise<JournalWriter> | undefined;
    const create = (): Promise<JournalWriter> =>
      JournalWriter.create({ store: this.#journals, key: signingKey, runId: run_id, limits: this.limits, now: this.#now });
    let attempt: Awaited<ReturnType<ClaimStore["claim"]>>;
    try {
      attempt = await this.#claims.claim(
        { ...identity, claim_hash: claimHashOf(identity) },
        {
          onWrite: () => {
            creating ??= create();
            creating.catch(() => undefined); // awaited below, or discarded
          },
          ...(options.dequeued === true ? { dequeued: true } : {}),
        },
      );
    } catch (error) {
      await discardJournal(creating);
      throw error;
    }
    if (!attempt.created) {
      await discardJournal(creating);
      return this.#outcomeOf(attempt.claim, request_hash);
    }

    let writer: JournalWriter | undefined;
    try {
      writer = await (creating ?? create());
      // Written, not synced: the first effect's write-ahead sync (or finish, or the journal's close)
      // makes it durable. A crash before that leaves a claim without a started journal, which
      // reads unresolved like any claim whose owner died — never fresh again.
      await writer.append(started, UNSYNCED);
    } catch (error) {
      // The claim stays (it is durable and may have been seen): it reads unresolved from now on.
      await writer?.close().catch(() => undefined);
      await this.#unreleased.release(key, run_id);
      throw error;
    }
    return { status: "fresh", handle: new InvocationHandle(this.#handleContext, identity, writer) };
  }

  /**
   * The state of `(scope, id)` without creating anything; undefined when no claim exists. With
   * `request`, a different request hash is a ConflictError, as for `open`.
   */
  async lookup(scope: string, id: string, request?: JsonValue): Promise<ExistingOutcome | undefined> {
    const key = this.#key(scope, id);
    const request_hash = request === undefined ? undefined : requestHashOf(request, this.limits);
    const claim = await this.#noting(key, () => this.#claims.get(key));
    return claim === undefined ? undefined : this.#outcomeOf(claim, request_hash);
  }

  /**
   * Opens, runs `fn` with the handle if fresh, and finishes with its value. Returns the outcome:
   * `recorded` with `replayed: false` for the run that just happened, or the existing state (a
   * stored result with `replayed: true`). If `fn` throws, the claim is released (it reads
   * unresolved) and the error is rethrown.
   */
  async run(
    scope: string,
    id: string,
    request: JsonValue,
    agent: string,
    fn: (handle: InvocationHandle) => JsonValue | Promise<JsonValue>,
    options: OpenOptions = {},
  ): Promise<ExistingOutcome> {
    const opened = await this.open(scope, id, request, agent, options);
    if (opened.status !== "fresh") return opened;
    const handle = opened.handle;
    try {
      return await handle.finish(await fn(handle));
    } finally {
      await handle.release();
    }
  }

  /**
   * Pages through claims in (scope, id) order, optionally of one status. The status is read from
   * the row, and a recorded row's journal is checked against its seal (as a replay checks it; no
   * signatures): a row that fails its own checks (or cannot be read at all), or whose journal
   * changed since its result was recorded, is listed as unresolved with its `problem`, as lookup
   * and inspect answer it (G2), in every listing its columns fall in, and its problem is recorded
   * in the store. The `unresolved` listing, the operator's queue, reads only the open rows and the
   * rows with a recorded problem (found by a lookup, a listing or `scrub`), both from an index: it
   * costs what its own rows cost, however many recorded rows the store holds. A listing reads at
   * most LIST_SCAN_ROWS rows per call, then answers a cursor, with fewer items than asked (none,
   * maybe) when most rows it read were of another status.
   */
  async list(query: ListQuery = {}): Promise<ListPage> {
    const limit = query.limit ?? LIST_DEFAULT;
    if (!Number.isSafeInteger(limit) || limit < 1 || limit > LIST_MAX) {
      throw new ValidationError("invalid-list-limit", `limit must be an integer 1–${LIST_MAX}`);
    }
    const filter = listFilterOf(query.status);
    let after = query.cursor === undefined ? undefined : decodeCursor(query.cursor);
    const items: ClaimSummary[] = [];
    let scanned = 0;
    // The cursor is the last row looked at, so reading past it costs nothing but the read.
    const read = Math.max(limit, LIST_READ_ROWS);
    for (;;) {
      const rows = await this.#claims.list(filter, after, read);
      for (const row of rows) {
        after = { scope: row.scope, id: row.id };
        scanned++;
        const summary = await this.#checkedSummaryOf(row);
        if (filter === "queue" && summary.problem === undefined && (summary.status === "recorded" || summary.status === "reconciled")) {
          // Its recorded problem is gone (a journal put back, a receipt attached elsewhere): out of the queue.
          await this.#noteProblem(row, undefined);
        }
        // A row with a problem is shown in every listing its columns fall in: never hidden by a filter.
        if (query.status === undefined || summary.status === query.status || summary.problem !== undefined) items.push(summary);
        if (items.length === limit) return { items, cursor: encodeCursor(after) };
      }
      if (rows.length < read) return { items };
      if (scanned >= LIST_SCAN_ROWS) return { items, cursor: encodeCursor(after!) };
    }
  }

  /**
   * Checks up to `rows` rows from `cursor` on (all of them, in key order) as a listing checks
   * them, and records each problem found, so the `unresolved` listing shows a run whose journal
   * was edited though nobody looked it up. Answers the cursor to go on from (none at the end).
   */
  async scrub(options: ScrubOptions = {}): Promise<ScrubPass> {
    const rows = options.rows ?? LIST_SCAN_ROWS;
    if (!Number.isSafeInteger(rows) || rows < 1) throw new ValidationError("invalid-scrub-rows", "rows must be a positive integer");
    let after = options.cursor === undefined ? undefined : decodeCursor(options.cursor);
    let checked = 0;
    let problems = 0;
    while (checked < rows) {
      const read = Math.min(LIST_READ_ROWS, rows - checked);
      const batch = await this.#claims.list("all", after, read);
      for (const row of batch) {
        after = { scope: row.scope, id: row.id };
        checked++;
        if ((await this.#checkedSummaryOf(row)).problem !== undefined) problems++;
        // A small journal is read synchronously: without a turn of the loop now and then, a
        // step of a thousand rows held every request for a few hundred milliseconds.
        if (checked % SCRUB_YIELD_ROWS === 0) await yieldToLoop();
      }
      if (batch.length < read) return { checked, problems };
    }
    return { checked, problems, cursor: encodeCursor(after!) };
  }

  /**
   * Invocations by status, for an overview. Read from the rows' columns (recorded and reconciled
   * rows are counted, not checked one by one); open rows are listed, since only their owner's
   * liveness tells in_progress from unresolved. A row with a recorded problem counts as
   * unresolved (as the `unresolved` listing shows it); one whose problem nobody has found yet
   * counts by its columns until a lookup, a listing or the scrub finds it.
   */
  async counts(): Promise<InvocationCounts> {
    const tally = await this.#claims.tally();
    const { inProgress, parked } = await this.#countOpen();
    const problems = tally.problems.recorded + tally.problems.reconciled;
    return {
      total: tally.total,
      in_progress: inProgress,
      awaiting_approval: parked,
      unresolved: Math.max(0, tally.open - inProgress - parked) + problems,
      recorded: Math.max(0, tally.total - tally.open - tally.reconciled - tally.problems.recorded),
      reconciled: Math.max(0, tally.reconciled - tally.problems.reconciled),
    };
  }

  /**
   * Open rows running now and parked now, in one pass over the open rows (they are few: running,
   * parked, or awaiting review; the bound keeps a pathological store from holding the overview).
   */
  async #countOpen(): Promise<{ readonly inProgress: number; readonly parked: number }> {
    let inProgress = 0;
    let parked = 0;
    let after: ClaimKey | undefined;
    for (let page = 0; page < COUNT_OPEN_PAGES; page++) {
      const rows = await this.#claims.list("open", after, LIST_MAX);
      for (const row of rows) {
        after = { scope: row.scope, id: row.id };
        const status = (await this.#checkedSummaryOf(row)).status;
        if (status === "in_progress") inProgress++;
        else if (status === "awaiting_approval") parked++;
      }
      if (rows.length < LIST_MAX) break;
    }
    return { inProgress, parked };
  }

  /** What an operator reviews before reconciling: the claim's snapshot, its hash and a report. */
  async inspect(scope: string, id: string): Promise<Inspection> {
    const claim = await this.#existingClaim(this.#key(scope, id));
    return this.#inspectClaim(claim, await this.#outcomeOf(claim));
  }

  /**
   * Closes an unresolved claim with the operator's signed review. The same review by the same
   * operator again answers the same receipt; anything else for a reconciled claim is a
   * ConflictError (`reconciliation-conflict`), a review of an outdated snapshot is
   * `snapshot-stale`, and only `unresolved` claims can be reconciled.
   */
  async reconcile(scope: string, id: string, review: unknown, operator: string): Promise<ReconcileResult> {
    const key = this.#key(scope, id);
    const parsed = parseReview(review);
    const who = checkName(operator, "operator");
    for (let attempt = 0; attempt < 3; attempt++) {
      const claim = await this.#existingClaim(key);
      const outcome = await this.#outcomeOf(claim);
      if (outcome.status === "reconciled") {
        if (sameSubmission(outcome.receipt, parsed, who)) return { receipt: outcome.receipt, replayed: true };
        throw new ConflictError("reconciliation-conflict", `${scope}/${id} was already reconciled with a different review`);
      }
      if (outcome.status !== "unresolved") {
        // `status` would collide with the problem document's own member over HTTP.
        throw new ConflictError("invocation-not-unresolved", `${scope}/${id} is ${outcome.status}; only unresolved claims can be reconciled`, {
          details: { invocation_status: outcome.status },
        });
      }
      const inspection = await this.#inspectClaim(claim, outcome);
      if (inspection.snapshot_hash !== parsed.snapshot_hash) {
        throw new ConflictError("snapshot-stale", `${scope}/${id} changed since it was inspected; inspect it again`, {
          details: { snapshot_hash: inspection.snapshot_hash },
        });
      }
      const receipt = signReceipt(
        { v: 1, snapshot: inspection.snapshot, review: parsed, operator: who, recorded_at: journalTimestamp(this.#now()) },
        await this.#activeKey(),
      );
      const stored = canonicalJson(receipt);
      if (await this.#claims.attachReceipt(key, claim.claim_hash, stored)) {
        await this.#attest?.(reconciliationStatement(key, claim.run_id, who, stored));
        return { receipt, replayed: false };
      }
      // Another reconciler (or a change to the claim) won the race: judge against what is stored now.
    }
    throw new ConflictError("reconciliation-conflict", `${scope}/${id} kept changing while it was reconciled`);
  }

  /**
   * Retention (G4): drops the result payloads recorded before `olderThan`. Identity, request hash,
   * outcome and result hash stay, so a late retry is answered `recorded` with `expired: true` (or
   * refused as a conflict) and never re-run.
   */
  async prune(options: PruneOptions = {}): Promise<{ pruned: number }> {
    const now = this.#now().getTime();
    const olderThan = options.olderThan?.getTime() ?? now - this.limits.resultRetentionMs;
    if (!Number.isFinite(olderThan)) throw new ValidationError("invalid-prune-date", "olderThan must be a valid date");
    return { pruned: await this.#claims.pruneResults(olderThan, now) };
  }

  /** The node's public keys (journal and receipt verification), cached; `refresh` re-reads them. */
  async publicKeys(refresh = false): Promise<readonly PublicKeyRecord[]> {
    if (refresh || this.#publicKeys === undefined) {
      const loading = this.#keys.publicKeys();
      this.#publicKeys = loading;
      loading.catch(() => {
        if (this.#publicKeys === loading) this.#publicKeys = undefined;
      });
    }
    return this.#publicKeys;
  }

  #key(scope: string, id: string): ClaimKey {
    return { scope: checkScope(scope, this.limits), id: checkInvocationId(id) };
  }

  #runStarted(key: ClaimKey, request_hash: Digest, agent: string, options: OpenOptions): RunStartedEvent {
    const event: RunStartedEvent = {
      type: "run.started",
      invocation: { scope: key.scope, id: key.id, request_hash },
      agent,
      ...(options.provider === undefined ? {} : { provider: options.provider }),
      ...(options.bundle === undefined ? {} : { bundle: options.bundle }),
      ...(options.isolation === undefined ? {} : { isolation: options.isolation }),
      ...(options.policy === undefined ? {} : { policy: options.policy }),
      ...(options.base === undefined ? {} : { base: options.base }),
    };
    validateEvent(event, this.limits);
    const bytes = Buffer.byteLength(canonicalJson(event), "utf8");
    if (bytes + ENTRY_ENVELOPE_BYTES > this.limits.journalEntryBytes) {
      throw new LimitError("run-started-too-large", `run.started would be ${bytes} bytes, too large for a journal entry`);
    }
    return event;
  }

  /** The node's active signing key (what signs its journals and receipts; also its attestations). */
  signingKey(): Promise<SigningKey> {
    return this.#activeKey();
  }

  async #activeKey(): Promise<SigningKey> {
    if (this.#signingKey === undefined) {
      const loading = this.#keys.active();
      this.#signingKey = loading;
      loading.catch(() => {
        if (this.#signingKey === loading) this.#signingKey = undefined;
      });
    }
    return this.#signingKey;
  }

  async #existingClaim(key: ClaimKey): Promise<ClaimState> {
    const claim = await this.#noting(key, () => this.#claims.get(key));
    if (claim === undefined) throw new NotFoundError("invocation-not-found", `no invocation ${key.scope}/${key.id}`);
    return claim;
  }

  /**
   * True for a run this process gave up without storing its release; each sighting tries to store
   * it again (in the background: the answer is unresolved either way, and never fresh), as a timer
   * does between sightings (unreleased.ts).
   */
  #givenUpHere(claim: ClaimState): boolean {
    return !claim.released && this.#unreleased.givenUp(claim.run_id);
  }

  /** The outcome a stored claim stands for; see the module comment for what is checked. A problem found is recorded. */
  async #outcomeOf(claim: ClaimState, requestHash?: Digest): Promise<ExistingOutcome> {
    const outcome = await this.#noting(claim, () => this.#checkedOutcomeOf(claim, requestHash));
    if (outcome.status === "unresolved" && outcome.audit.reasons?.includes("journal-changed") === true) await this.#noteProblem(claim, "journal-changed");
    return outcome;
  }

  async #checkedOutcomeOf(claim: ClaimState, requestHash?: Digest, reread = true): Promise<ExistingOutcome> {
    if (reread && claim.receipt === undefined && claim.result === undefined && !claim.owner_alive && !claim.released) {
      // The row was read before the liveness probe: its owner may have recorded a result and
      // exited in between. An owner found dead cannot write any more, so one more read is final.
      const again = await this.#claims.get(claim);
      if (again !== undefined) return this.#checkedOutcomeOf(again, requestHash, false);
    }
    this.#replayChecks.claimIntegrity(claim);
    if (requestHash !== undefined && claim.request_hash !== requestHash) {
      throw new ConflictError("idempotency-conflict", `invocation ${claim.scope}/${claim.id} was claimed for a different request`, {
        status: 422,
      });
    }
    const audit: Audit = { run_id: claim.run_id, agent: claim.agent };
    if (claim.receipt !== undefined) return this.#reconciled(claim, audit);
    if (claim.result !== undefined) return this.#recorded(claim, audit);
    const givenUp = this.#givenUpHere(claim);
    if (!claim.released && !givenUp) {
      // A run this process is writing is in progress here, not parked: no journal read on that path.
      if (claim.owner_alive && this.#handleContext.writing.has(claim.run_id)) return { status: "in_progress" };
      // Parked, the run is neither in progress nor unresolved, whoever holds the claim (alive or not).
      const parked = await this.#parkedOf(claim.run_id);
      if (parked !== undefined) return { status: "awaiting_approval", audit, parked };
    }
    if (claim.owner_alive && !givenUp) return { status: "in_progress" };
    return { status: "unresolved", audit: { ...audit, reasons: [claim.released || givenUp ? "released" : "owner-gone"] } };
  }

  async #recorded(claim: ClaimState, audit: Audit): Promise<RecordedOutcome | UnresolvedOutcome> {
    const result = claim.result!;
    const seal = result.journal;
    let matches = false;
    try {
      matches = await this.#journalStillSealed(claim.run_id, seal, result.hash);
    } catch (error) {
      // Grown past its sealed length: changed. Unsafe files and I/O failures are raised.
      if (!(isWardenError(error) && error.code === "journal-too-large")) throw error;
    }
    if (!matches) {
      return { status: "unresolved", audit: { ...audit, journal: seal, reasons: ["journal-changed"] } };
    }
    // Every replay builds this: plain literals (no spreads) in the order the fields always had.
    const recordedAudit: Audit = { run_id: audit.run_id, agent: audit.agent, journal: seal };
    if (result.payload === undefined) {
      return { status: "recorded", audit: recordedAudit, result_hash: result.hash, expired: true, replayed: true };
    }
    const value = JSON.parse(result.payload) as JsonValue;
    return { status: "recorded", audit: recordedAudit, result: value, result_hash: result.hash, expired: false, replayed: true };
  }

  /** The journal of `runId` is still the one sealed with result `resultHash` (see seal.ts). */
  async #journalStillSealed(runId: string, seal: JournalSeal, resultHash: Digest): Promise<boolean> {
    const journals = this.#journals;
    if (journals.digest !== undefined) {
      const digest = await journals.digest(runId, seal.bytes);
      return digest !== undefined && this.#replayChecks.digestMatches(digest, seal, runId, resultHash);
    }
    const bytes = await journals.read(runId, seal.bytes);
    return bytes !== undefined && this.#replayChecks.journalMatches(bytes, seal, runId, resultHash);
  }

  async #reconciled(claim: ClaimState, audit: Audit): Promise<ReconciledOutcome> {
    let receipt: ReconciliationReceipt;
    try {
      receipt = parseReceipt(JSON.parse(claim.receipt!));
    } catch (error) {
      throw new IntegrityError("receipt-invalid", `the receipt of ${claim.scope}/${claim.id} is damaged`, { status: 500, cause: error });
    }
    const s = receipt.snapshot;
    if (s.scope !== claim.scope || s.id !== claim.id || s.request_hash !== claim.request_hash || s.claim_hash !== claim.claim_hash) {
      throw new IntegrityError("receipt-invalid", `the receipt of ${claim.scope}/${claim.id} is for another claim`, { status: 500 });
    }
    let verdict = verifyReceipt(receipt, await this.publicKeys(), s);
    if (!verdict.ok && verdict.code === "receipt-unknown-key") verdict = verifyReceipt(receipt, await this.publicKeys(true), s);
    if (!verdict.ok) {
      throw new IntegrityError("receipt-invalid", `the receipt of ${claim.scope}/${claim.id} does not verify: ${verdict.reason}`, {
        status: 500,
      });
    }
    return { status: "reconciled", audit, receipt };
  }

  /** Verifies and inspects a journal with the node's keys, re-reading them once for an unknown key. */
  async #checkRun(bytes: Uint8Array, runId: string, expect?: Checkpoint): Promise<RunCheck> {
    const options = { maxBytes: this.limits.journalBytes, runId, limits: this.limits, ...(expect === undefined ? {} : { expect }) };
    const check = await this.#checker.check(bytes, await this.publicKeys(), options);
    if (check.first_error?.code !== "journal-unknown-key") return check;
    return this.#checker.check(bytes, await this.publicKeys(true), options);
  }

  async #inspectClaim(claim: ClaimState, outcome: ExistingOutcome): Promise<Inspection> {
    const bytes = await this.#journals.read(claim.run_id, this.limits.journalBytes);
    const report = bytes === undefined ? undefined : await this.#checkRun(bytes, claim.run_id);
    const snapshot: ClaimSnapshot = {
      scope: claim.scope,
      id: claim.id,
      request_hash: claim.request_hash,
      agent: claim.agent,
      claim_hash: claim.claim_hash,
      journal_hash: bytes === undefined ? null : sha256Digest(bytes),
      audit: {
        run_id: claim.run_id,
        entries: report?.entries ?? 0,
        tail_hash: report?.tail_hash ?? ZERO_HASH,
        bytes: bytes?.byteLength ?? 0,
      },
    };
    return { snapshot, snapshot_hash: snapshotHashOf(snapshot), report: { status: outcome.status, journal: journalReportOf(report) } };
  }

  /** A listed row's summary (see `list`); a problem found is recorded. */
  async #checkedSummaryOf(row: ListedClaim): Promise<ClaimSummary> {
    const summary = isDamagedClaim(row) ? damagedSummaryOf(row) : await this.#listedSummaryOf(row);
    if (summary.problem !== undefined) await this.#noteProblem(row, summary.problem);
    return summary;
  }

  /** `read()`, recording the row's problem when it throws one (a damaged row, a receipt that does not verify). */
  async #noting<T>(key: ClaimKey, read: () => Promise<T>): Promise<T> {
    try {
      return await read();
    } catch (error) {
      if (isWardenError(error) && ROW_PROBLEMS.has(error.code)) await this.#noteProblem(key, error.code);
      throw error;
    }
  }

  /**
   * Records (or clears, for undefined) a row's problem for the queue. Best effort: the answer the
   * caller gives is the same either way (G2 holds on every read), and the scrub finds it again.
   * Each finding is written once per process while it stays the same.
   */
  async #noteProblem(key: ClaimKey, code: string | undefined): Promise<void> {
    const noted = `${key.scope.length}:${key.scope}:${key.id}`;
    if (this.#notedProblems.get(noted) === (code ?? null)) return;
    try {
      await this.#claims.noteProblem({ scope: key.scope, id: key.id }, code, this.#now().getTime());
    } catch {
      return;
    }
    if (this.#notedProblems.size >= NOTED_PROBLEMS_MAX) this.#notedProblems.clear();
    this.#notedProblems.set(noted, code ?? null);
  }

  /**
   * The `run.parked` entry a run's journal ends in, if it ends in one: its last line read, not
   * verified (a status read; taking the run up again verifies the whole journal). A parked run's
   * journal is closed, so its last line is whole.
   */
  async #parkedOf(runId: string): Promise<RunParkedEvent | undefined> {
    let bytes: Uint8Array | undefined;
    try {
      bytes = await this.#journals.read(runId, this.limits.journalBytes);
    } catch {
      return undefined;
    }
    if (bytes === undefined || bytes.byteLength === 0 || bytes[bytes.byteLength - 1] !== 0x0a) return undefined;
    const text = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString("utf8");
    const start = text.lastIndexOf("\n", text.length - 2) + 1;
    try {
      const line = JSON.parse(text.slice(start, text.length - 1)) as { entry?: { event?: { type?: unknown } } };
      const event = line.entry?.event;
      if (event?.type !== "run.parked") return undefined;
      return validateEvent(event, this.limits) as RunParkedEvent;
    } catch {
      return undefined;
    }
  }

  /** The run id an invocation's claim names (a run in progress on another node has no other view of it). */
  async runIdOf(scope: string, id: string): Promise<string | undefined> {
    return (await this.#claims.get(this.#key(scope, id)))?.run_id;
  }

  /** True when the run's journal ends parked (a start-up sweep keeps what such a run goes on from). */
  async isParked(runId: string): Promise<boolean> {
    return (await this.#parkedOf(runId)) !== undefined;
  }

  /**
   * Takes up a parked run (`awaiting_approval`) to answer its approval: this node becomes the
   * claim's owner (its parker may be gone), the journal is verified whole and opened for appending
   * after its `run.parked`, and the handle goes on with the same run id. Refused with the run left
   * as it is when it is not parked, when another live node holds it, when another node took it up
   * first (`claim-changed`), or when its journal does not verify.
   */
  async takeUp(scope: string, id: string, canTake?: TakeUpCheck): Promise<{ readonly handle: InvocationHandle; readonly parked: RunParkedEvent; readonly events: readonly JournalEvent[] }> {
    const key = this.#key(scope, id);
    const claim = await this.#existingClaim(key);
    const outcome = await this.#outcomeOf(claim);
    if (outcome.status !== "awaiting_approval") {
      throw new ConflictError("invocation-not-awaiting-approval", `${scope}/${id} is ${outcome.status}; only a run awaiting approval can be approved or denied`, {
        details: { invocation_status: outcome.status },
      });
    }
    if (this.#claims.adopt === undefined || this.#journals.reopen === undefined) {
      throw new ConflictError("approval-unsupported", "this node's backend cannot take a parked run up again");
    }
    const adopting = claim.owner !== this.#claims.ownerId;
    if (adopting && claim.owner_alive) throw new ConflictError("invocation-parked-elsewhere", `${scope}/${id} is parked on another live node; answer it there`);
    // Read and judged before the claim is adopted: a run this node cannot go on with is refused
    // while any other node may still take it up (after adopting, only this one could).
    const read = async (): Promise<{ readonly bytes: Uint8Array; readonly report: VerifyReport; readonly last: RunParkedEvent }> => {
      const bytes = await this.#journals.read(claim.run_id, this.limits.journalBytes);
      if (bytes === undefined) throw new IntegrityError("journal-not-found", `the journal of run ${claim.run_id} is gone`, { status: 500 });
      const report = verifyJournal(bytes, await this.publicKeys(true), { maxBytes: this.limits.journalBytes, runId: claim.run_id, limits: this.limits });
      const last = report.valid.at(-1)?.event;
      if (!report.ok || last?.type !== "run.parked") {
        throw new IntegrityError("journal-not-clean", `the journal of parked run ${claim.run_id} does not verify (${report.first_error?.code ?? "it does not end parked"}); it is not taken up`, { status: 409 });
      }
      return { bytes, report, last };
    };
    let journal: Awaited<ReturnType<typeof read>>;
    try {
      journal = await read();
    } catch (error) {
      // Another node took the run up and wrote on since this one read the claim: that is the answer, not damage.
      if (adopting && isWardenError(error) && error.code === "journal-not-clean" && (await this.#existingClaim(key)).owner !== claim.owner) {
        throw new ConflictError("claim-changed", `the claim of ${scope}/${id} changed while it was taken up`);
      }
      throw error;
    }
    if (canTake !== undefined) await canTake(claim.run_id, journal.last, journal.report.valid.map((e) => e.event));
    if (adopting) {
      if (!(await this.#claims.adopt(key, claim.run_id, claim.owner))) throw new ConflictError("claim-changed", `the claim of ${scope}/${id} changed while it was taken up`);
      // Another node may have taken the run up, gone on and parked it again between the read and the adoption.
      const again = await read();
      if (!Buffer.from(again.bytes).equals(Buffer.from(journal.bytes))) throw new ConflictError("claim-changed", `the journal of ${scope}/${id} changed while it was taken up`);
      journal = again;
    }
    const { bytes, report, last } = journal;
    const writer = await JournalWriter.reopen({ store: this.#journals, key: await this.#activeKey(), runId: claim.run_id, limits: this.limits, now: this.#now }, report, bytes.byteLength);
    const owned = { scope: claim.scope, id: claim.id, request_hash: claim.request_hash, agent: claim.agent, run_id: claim.run_id, created_at: claim.created_at };
    return { handle: new InvocationHandle(this.#handleContext, owned, writer), parked: last, events: report.valid.map((e) => e.event) };
  }

  /** A row's status for listings; a recorded one whose journal changed since reads unresolved (`journal-changed`). */
  async #listedSummaryOf(claim: ClaimState): Promise<ClaimSummary> {
    const summary = this.#summaryOf(claim);
    const writingHere = claim.owner_alive && this.#handleContext.writing.has(claim.run_id);
    if ((summary.status === "in_progress" || summary.status === "unresolved") && summary.problem === undefined && !claim.released && !this.#givenUpHere(claim) && !writingHere) {
      if ((await this.#parkedOf(claim.run_id)) !== undefined) return { ...summary, status: "awaiting_approval" };
    }
    if (summary.status !== "recorded" || summary.problem !== undefined) return summary;
    let sealed = false;
    try {
      sealed = await this.#journalStillSealed(claim.run_id, claim.result!.journal, claim.result!.hash);
    } catch (error) {
      // Grown past its sealed length: changed (as #recorded judges it). Unsafe files and I/O failures are raised.
      if (!(isWardenError(error) && error.code === "journal-too-large")) throw error;
    }
    return sealed ? summary : { ...summary, status: "unresolved", problem: "journal-changed" };
  }

  /** A cheap per-row status for listings: no journal reads, no signature checks. */
  #summaryOf(claim: ClaimState): ClaimSummary {
    let status: ExistingStatus;
    let problem: string | undefined;
    try {
      checkClaimIntegrity(claim);
      status =
        claim.receipt !== undefined
          ? "reconciled"
          : claim.result !== undefined
            ? "recorded"
            : claim.owner_alive && !this.#givenUpHere(claim)
              ? "in_progress"
              : "unresolved";
    } catch (error) {
      status = "unresolved";
      problem = isWardenError(error) ? error.code : "claim-record-corrupt";
    }
    return {
      scope: claim.scope,
      id: claim.id,
      status,
      run_id: claim.run_id,
      agent: claim.agent,
      created_at: new Date(claim.created_at).toISOString(),
      ...(claim.result !== undefined ? { expired: claim.result.payload === undefined } : {}),
      ...(problem === undefined ? {} : { problem }),
    };
  }
}

/** Removes the journal made for a claim that went to someone else (best effort: no claim names it). */
async function discardJournal(creating: Promise<JournalWriter> | undefined): Promise<void> {
  if (creating === undefined) return;
  try {
    await (await creating).discard();
  } catch {
    // Never created, or not removable: an empty journal of a run id nothing refers to.
  }
}

/** A row too damaged to read: listed by its key, unresolved (never replayed or re-run), and why. */
function damagedSummaryOf(row: DamagedClaim): ClaimSummary {
  return { scope: row.scope, id: row.id, status: "unresolved", problem: row.damaged.code };
}

function journalReportOf(report: RunCheck | undefined): JournalReport {
  if (report === undefined) {
    return {
      present: false,
      ok: false,
      entries: 0,
      incomplete_tail: false,
      requires_reconciliation: true,
      findings: [{ reason: "no-run-started", seq: 0 }],
      open_effects: [],
      effects: 0,
    };
  }
  const inspection = report.inspection;
  return {
    present: true,
    ok: report.ok,
    entries: report.entries,
    ...(report.first_error === undefined ? {} : { first_error: report.first_error }),
    incomplete_tail: report.incomplete_tail,
    requires_reconciliation: inspection.requires_reconciliation,
    findings: inspection.reasons,
    ...(inspection.termination === undefined ? {} : { termination: inspection.termination }),
    ...(inspection.result_hash === undefined ? {} : { result_hash: inspection.result_hash }),
    open_effects: inspection.open_effects,
    effects: inspection.effects,
    ...(inspection.agent_process === undefined ? {} : { agent_process: inspection.agent_process }),
    ...(inspection.memory_bound === undefined ? {} : { memory_bound: inspection.memory_bound }),
  };
}

function listFilterOf(status: ExistingStatus | undefined): ClaimListFilter {
  switch (status) {
    case undefined:
      return "all";
    case "in_progress":
    case "awaiting_approval":
      return "open";
    case "unresolved":
      // The open rows, and the recorded and reconciled rows whose problem a check recorded (see list).
      return "queue";
    case "recorded":
      return "recorded";
    case "reconciled":
      return "reconciled";
    default:
      throw new ValidationError("invalid-list-status", "status must be in_progress, awaiting_approval, unresolved, recorded or reconciled");
  }
}

function encodeCursor(key: ClaimKey): string {
  return Buffer.from(canonicalJson([key.scope, key.id]), "utf8").toString("base64url");
}

function decodeCursor(cursor: string): ClaimKey {
  try {
    const value: unknown = JSON.parse(Buffer.from(cursor, "base64url").toString("utf8"));
    if (Array.isArray(value) && value.length === 2 && typeof value[0] === "string" && typeof value[1] === "string") {
      return { scope: value[0], id: value[1] };
    }
  } catch {
    // fall through to the refusal
  }
  throw new ValidationError("invalid-cursor", "cursor is not one this service returned");
}
