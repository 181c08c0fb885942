/**
 * The handle of a run this caller owns (`open` answered `fresh`). It journals the run's effects,
 * and `finish` records the result only when the whole journal verifies clean (G6). Giving the
 * handle up without a result (release, `await using`, a thrown error in `run`, or dropping it
 * unreferenced) leaves the claim in place: it reads `unresolved` and is never executed again (G2).
 */
import { randomUUID } from "node:crypto";
import type { JsonValue } from "../core/canonical.js";
import { sha256Digest, type Digest } from "../core/digest.js";
import { ConflictError, IntegrityError, ValidationError, WardenError, type WardenErrorOptions } from "../core/errors.js";
import type { Limits } from "../core/limits.js";
import type { ReconciliationFinding } from "../journal/inspect.js";
import type { EffectFinishedEvent, EffectStartedEvent, JournalStore, NoteEvent, RunSpendEvent, PolicyDecisionEvent, RunChangesEvent, RunParkedEvent, PolicyApprovalEvent } from "../journal/types.js";

/** What a run's owner may append itself (run.started and run.terminated are the handle's). */
export type OwnerEvent = NoteEvent | EffectStartedEvent | EffectFinishedEvent | RunSpendEvent | PolicyDecisionEvent | RunChangesEvent | RunParkedEvent | PolicyApprovalEvent;
import type { Checkpoint } from "../journal/verify.js";
import type { AppendResult, JournalWriter } from "../journal/writer.js";
import { claimHashOf } from "./claim-hash.js";
import type { ClaimKey, ClaimStore, JournalSeal, StoredResult } from "./claim-store.js";
import { canonicalResult } from "./identity.js";
import { runCheckOf, type RunCheck } from "./run-check.js";
import { sealOf } from "./seal.js";
import type { EffectSpec, ExistingOutcome, FinishOptions, FinishOutcome, ReleaseOptions, UnresolvedOutcome, UnresolvedReason } from "./types.js";
import type { UnreleasedRuns } from "./unreleased.js";
import type { Attest } from "../tlog/statements.js";
import { runSealStatement } from "./statements.js";

/**
 * Thrown by an effect's function to say the effect definitely did not happen (it was refused,
 * failed validation, the connection was never opened): the journal records `failed`. Any other
 * exception records `unknown`, which keeps the run unresolved until an operator reconciles it.
 */
export class EffectFailed extends WardenError {
  override readonly name: string = "EffectFailed";
  readonly detail: JsonValue | undefined;
  constructor(message: string, options: WardenErrorOptions & { detail?: JsonValue } = {}) {
    super("effect-failed", message, 502, options);
    this.detail = options.detail;
  }
}

/** What a handle needs from the service that opened it. */
export interface HandleContext {
  readonly claims: ClaimStore;
  readonly journals: JournalStore;
  readonly limits: Limits;
  readonly now: () => Date;
  /** Verifies and inspects a run's journal with the node's keys (off the event loop when it can). */
  checkRun(bytes: Uint8Array, runId: string, expect?: Checkpoint): Promise<RunCheck>;
  /** Releases claims, and keeps trying those whose release could not be stored (unreleased.ts). */
  readonly unreleased: UnreleasedRuns;
  /** logs the run's seal once its result is recorded */
  readonly attest?: Attest;
  /**
   * Run ids whose journal an open handle of this process is writing: such a run is in progress
   * here and cannot be parked, so a status read need not look at its journal's last line.
   */
  readonly writing: Set<string>;
}

export interface OwnedClaim {
  readonly scope: string;
  readonly id: string;
  readonly request_hash: Digest;
  readonly agent: string;
  readonly run_id: string;
  readonly created_at: number;
}

/** The caller-facing journal of the run: notes and hand-managed effects. */
export interface RunJournal {
  readonly runId: string;
  /**
   * Entries written so far. Every entry the caller appended is durable; the handle's own
   * run.started and effect finishes become durable with the next synced line (see `effect`).
   */
  readonly entries: number;
  readonly tailHash: string;
  append(event: OwnerEvent): Promise<AppendResult>;
}

type HandleState = "open" | "finishing" | "closed";

/** Lines whose durability can wait for the run's next synced line (see `effect`). */
export const UNSYNCED = Object.freeze({ sync: false });

interface Abandoned {
  readonly unreleased: UnreleasedRuns;
  readonly claim: OwnedClaim;
  readonly writer: JournalWriter;
}

/**
 * A handle dropped without finish or release (its caller lost it) must not keep its claim
 * `in_progress` for the rest of the process's life: once the handle is garbage, the claim is
 * released like an explicit release would, and reads `unresolved`.
 */
const abandonment = new FinalizationRegistry<Abandoned>(({ unreleased, claim, writer }) => {
  void writer
    .close()
    .catch(() => undefined)
    .then(() => unreleased.release(claim, claim.run_id))
    .catch(() => undefined); // a closed store: the owner lock is gone, so the claim reads unresolved anyway
});

interface RunVerdict {
  readonly clean: boolean;
  readonly findings: readonly ReconciliationFinding[];
  readonly seal: JournalSeal;
}

// Beside the handle rather than in types.ts, so that types.ts needs nothing from this file.
export interface FreshOutcome {
  readonly status: "fresh";
  readonly handle: InvocationHandle;
}
export type OpenOutcome = FreshOutcome | ExistingOutcome;

export class InvocationHandle implements AsyncDisposable {
  readonly scope: string;
  readonly id: string;
  readonly request_hash: Digest;
  readonly agent: string;
  readonly run_id: string;
  readonly journal: RunJournal;
  readonly #ctx: HandleContext;
  readonly #claim: OwnedClaim;
  readonly #writer: JournalWriter;
  #state: HandleState = "open";

  constructor(ctx: HandleContext, claim: OwnedClaim, writer: JournalWriter) {
    this.#ctx = ctx;
    this.#claim = claim;
    this.#writer = writer;
    this.scope = claim.scope;
    this.id = claim.id;
    this.request_hash = claim.request_hash;
    this.agent = claim.agent;
    this.run_id = claim.run_id;
    ctx.writing.add(claim.run_id);
    abandonment.register(this, { unreleased: ctx.unreleased, claim, writer }, this);
    const handle = this;
    this.journal = Object.freeze({
      runId: claim.run_id,
      get entries(): number {
        return writer.writtenSeq;
      },
      get tailHash(): string {
        return writer.writtenHash;
      },
      append(event: OwnerEvent): Promise<AppendResult> {
        return handle.#appendOwn(event);
      },
    });
  }

  /** True until finish or release. */
  get open(): boolean {
    return this.#state === "open";
  }

  /**
   * Runs one side effect under the journal: `effect.started` is durable before `fn` runs (write-
   * ahead; its sync also covers run.started), then `effect.finished` records succeeded, failed
   * (fn threw EffectFailed) or unknown (anything else thrown). The function's value is returned,
   * its exception rethrown.
   *
   * effect.finished is written but not synced on its own: the next synced line (the next effect's
   * start, run.terminated at finish) or the journal's close makes it durable, and nothing is
   * recorded before that. Lost in a crash, it leaves the effect open, which reads as needing
   * reconciliation — the same verdict an unknown outcome gets, never a re-run or a replay.
   */
  async effect<T>(spec: EffectSpec, fn: () => T | Promise<T>): Promise<T> {
    this.#assertOpen();
    const effect_id = spec.effect_id ?? randomUUID();
    await this.#writer.append({ type: "effect.started", effect_id, kind: spec.kind, name: spec.name, fingerprint: spec.fingerprint });
    let value: T;
    try {
      value = await fn();
    } catch (error) {
      const known = error instanceof EffectFailed;
      await this.#writer.append(
        {
          type: "effect.finished",
          effect_id,
          outcome: known ? "failed" : "unknown",
          ...(known && error.detail !== undefined ? { detail: error.detail } : {}),
        },
        UNSYNCED,
      );
      throw error;
    }
    await this.#writer.append({ type: "effect.finished", effect_id, outcome: "succeeded" }, UNSYNCED);
    return value;
  }

  /**
   * Terminates the run with `result` and records it if, and only if, the whole journal verifies
   * and shows every effect finished with a known outcome (G6). Otherwise the claim is given up
   * and the answer is `unresolved` with the inspector's findings. An over-limit result is
   * refused (LimitError) with the handle still open.
   */
  async finish(result: JsonValue, options: FinishOptions = {}): Promise<FinishOutcome> {
    this.#assertOpen();
    const { payload, hash } = canonicalResult(result, this.#ctx.limits);
    this.#state = "finishing";
    const reason = options.stopped === true ? "stopped" : options.failed === true ? "failed" : "completed";
    try {
      // Synced: makes every earlier line (effect finishes included) durable too.
      await this.#writer.append({ type: "run.terminated", reason, result_hash: hash });
    } catch {
      await this.#giveUp();
      return this.#unresolved(["journal-write-failed", "released"], []);
    }
    const verdict = await this.#verify(hash, reason).catch(async (error: unknown) => {
      await this.#giveUp();
      throw error;
    });
    try {
      await this.#writer.close();
    } catch {
      await this.#giveUp();
      return this.#unresolved(["journal-write-failed", "released"], []);
    }
    if (!verdict.clean) {
      await this.#giveUp();
      return this.#unresolved(["journal-not-clean", "released"], verdict.findings);
    }
    const stored: StoredResult = { hash, payload, recorded_at: this.#ctx.now().getTime(), journal: verdict.seal };
    const claimHash = claimHashOf({ ...this.#claim, result: stored });
    let recorded: boolean;
    try {
      recorded = await this.#ctx.claims.record(this.#claim, this.run_id, stored, claimHash);
    } catch (error) {
      await this.#giveUp();
      throw error;
    }
    this.#state = "closed";
    this.#ctx.writing.delete(this.run_id);
    abandonment.unregister(this);
    if (!recorded) {
      throw new IntegrityError("claim-changed", `claim ${this.scope}/${this.id} changed under its owner; the result was not recorded`, {
        status: 500,
      });
    }
    await this.#ctx.attest?.(runSealStatement(this.#claim, this.run_id, stored), stored.recorded_at);
    return {
      status: "recorded",
      audit: { run_id: this.run_id, agent: this.agent, journal: verdict.seal },
      result: JSON.parse(payload) as JsonValue,
      result_hash: hash,
      expired: false,
      replayed: false,
    };
  }

  /**
   * Gives the run up without a result: the claim stays and reads `unresolved`; the id is never
   * executed again. With `reason`, the journal is first terminated with it (cancelled, timeout…).
   * Idempotent.
   */
  async release(options: ReleaseOptions = {}): Promise<void> {
    if (this.#state !== "open") return;
    this.#state = "finishing";
    try {
      if (options.reason !== undefined && !this.#writer.failed && !this.#writer.terminated) {
        await this.#writer.append({ type: "run.terminated", reason: options.reason });
      }
    } finally {
      await this.#giveUp();
    }
  }

  /**
   * Leaves the run parked (DESIGN.md "Governed tool calls"): the journal, whose last entry is the
   * caller's `run.parked`, is closed without a termination, and the claim stays open and unreleased,
   * so it reads `awaiting_approval` (also once this process is gone) until a node takes it up again.
   * On a store shared by live nodes the claim is then let go (ClaimStore.park), so any node may.
   */
  async park(): Promise<void> {
    this.#assertOpen();
    this.#state = "closed";
    this.#ctx.writing.delete(this.run_id);
    abandonment.unregister(this);
    try {
      await this.#writer.close();
    } catch (error) {
      await this.#ctx.unreleased.release(this.#claim, this.run_id);
      throw error;
    }
    // A claim kept by a failed hand-off is still safe: it stays this node's, answered here (or
    // by any node once this one is gone), as on a store without `park`.
    await this.#ctx.claims.park?.(this.#claim, this.run_id).catch(() => false);
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.release();
  }

  #assertOpen(): void {
    if (this.#state !== "open") {
      throw new ConflictError("invocation-handle-closed", `run ${this.run_id} was already finished or released`);
    }
  }

  #appendOwn(event: OwnerEvent): Promise<AppendResult> {
    this.#assertOpen();
    const type: string = event.type;
    if (type !== "note" && type !== "effect.started" && type !== "effect.finished" && type !== "run.spend" && type !== "policy.decision" && type !== "run.changes" && type !== "run.parked" && type !== "policy.approval") {
      return Promise.reject(
        new ValidationError("journal-event-reserved", `${type} is written by the invocation handle itself (open, finish, release)`),
      );
    }
    return this.#writer.append(event);
  }

  /** Closes the journal and marks the claim released; the claim itself is never removed. */
  async #giveUp(): Promise<void> {
    this.#state = "closed";
    this.#ctx.writing.delete(this.run_id);
    abandonment.unregister(this);
    try {
      await this.#writer.close();
    } finally {
      await this.#ctx.unreleased.release(this.#claim, this.run_id);
    }
  }

  #unresolved(reasons: readonly UnresolvedReason[], findings: readonly ReconciliationFinding[]): UnresolvedOutcome {
    return {
      status: "unresolved",
      audit: { run_id: this.run_id, agent: this.agent, reasons, ...(findings.length > 0 ? { findings } : {}) },
    };
  }

  /**
   * Re-reads the whole journal as the store holds it (every line durable by now) and checks it
   * against what we wrote: unchanged, it is judged on the writer's own record; any difference is
   * verified in full.
   */
  async #verify(resultHash: Digest, reason: "completed" | "failed" | "stopped"): Promise<RunVerdict> {
    const bytes = (await this.#writer.readBack(this.#ctx.limits.journalBytes)) ?? new Uint8Array();
    const digest = sha256Digest(bytes);
    const expect = { entries: this.#writer.nextSeq, tail_hash: this.#writer.tailHash };
    // Every line was built, validated, signed with the node's key and made durable by this
    // writer. Bytes equal to those (length and sha256) make a full verification a foregone
    // conclusion — it is deterministic over the bytes — so re-checking every signature this process
    // just made (a third of an invocation's CPU) proves nothing more. Any difference (the file was
    // touched, the store misread) takes the full verification, which names the damage.
    const unchanged = bytes.byteLength === this.#writer.size && digest === this.#writer.digest;
    const report = unchanged ? this.#writtenCheck() : await this.#ctx.checkRun(bytes, this.run_id, expect);
    const inspection = report.inspection;
    const started = report.first_event;
    const matches =
      bytes.byteLength === this.#writer.size &&
      report.entries === expect.entries &&
      report.tail_hash === expect.tail_hash &&
      inspection.termination === reason &&
      inspection.result_hash === resultHash &&
      started?.type === "run.started" &&
      started.invocation.scope === this.scope &&
      started.invocation.id === this.id &&
      started.invocation.request_hash === this.request_hash &&
      started.agent === this.agent;
    const clean = report.ok && inspection.clean && matches;
    const findings =
      clean || inspection.reasons.length > 0 ? inspection.reasons : [{ reason: "verification-failed" as const }];
    return {
      clean,
      findings,
      seal: sealOf(bytes, report, digest),
    };
  }

  /** The verification report of exactly the lines the writer made durable. */
  #writtenCheck(): RunCheck {
    return runCheckOf({
      ok: true,
      entries: this.#writer.nextSeq,
      tail_hash: this.#writer.tailHash,
      valid: this.#writer.entries(),
      incomplete_tail: false,
    });
  }
}
