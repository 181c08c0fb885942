/**
 * A node's claim on its home: one process at a time, and the backend it serves, recorded on its
 * first start and checked on every start.
 *
 * Two processes serving one home would share its node.json (the second one's exit removed the
 * first one's, and the CLI lost its node), its outputs and its agents' records; on the embedded
 * backend the delivery store's own lock refused the second only part-way through opening.
 *
 * The claims that make a run happen at most once (G1) live in the backend, not in the home. A
 * fleet node restarted without `--postgres` (an environment that lost WARDEN_POSTGRES_URL) would
 * otherwise start on a fresh embedded store in the same home and run again every id the fleet
 * already ran; an embedded home started with `--postgres` would hide its own claims, unresolved
 * ones included. Either is refused, naming both, before anything is opened.
 */
import { existsSync } from "node:fs";
import { join } from "node:path";
import { ConflictError, errnoCode } from "../core/errors.js";
import { CLAIMS_DATABASE } from "../backends/embedded/index.js";
import { FileLock } from "../storage/lock.js";
import { publishNewFileSync, readPrivateFileSync } from "../storage/secure-fs.js";
import { HOME_BACKEND_FILE, HOME_LOCK_FILE } from "./home-files.js";

export type HomeBackend = "embedded" | "postgres";

export { HOME_BACKEND_FILE, HOME_LOCK_FILE } from "./home-files.js";

const KINDS: readonly HomeBackend[] = ["embedded", "postgres"];

/** A home taken by this process, whose backend is recorded once it has opened. */
export interface HomeClaim {
  /** held until released, or until the process dies */
  readonly lock: FileLock;
  /**
   * Records the backend on the home's first start, once it opened: a first start that failed (a
   * database that does not exist, a wrong password) leaves the home free for either backend.
   */
  record(): void;
}

/**
 * Takes the home for this process and checks its backend; refuses a home another process serves,
 * or one that served the other backend.
 */
export function claimHome(home: string, kind: HomeBackend): HomeClaim {
  const lock = takeHome(home);
  let first: boolean;
  try {
    first = checkHomeBackend(home, kind);
  } catch (error) {
    lock.release();
    throw error;
  }
  return { lock, record: () => (first ? recordHomeBackend(home, kind) : undefined) };
}

/**
 * Runs `fn` holding the home, as a start does before its stores open: what a start writes in the
 * home first (the operator token a first start generates) must not race another start on it, and
 * a home another process serves is refused before anything in it is touched.
 */
export function whileHomeHeld<T>(home: string, fn: () => T): T {
  const lock = takeHome(home);
  try {
    return fn();
  } finally {
    lock.release();
  }
}

function takeHome(home: string): FileLock {
  const lock = FileLock.tryAcquire(join(home, HOME_LOCK_FILE));
  if (lock === undefined) {
    throw new ConflictError("home-in-use", `${home} is served by another warden process; give each node a home of its own (--home)`, { details: { home } });
  }
  return lock;
}

/** Refuses a home that served another backend; true on its first start (nothing recorded yet). */
function checkHomeBackend(home: string, kind: HomeBackend): boolean {
  const path = join(home, HOME_BACKEND_FILE);
  const recorded = recordedBackend(path);
  if (recorded === undefined) {
    // A home from before this record: its embedded claims say what it served.
    if (kind === "postgres" && existsSync(join(home, CLAIMS_DATABASE))) throw mismatch(home, "embedded", kind, join(home, CLAIMS_DATABASE));
    return true;
  }
  if (recorded !== kind) throw mismatch(home, recorded, kind, path);
  return false;
}

function recordHomeBackend(home: string, kind: HomeBackend): void {
  const path = join(home, HOME_BACKEND_FILE);
  publishNewFileSync(path, `${kind}\n`);
  const now = recordedBackend(path);
  if (now !== kind) throw mismatch(home, now ?? "an unreadable", kind, path);
}

function recordedBackend(path: string): HomeBackend | undefined {
  let text: string;
  try {
    text = readPrivateFileSync(path, 64).toString("utf8").trim();
  } catch (error) {
    if (errnoCode(error) === "ENOENT") return undefined;
    throw error;
  }
  const kind = KINDS.find((k) => k === text);
  if (kind === undefined) {
    throw new ConflictError("home-backend-unknown", `${path} names no backend warden knows (${JSON.stringify(text.slice(0, 32))}); it is not changed`);
  }
  return kind;
}

function mismatch(home: string, recorded: string, wanted: HomeBackend, evidence: string): ConflictError {
  const how = wanted === "postgres" ? "with --postgres (or WARDEN_POSTGRES_URL)" : "without --postgres";
  return new ConflictError(
    "home-backend-mismatch",
    `${home} serves the ${recorded} backend (${evidence}); starting it ${how} would answer ids that ran there as new or hide them. ` +
      `Start it as before, or give this node another --home`,
    { details: { home, recorded, wanted } },
  );
}
