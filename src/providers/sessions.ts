/**
 * Session names and session ownership under a materializations root. A session directory is
 * owned by the process holding the flock of `<root>/.lock-<session>`; the kernel drops it when
 * that process dies, so any process can tell a live tree from one a crash left behind (the same
 * liveness rule the claim store uses for owners).
 */
import * as fsp from "node:fs/promises";
import { join } from "node:path";
import { ConflictError, ValidationError } from "../core/errors.js";
import { FileLock } from "../storage/lock.js";

const SESSION_RE = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$/;
export const LOCK_PREFIX = ".lock-";

export function isSessionName(value: string): boolean {
  return SESSION_RE.test(value);
}

/** A session name becomes one directory name: no separators, no leading dot, no traversal. */
export function validateSessionName(session: unknown): string {
  if (typeof session !== "string" || !isSessionName(session)) {
    throw new ValidationError(
      "session-name-invalid",
      "a session name is 1–128 of A-Z a-z 0-9 . _ -, starting with a letter or digit",
      { details: { session: typeof session === "string" ? session.slice(0, 200) : null } },
    );
  }
  return session;
}

export function sessionExists(session: string): ConflictError {
  return new ConflictError("materialization-exists", `session ${JSON.stringify(session)} is already materialized`, {
    details: { session },
  });
}

/** The ownership locks of the sessions this process holds. */
export class SessionLocks {
  readonly #root: string;
  readonly #held = new Map<string, FileLock>();

  constructor(root: string) {
    this.#root = root;
  }

  path(session: string): string {
    return join(this.#root, `${LOCK_PREFIX}${session}`);
  }

  owns(session: string): boolean {
    return this.#held.has(session);
  }

  /** Takes ownership of `session`, or refuses: ours already (exists) or another process's (busy). */
  acquire(session: string): void {
    if (this.#held.has(session)) throw sessionExists(session);
    const lock = FileLock.tryAcquire(this.path(session));
    if (lock === undefined) {
      throw new ConflictError("materialization-busy", `session ${JSON.stringify(session)} is owned by another process`, {
        details: { session },
      });
    }
    this.#held.set(session, lock);
  }

  /** Gives ownership up and removes the lock file (removed while still held, so nobody races in). */
  async release(session: string): Promise<void> {
    const lock = this.#held.get(session);
    if (lock === undefined) return;
    this.#held.delete(session);
    try {
      await fsp.rm(this.path(session), { force: true });
    } finally {
      lock.release();
    }
  }

  /**
   * Runs `fn` while holding the lock of a session nobody owns (its process died), then removes
   * the lock file. Returns false, without running `fn`, when a live owner holds it.
   */
  async withOrphan(session: string, fn: () => Promise<void>): Promise<boolean> {
    if (this.#held.has(session)) return false;
    const lock = FileLock.tryAcquire(this.path(session));
    if (lock === undefined) return false;
    try {
      await fn();
      await fsp.rm(this.path(session), { force: true });
      return true;
    } finally {
      lock.release();
    }
  }
}
