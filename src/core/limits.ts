import { ValidationError } from "./errors.js";

const KiB = 1024;
const MiB = 1024 * KiB;

/** Every bound warden enforces (G11). All are configuration; these are DESIGN.md's defaults. */
export interface Limits {
  /** scope string, bytes */
  readonly scopeBytes: number;
  /** canonical request identity, bytes */
  readonly requestBytes: number;
  /** canonical result payload, bytes */
  readonly resultBytes: number;
  /** one journal line, bytes */
  readonly journalEntryBytes: number;
  /** one whole journal, bytes */
  readonly journalBytes: number;
  /** a `note` event's payload, bytes */
  readonly noteBytes: number;
  /** claims a store may hold (identities; payloads are pruned separately) */
  readonly maxClaims: number;
  readonly bundleComponents: number;
  readonly fileBytes: number;
  readonly bundleBytes: number;
  readonly activeStages: number;
  readonly stagedBytes: number;
  readonly stageExpiryMs: number;
  readonly chunkBytes: number;
  readonly resultRetentionMs: number;
  /** agent runs one node executes at once (each is a process tree of its own) */
  readonly activeRuns: number;
  /** live event streams (SSE) one node serves at once (each holds a connection and reads its journal) */
  readonly eventStreams: number;
  /** HTTP connections one node holds open at once (each a file descriptor) */
  readonly connections: number;
  /** HTTP connections from one remote address at once */
  readonly connectionsPerClient: number;
  /** trees materialized through the API that one node keeps at once (each a copy of a bundle on disk) */
  readonly materializations: number;
  /**
   * bytes of one output stream (stdout, stderr) of one run kept on disk; what an agent prints past
   * it is still hashed, counted and read for events, but not stored
   */
  readonly runOutputBytes: number;
  /**
   * bytes the file system of the node's home must have available for a new run to be claimed: a
   * run needs room to record itself (journal, output, change set, result), and a disk an agent
   * filled must refuse new work, not run agents whose end cannot be written (G11)
   */
  readonly runFreeBytes: number;
  /** free inodes (files) that file system must have for a new run to be claimed, as runFreeBytes */
  readonly runFreeFiles: number;
  /**
   * bytes of file contents a run's change set may read (git's objects of both sides, held in
   * memory while it is made); its patch may be twice that. Past it the run is recorded with
   * `run.changes` saying `change-set-too-large`: an agent's multi-gigabyte file must not cost
   * the node its memory
   */
  readonly changeSetBytes: number;
}

export const DEFAULT_LIMITS: Limits = Object.freeze({
  scopeBytes: 256,
  requestBytes: 1 * MiB,
  resultBytes: 1 * MiB,
  journalEntryBytes: 1 * MiB,
  journalBytes: 64 * MiB,
  noteBytes: 64 * KiB,
  maxClaims: 100_000_000,
  bundleComponents: 128,
  fileBytes: 1 * MiB,
  bundleBytes: 32 * MiB,
  activeStages: 16,
  stagedBytes: 128 * MiB,
  stageExpiryMs: 15 * 60 * 1000,
  chunkBytes: 8 * MiB,
  resultRetentionMs: 30 * 24 * 60 * 60 * 1000,
  activeRuns: 32,
  eventStreams: 256,
  connections: 512,
  connectionsPerClient: 128,
  materializations: 64,
  runOutputBytes: 64 * MiB,
  runFreeBytes: 64 * MiB,
  runFreeFiles: 4096,
  changeSetBytes: 512 * MiB,
});

/** Merges overrides onto the defaults, refusing non-positive or non-integer values. */
export function resolveLimits(overrides: Partial<Limits> = {}): Limits {
  const merged: Record<string, number> = { ...DEFAULT_LIMITS };
  for (const [key, value] of Object.entries(overrides)) {
    if (value === undefined) continue;
    if (!(key in DEFAULT_LIMITS)) throw new ValidationError("invalid-limit", `unknown limit ${key}`);
    if (typeof value !== "number" || !Number.isSafeInteger(value) || value <= 0) {
      throw new ValidationError("invalid-limit", `limit ${key} must be a positive integer`);
    }
    merged[key] = value;
  }
  return Object.freeze(merged) as unknown as Limits;
}

export const UNITS = { KiB, MiB } as const;

/**
 * The latest time a Date can hold, in ms since the epoch: a stored time past it cannot be shown
 * as one (toISOString throws), so a record holding one is damaged.
 */
export const MAX_TIME_MS = 8_640_000_000_000_000;

/** A stored count (bytes, offsets, entries): a safe integer, not negative. */
export function isCount(value: unknown): value is number {
  return typeof value === "number" && Number.isSafeInteger(value) && value >= 0;
}

/** A stored time: ms since the epoch that a Date can hold (views show them as ISO times). */
export function isTime(value: unknown): value is number {
  return isCount(value) && value <= MAX_TIME_MS;
}
