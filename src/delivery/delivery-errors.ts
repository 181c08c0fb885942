/**
 * The errors of the delivery service, one constructor per rule so that each code is spelled in
 * one place, and `guard`: every failure leaves the service as a WardenError.
 */
import type { Digest } from "../core/digest.js";
import { ConflictError, IntegrityError, LimitError, NotFoundError, StorageError, ValidationError, isStorageFull, isWardenError, storageFull } from "../core/errors.js";
import { missingOf, type StageBlob, type StageRecord } from "./stage.js";

/** A raw error from a backend (an fs errno, a database error) means the store failed; the caller may retry. */
export async function guard<T>(fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (error) {
    throw asWardenError(error);
  }
}

export async function* guardStream(source: AsyncIterable<Uint8Array>): AsyncIterable<Uint8Array> {
  try {
    yield* source;
  } catch (error) {
    throw asWardenError(error);
  }
}

function asWardenError(error: unknown): Error {
  if (isWardenError(error)) return error;
  // The write that failed was taken back (a chunk's partial is cut to its acknowledged offset).
  if (isStorageFull(error)) return storageFull("store delivery data", error);
  const message = error instanceof Error ? error.message : String(error);
  return new StorageError("delivery-storage-failed", `delivery storage failed: ${message}`, { cause: error });
}

/**
 * A chunk's body that failed as it was read (over HTTP: the client went away mid-chunk, "aborted",
 * or stalled until the node cut it off) is the sender's failure, never the store's: it must not
 * read as `delivery-storage-failed`, which an operator would chase as a disk problem. Nothing of
 * the chunk is kept (the partial is cut back to its acknowledged offset).
 */
export async function* senderBody(source: AsyncIterable<Uint8Array>): AsyncIterable<Uint8Array> {
  try {
    yield* source;
  } catch (error) {
    // A body that names its own failure (a blob pack's frame cut short by its framing) keeps it.
    throw isWardenError(error) ? error : chunkBodyAborted(error);
  }
}

export function chunkBodyAborted(cause: unknown): ValidationError {
  const why = cause instanceof Error ? cause.message : String(cause);
  return new ValidationError("chunk-body-aborted", `the chunk's body ended before it was whole (${why}); nothing of it was kept: resume from the stage's offset`, {
    cause,
  });
}

/** A blob's received bytes are gone (`why`); the stage asks for the blob again from offset 0. */
export function partialLost(stageId: string, digest: Digest, why: string): IntegrityError {
  return new IntegrityError("stage-partial-lost", `${why}; it restarts at 0`, { details: { stage_id: stageId, digest, expected_offset: 0 } });
}

export function stageNotFound(stageId: string): NotFoundError {
  return new NotFoundError("stage-not-found", `no stage ${stageId}`, { details: { stage_id: stageId } });
}

export function stageBlobNotFound(stageId: string, digest: Digest): NotFoundError {
  return new NotFoundError("stage-blob-not-found", `stage ${stageId} does not expect blob ${digest}`, {
    details: { stage_id: stageId, digest },
  });
}

/**
 * Capacity refusals answer 429: new work may succeed once stages close or expire (G11). An
 * interrupted push never printed its stage: the refusal names the open ones, when the longest idle
 * one expires, and how to close one now, so that an operator is not left waiting blind.
 */
export function stageCapacityExhausted(
  open: readonly { readonly stage_id: string; readonly last_active_at: number }[],
  limit: number,
  now: number,
  expiryMs: number,
): LimitError {
  // A damaged stage's activity may hold no time: it is named, but cannot say when it expires.
  const since = (s: { readonly last_active_at: number }): number => (Number.isFinite(s.last_active_at) ? s.last_active_at : 0);
  const idle = [...open].sort((a, b) => since(a) - since(b));
  const oldest = idle.find((s) => Number.isFinite(s.last_active_at));
  const expiresInS = oldest === undefined ? 0 : Math.max(0, Math.ceil((oldest.last_active_at + expiryMs - now) / 1000));
  const when = oldest === undefined ? "" : `; the longest idle, ${oldest.stage_id}, expires in ${expiresInS} s`;
  const rule =
    `${open.length} upload stages are open, the limit is ${limit}${when}. ` +
    "Run an interrupted push again to finish its stage, or drop one with DELETE /v1/stages/{stage_id}";
  return new LimitError("stage-capacity-exhausted", rule, {
    status: 429,
    details: { active: open.length, limit, stages: idle.map((s) => s.stage_id) },
  });
}

export function stagedBytesExhausted(staged: number, requested: number, limit: number): LimitError {
  return new LimitError("staged-bytes-exhausted", `staging ${requested} more bytes would exceed ${limit}`, {
    status: 429,
    details: { staged, requested, limit },
  });
}

export function stageExpired(stageId: string, expiryMs: number): NotFoundError {
  return new NotFoundError("stage-expired", `stage ${stageId} expired after ${expiryMs} ms without activity`, {
    details: { stage_id: stageId },
  });
}

export function stageCommitted(stageId: string): ConflictError {
  return new ConflictError("stage-committed", `stage ${stageId} is already committed`, { details: { stage_id: stageId } });
}

export function throwIfIncomplete(stage: StageRecord): void {
  const missing = missingOf(stage);
  if (missing.length === 0) return;
  const bytes = missing.reduce((sum, m) => sum + (m.byte_len - m.offset), 0);
  throw new ConflictError("stage-incomplete", `${missing.length} blob(s), ${bytes} byte(s) still missing`, {
    details: { stage_id: stage.stage_id, missing_blobs: missing.length, missing_bytes: bytes },
  });
}

export function outOfOrder(blob: StageBlob, expected: number, offset: number): ConflictError {
  return new ConflictError("chunk-out-of-order", `blob ${blob.digest} expects a chunk at offset ${expected}, got ${offset}`, {
    details: { digest: blob.digest, expected_offset: expected, offset },
  });
}

export function overflow(blob: StageBlob, end: number): LimitError {
  return new LimitError("chunk-overflow", `a chunk ending at ${end} passes the blob's ${blob.byte_len} bytes`, {
    details: { digest: blob.digest, byte_len: blob.byte_len, end },
  });
}

export function chunkTooLarge(bytes: number, limit: number): LimitError {
  return new LimitError("chunk-too-large", `a chunk of ${bytes} bytes is over the limit of ${limit}`, { details: { limit } });
}

export function bundleNotFound(bundleId: string): NotFoundError {
  return new NotFoundError("bundle-not-found", `no bundle ${JSON.stringify(bundleId)}`, { details: { bundle_id: bundleId } });
}

export function revisionNotFound(bundleId: string, revision: string): NotFoundError {
  return new NotFoundError("revision-not-found", `no revision ${JSON.stringify(revision)} of bundle ${JSON.stringify(bundleId)}`, {
    details: { bundle_id: bundleId, revision },
  });
}

export function revisionRetired(bundleId: string, revision: string): ConflictError {
  return new ConflictError("revision-retired", `revision ${JSON.stringify(revision)} of bundle ${JSON.stringify(bundleId)} is retired`, {
    details: { bundle_id: bundleId, revision },
  });
}

export function revisionConflict(bundleId: string, revision: string, committedDigest: Digest): ConflictError {
  return new ConflictError(
    "revision-conflict",
    `revision ${JSON.stringify(revision)} of bundle ${JSON.stringify(bundleId)} is already committed with other content`,
    { details: { bundle_id: bundleId, revision, committed_manifest_digest: committedDigest } },
  );
}
