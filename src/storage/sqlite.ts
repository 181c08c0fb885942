/**
 * Opens an SQLite database that lives inside a private state directory (G10). better-sqlite3 is
 * imported here and nowhere outside src/backends: the domain only sees store interfaces.
 *
 * SQLite follows symlinks and ignores permission bits, so the database file and its `-wal`,
 * `-shm` and `-journal` companions are validated with the secure-storage rules before the
 * database is opened (and again after, because opening in WAL mode creates the companions).
 */
import { closeSync, fsyncSync, lstatSync } from "node:fs";
import { dirname } from "node:path";
import Database from "better-sqlite3";
import {
  errnoCode,
  IntegrityError,
  isStorageFull,
  StorageError,
  storageFull,
  WardenError,
} from "../core/errors.js";
import { nearlyFull } from "./room.js";
import { checkFileStats, checkPrivateDirSync, createPrivateFileSync, syncDirSync } from "./secure-fs.js";

export type SqliteDatabase = Database.Database;
export type SqliteStatement<P extends unknown[] = unknown[], R = unknown> = Database.Statement<P, R>;

export interface OpenDatabaseOptions {
  /** How long a writer waits for another process's write transaction, ms. */
  readonly busyTimeoutMs?: number;
  /** Page cache per connection, KiB. Bounded so a store with millions of rows keeps a small RSS. */
  readonly cacheKiB?: number;
  /**
   * Fault-injection seam: caps the database at this many pages so tests can reach SQLITE_FULL
   * (a full disk) without filling a real disk.
   */
  readonly maxPageCount?: number;
}

const COMPANION_SUFFIXES = ["-wal", "-shm", "-journal"] as const;

/** Validates the database file and any companion file present; missing files are fine. */
export function checkDatabaseFiles(path: string): void {
  for (const candidate of [path, ...COMPANION_SUFFIXES.map((s) => path + s)]) {
    let st;
    try {
      st = lstatSync(candidate);
    } catch (error) {
      if (errnoCode(error) === "ENOENT") continue;
      throw error;
    }
    checkFileStats(candidate, st);
  }
}

function createEmptyDatabaseFile(path: string): void {
  let fd: number;
  try {
    fd = createPrivateFileSync(path);
  } catch (error) {
    // Another process created it first; it is validated like any existing file.
    if (errnoCode(error) === "EEXIST") return;
    throw error;
  }
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  syncDirSync(dirname(path));
}

/**
 * Opens (creating when missing) a private SQLite database in WAL mode with synchronous=FULL, so
 * a committed transaction is on disk when COMMIT returns (G1 relies on this).
 */
export function openPrivateDatabase(path: string, options: OpenDatabaseOptions = {}): SqliteDatabase {
  checkPrivateDirSync(dirname(path));
  checkDatabaseFiles(path);
  createEmptyDatabaseFile(path);
  checkDatabaseFiles(path);
  let db: SqliteDatabase;
  try {
    db = new Database(path, { fileMustExist: true, timeout: options.busyTimeoutMs ?? 5000 });
  } catch (error) {
    throw sqliteFailure(error, `open the database ${path}`, path);
  }
  try {
    const mode = db.pragma("journal_mode = WAL", { simple: true });
    if (mode !== "wal") throw new StorageError("database-not-wal", `${path}: journal_mode is ${String(mode)}, not wal`);
    db.pragma("synchronous = FULL");
    db.pragma(`cache_size = -${options.cacheKiB ?? 8192}`);
    if (options.maxPageCount !== undefined) db.pragma(`max_page_count = ${options.maxPageCount}`);
    checkDatabaseFiles(path);
    return db;
  } catch (error) {
    db.close();
    throw error instanceof WardenError ? error : sqliteFailure(error, `configure the database ${path}`, path);
  }
}

/** SQLite's extended result code, e.g. `SQLITE_FULL`, or undefined for other errors. */
export function sqliteCode(error: unknown): string | undefined {
  const code = errnoCode(error);
  return code !== undefined && code.startsWith("SQLITE_") ? code : undefined;
}

/**
 * Maps an SQLite (or fs) failure to a typed error. A full database or disk refuses new work as
 * exhausted capacity (G11); the transaction was rolled back, so nothing was deleted or half-written.
 * With the database's `path`, an I/O error on a file system with no room left is that too.
 */
export function sqliteFailure(error: unknown, doing: string, path?: string): WardenError {
  if (error instanceof WardenError) return error;
  const code = sqliteCode(error) ?? errnoCode(error) ?? "unknown";
  const message = error instanceof Error ? error.message : String(error);
  if (code === "SQLITE_FULL" || isStorageFull(error)) return storageFull(doing, error);
  if (code.startsWith("SQLITE_IOERR") && path !== undefined && nearlyFull(dirname(path))) return storageFull(doing, error);
  if (code.startsWith("SQLITE_BUSY") || code.startsWith("SQLITE_LOCKED")) {
    return new StorageError("storage-busy", `could not ${doing}: the database is busy; retry (${message})`, { cause: error });
  }
  if (code.startsWith("SQLITE_CORRUPT") || code === "SQLITE_NOTADB") {
    return new IntegrityError("database-corrupt", `could not ${doing}: the database is damaged (${message})`, {
      status: 500,
      cause: error,
    });
  }
  return new StorageError("storage-io", `could not ${doing}: ${message}`, { cause: error });
}

/**
 * Runs `migrations[v..]` for a database at `PRAGMA user_version = v`, in one immediate
 * transaction so concurrent first opens by several processes migrate exactly once.
 */
export function migrateSchema(db: SqliteDatabase, migrations: readonly string[], what: string): void {
  const migrate = db.transaction(() => {
    const version = db.pragma("user_version", { simple: true });
    if (typeof version !== "number" || !Number.isInteger(version) || version < 0) {
      throw new IntegrityError("database-schema-invalid", `${what}: user_version is ${String(version)}`, { status: 500 });
    }
    if (version > migrations.length) {
      throw new StorageError(
        "database-schema-too-new",
        `${what}: schema version ${version} is newer than this warden supports (${migrations.length})`,
      );
    }
    for (let v = version; v < migrations.length; v++) db.exec(migrations[v]!);
    if (version !== migrations.length) db.pragma(`user_version = ${migrations.length}`);
  });
  try {
    migrate.immediate();
  } catch (error) {
    throw sqliteFailure(error, `migrate the ${what} schema`, db.name);
  }
}
