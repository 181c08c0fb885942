/** Messages between the claim store and its write worker (claim-write-worker.ts), and error transport. */
import type { Digest } from "../../../core/digest.js";
import {
  ConflictError,
  IntegrityError,
  LimitError,
  NotFoundError,
  StorageError,
  ValidationError,
  type ErrorDetails,
  type WardenError,
} from "../../../core/errors.js";
import type { ClaimKey, NewClaim, StoredResult } from "../../../invocations/claim-store.js";
import type { ClaimWrites } from "./claim-writer.js";
import type { QueueWriteOp } from "./queue-writer.js";
import type { OpenDatabaseOptions } from "../../../storage/sqlite.js";

export interface ClaimWriterConfig {
  readonly path: string;
  readonly database?: OpenDatabaseOptions;
  readonly owner: string;
  readonly maxClaims: number;
}

export type ClaimWriteOp =
  | { readonly op: "claim"; readonly claim: NewClaim; readonly dequeued?: boolean }
  | { readonly op: "queue"; readonly queue: QueueWriteOp }
  | { readonly op: "record"; readonly key: ClaimKey; readonly runId: string; readonly result: StoredResult; readonly claimHash: Digest }
  | { readonly op: "release"; readonly key: ClaimKey; readonly runId: string }
  | { readonly op: "attachReceipt"; readonly key: ClaimKey; readonly claimHash: Digest; readonly receipt: string }
  | { readonly op: "prune"; readonly keys: readonly ClaimKey[]; readonly now: number }
  | { readonly op: "noteProblem"; readonly key: ClaimKey; readonly code: string | undefined; readonly at: number };

export type ClaimWriteRequest = ClaimWriteOp & { readonly id: number };

export interface SerializedError {
  readonly name: string;
  readonly code: string;
  readonly message: string;
  readonly status: number;
  readonly details?: ErrorDetails;
}

export type ClaimWriteReply = { readonly id: number; readonly ok: true; readonly value: unknown } | { readonly id: number; readonly ok: false; readonly error: SerializedError };

/** The typed error a worker reported, rebuilt on this side (same class, code, status, details). */
export function deserializeError(e: SerializedError): WardenError {
  const options = { status: e.status, ...(e.details === undefined ? {} : { details: e.details }) };
  switch (e.name) {
    case "LimitError":
      return new LimitError(e.code, e.message, options);
    case "IntegrityError":
      return new IntegrityError(e.code, e.message, options);
    case "ConflictError":
      return new ConflictError(e.code, e.message, options);
    case "ValidationError":
      return new ValidationError(e.code, e.message, options);
    case "NotFoundError":
      return new NotFoundError(e.code, e.message, options);
    default:
      return new StorageError(e.code, e.message, options);
  }
}

/** Runs one write request on a writer, wherever it lives. */
export function applyClaimWrite(writes: ClaimWrites, op: ClaimWriteOp): Promise<unknown> {
  switch (op.op) {
    case "claim":
      return writes.claim(op.claim, op.dequeued === true);
    case "queue":
      return writes.queue(op.queue);
    case "record":
      return writes.record(op.key, op.runId, op.result, op.claimHash);
    case "release":
      return writes.release(op.key, op.runId);
    case "attachReceipt":
      return writes.attachReceipt(op.key, op.claimHash, op.receipt);
    case "prune":
      return writes.prune(op.keys, op.now);
    case "noteProblem":
      return writes.noteProblem(op.key, op.code, op.at);
  }
}
