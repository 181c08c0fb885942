/**
 * One full check of a run's journal: verification (G5) and the inspector's verdict (G6), reduced
 * to what the invocations domain uses. Pure, so it can run on a worker thread.
 */
import type { RunInspection } from "../journal/inspect.js";
import { inspectRun } from "../journal/inspect.js";
import type { JournalEvent, PublicKeyRecord } from "../journal/types.js";
import { verifyJournal, type VerifyError, type VerifyOptions, type VerifyReport } from "../journal/verify.js";

export interface RunCheck {
  readonly ok: boolean;
  readonly entries: number;
  readonly first_error?: VerifyError;
  readonly tail_hash: string;
  readonly incomplete_tail: boolean;
  /** the first verified event (run.started in a well-formed journal) */
  readonly first_event?: JournalEvent;
  readonly inspection: RunInspection;
}

export function checkRun(bytes: Uint8Array, keys: readonly PublicKeyRecord[], options: VerifyOptions): RunCheck {
  return runCheckOf(verifyJournal(bytes, keys, options));
}

/** A verification report reduced to a RunCheck, with the inspector's verdict on it. */
export function runCheckOf(report: VerifyReport): RunCheck {
  const first = report.valid[0];
  return {
    ok: report.ok,
    entries: report.entries,
    ...(report.first_error === undefined ? {} : { first_error: report.first_error }),
    tail_hash: report.tail_hash,
    incomplete_tail: report.incomplete_tail,
    ...(first === undefined ? {} : { first_event: first.event }),
    inspection: inspectRun(report),
  };
}
