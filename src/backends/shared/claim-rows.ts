/**
 * A claim row as both backends store it, and the one mapping from a row to a ClaimRecord. Below
 * both backends so that neither imports the other.
 */
import { IntegrityError, isWardenError } from "../../core/errors.js";
import type { Digest } from "../../core/digest.js";
import { isCount, isTime } from "../../core/limits.js";
import type { ClaimRecord, ClaimState, ListedClaim, RecordedPage, StoredResult } from "../../invocations/claim-store.js";

/** Columns in the order every SELECT of a whole claim row uses. */
export const CLAIM_COLUMNS =
  "scope, id, request_hash, agent, run_id, owner, created_at, released, claim_hash, result_hash, result, " +
  "recorded_at, pruned_at, journal_entries, journal_tail, journal_bytes, journal_sha256, receipt";

export interface ClaimRow {
  scope: unknown;
  id: unknown;
  request_hash: unknown;
  agent: unknown;
  run_id: unknown;
  owner: unknown;
  created_at: unknown;
  released: unknown;
  claim_hash: unknown;
  result_hash: unknown;
  result: unknown;
  recorded_at: unknown;
  pruned_at: unknown;
  journal_entries: unknown;
  journal_tail: unknown;
  journal_bytes: unknown;
  journal_sha256: unknown;
  receipt: unknown;
}

function malformed(row: ClaimRow, column: string): IntegrityError {
  return new IntegrityError(
    "claim-record-malformed",
    `claim row ${JSON.stringify([row.scope, row.id])} has an invalid ${column}; it is neither replayed nor re-run`,
    { status: 500, details: { column } },
  );
}

function text(row: ClaimRow, column: keyof ClaimRow): string {
  const value = row[column];
  if (typeof value !== "string") throw malformed(row, column);
  return value;
}

function optionalText(row: ClaimRow, column: keyof ClaimRow): string | undefined {
  const value = row[column];
  if (value === null) return undefined;
  if (typeof value !== "string") throw malformed(row, column);
  return value;
}

function integer(row: ClaimRow, column: keyof ClaimRow): number {
  const value = row[column];
  if (!isCount(value)) throw malformed(row, column);
  return value;
}

function time(row: ClaimRow, column: keyof ClaimRow): number {
  const value = row[column];
  if (!isTime(value)) throw malformed(row, column);
  return value;
}

function optionalInteger(row: ClaimRow, column: keyof ClaimRow): number | undefined {
  return row[column] === null ? undefined : integer(row, column);
}

/** A `recordedSince` page of `rows` (as the index ordered them), its cursor from the last raw row. */
export function recordedPage<R extends ClaimRow>(rows: readonly R[], limit: number, read: (row: R) => ListedClaim): RecordedPage {
  const last = rows[rows.length - 1];
  return {
    claims: rows.map(read),
    next: rows.length < limit || last === undefined ? undefined : { recorded_at: Number(last.recorded_at), scope: String(last.scope), id: String(last.id) },
  };
}

/** `read(row)`, or for a malformed row its key and the error, for a listing to show (ListedClaim). */
export function listedOf<R extends ClaimRow>(row: R, read: (row: R) => ClaimState): ListedClaim {
  try {
    return read(row);
  } catch (error) {
    if (!isWardenError(error)) throw error;
    // The key columns are the primary key: present, and text unless edited by hand.
    return { scope: String(row.scope), id: String(row.id), damaged: error };
  }
}

/** Maps a row to the domain record, refusing wrongly typed columns (the domain checks meaning). */
export function rowToRecord(row: ClaimRow): ClaimRecord {
  const released = integer(row, "released");
  if (released > 1) throw malformed(row, "released");
  const resultHash = optionalText(row, "result_hash");
  let result: StoredResult | undefined;
  if (resultHash !== undefined) {
    const payload = optionalText(row, "result");
    const prunedAt = optionalInteger(row, "pruned_at");
    result = {
      hash: resultHash as Digest,
      ...(payload === undefined ? {} : { payload }),
      recorded_at: time(row, "recorded_at"),
      ...(prunedAt === undefined ? {} : { pruned_at: prunedAt }),
      journal: {
        entries: integer(row, "journal_entries"),
        tail_hash: text(row, "journal_tail"),
        bytes: integer(row, "journal_bytes"),
        sha256: text(row, "journal_sha256") as Digest,
      },
    };
  } else if (row.result !== null || row.recorded_at !== null || row.journal_sha256 !== null) {
    throw malformed(row, "result_hash");
  }
  const receipt = optionalText(row, "receipt");
  return {
    scope: text(row, "scope"),
    id: text(row, "id"),
    request_hash: text(row, "request_hash") as Digest,
    agent: text(row, "agent"),
    run_id: text(row, "run_id"),
    owner: text(row, "owner"),
    created_at: time(row, "created_at"),
    released: released === 1,
    claim_hash: text(row, "claim_hash") as Digest,
    ...(result === undefined ? {} : { result }),
    ...(receipt === undefined ? {} : { receipt }),
  };
}
