/**
 * Fault-injection seam of the embedded delivery backend. Tests pass `faults.at`, which runs at
 * each named point: throwing models an I/O failure at that step (an fsync that fails, a record
 * that cannot be written), and a child process may SIGKILL itself there to model a crash.
 * Production code passes nothing and the seam costs one optional call.
 */
export type DeliveryFaultPoint =
  /** a new partial file was created, before any byte is appended */
  | "partial-created"
  /** a chunk's bytes were appended, before they are fsynced */
  | "chunk-written"
  /** before bytes of a partial are read back (a replayed chunk, a running hash rebuilt, a commit's check) */
  | "partial-read"
  /** at commit, before the fdatasync that makes a complete partial durable for its publication */
  | "partial-sync"
  /** inside the transaction writing a stage's latest activity (at most once a second), before it commits */
  | "activity-record"
  /** a complete partial was linked into the blob store, before it is recorded complete and its partial name dropped */
  | "blob-linked"
  /** before the fsync of a blob shard directory */
  | "blob-dir-sync"
  /** `put` wrote and fsynced its temp file, before publishing it (a throw here leaves the temp, like a crash) */
  | "blob-temp-written"
  /** inside the commit transaction, before it commits */
  | "commit-record"
  /** the commit transaction is durable, before the caller hears of it */
  | "commit-recorded"
  /** inside the transaction deleting a stage's row (at commit, abort or expiry), before it commits */
  | "stage-row-delete"
  /** before a closed stage's files are removed */
  | "stage-remove";

export interface DeliveryFaults {
  readonly at?: (point: DeliveryFaultPoint) => void;
}

export function fire(faults: DeliveryFaults | undefined, point: DeliveryFaultPoint): void {
  faults?.at?.(point);
}
