/**
 * Owner liveness for the embedded backend. Every process incarnation that opens a store holds an
 * exclusive flock on `<owners>/<owner-id>.lock` for its whole life; the kernel drops it when the
 * process dies, however it dies. A claim records its owner id, so "is the owner alive" is a
 * non-blocking shared-lock probe on that file — it never blocks, and it never takes the lock in a
 * way that could make the live owner (or another prober) see contention.
 */
import { randomUUID } from "node:crypto";
import { lstatSync, readdirSync, renameSync, unlinkSync } from "node:fs";
import { join } from "node:path";
import { errnoCode, IntegrityError, StorageError } from "../../../core/errors.js";
import { isUuid } from "../../../journal/schema.js";
import { FileLock } from "../../../storage/lock.js";
import { auditPrivateTreeSync, syncDirSync } from "../../../storage/secure-fs.js";

const LOCK_NAME_RE = /^(?:\.pending-)?[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\.lock$/;
const PENDING_PREFIX = ".pending-";
const STALE_PENDING_MS = 60_000;

export class OwnerRegistry {
  /** This incarnation's owner id, recorded on every claim it creates. */
  readonly id: string;
  readonly #dir: string;
  #lock: FileLock | undefined;

  private constructor(dir: string, id: string, lock: FileLock) {
    this.#dir = dir;
    this.id = id;
    this.#lock = lock;
  }

  /**
   * Validates `dir` (private, only owner lock files), removes lock files of dead owners, and
   * registers a new owner. The lock is taken under a pending name and renamed into place only
   * once held, so a sweep in another process never finds a fresh owner's file unlocked.
   */
  static open(dir: string): OwnerRegistry {
    auditPrivateTreeSync(dir, (name, isDirectory) =>
      !isDirectory && LOCK_NAME_RE.test(name) ? undefined : "only owner lock files belong in owners/",
    );
    sweepDeadOwners(dir);
    for (let attempt = 0; attempt < 8; attempt++) {
      const id = randomUUID();
      const pending = join(dir, `${PENDING_PREFIX}${id}.lock`);
      const lock = FileLock.tryAcquire(pending);
      if (lock === undefined) continue;
      try {
        renameSync(pending, join(dir, `${id}.lock`));
      } catch (error) {
        lock.release();
        // A sweeper removed the pending file between our open and flock: try a new id.
        if (errnoCode(error) === "ENOENT") continue;
        throw error;
      }
      return new OwnerRegistry(dir, id, lock);
    }
    throw new StorageError("owner-register-failed", `could not register an owner lock in ${dir}`);
  }

  get open(): boolean {
    return this.#lock !== undefined;
  }

  /** True while the owner `ownerId` is a living process incarnation. */
  isAlive(ownerId: string): boolean {
    if (ownerId === this.id) return this.open;
    if (!isUuid(ownerId)) {
      throw new IntegrityError("claim-owner-invalid", `claim owner ${JSON.stringify(ownerId)} is not an owner id`, {
        status: 500,
      });
    }
    return !FileLock.isFree(join(this.#dir, `${ownerId}.lock`));
  }

  /**
   * Ends this incarnation: the lock file is removed while still locked (so no prober can mistake
   * the removal for anything but "gone"), then the lock is dropped. Claims it left without a
   * result now read `unresolved`.
   */
  close(): void {
    const lock = this.#lock;
    if (lock === undefined) return;
    this.#lock = undefined;
    try {
      unlinkSync(join(this.#dir, `${this.id}.lock`));
    } catch (error) {
      if (errnoCode(error) !== "ENOENT") throw error;
    } finally {
      lock.release();
    }
  }
}

/**
 * Removes lock files nobody holds. Each is removed only while we hold its lock ourselves. A
 * pending file is a registration in progress (create, lock, rename take microseconds), so one is
 * only swept once it is old enough that its creator must have died in between.
 */
function sweepDeadOwners(dir: string): void {
  let removed = false;
  const now = Date.now();
  for (const name of readdirSync(dir)) {
    if (!LOCK_NAME_RE.test(name)) continue;
    const path = join(dir, name);
    if (name.startsWith(PENDING_PREFIX)) {
      // Its creator may rename it into place between our readdir and this lstat.
      const st = lstatSync(path, { throwIfNoEntry: false });
      if (st === undefined || now - st.mtimeMs < STALE_PENDING_MS) continue;
    }
    const lock = FileLock.tryAcquire(path);
    if (lock === undefined) continue;
    try {
      unlinkSync(path);
      removed = true;
    } catch (error) {
      if (errnoCode(error) !== "ENOENT") throw error;
    } finally {
      lock.release();
    }
  }
  if (removed) syncDirSync(dir);
}
