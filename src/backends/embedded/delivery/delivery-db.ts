/**
 * The delivery metadata database: its own SQLite file (not shared with the invocations store),
 * opened through sqlite.ts (private file, WAL, synchronous=FULL: a committed transaction is on
 * disk before the caller is answered) and versioned with PRAGMA user_version.
 */
import { migrateSchema, openPrivateDatabase, type SqliteDatabase } from "../../../storage/sqlite.js";

export type DeliveryDatabase = SqliteDatabase;

/** Schema migrations, in order: index v brings a database from user_version v to v + 1. */
const MIGRATIONS: readonly string[] = [
  `
CREATE TABLE stages (
  stage_id        TEXT PRIMARY KEY,
  manifest_digest TEXT NOT NULL UNIQUE,
  manifest        TEXT NOT NULL,
  created_at      INTEGER NOT NULL,
  last_active_at  INTEGER NOT NULL,
  reserved_bytes  INTEGER NOT NULL
) STRICT;
CREATE TABLE stage_blobs (
  stage_id  TEXT NOT NULL REFERENCES stages(stage_id) ON DELETE CASCADE,
  digest    TEXT NOT NULL,
  byte_len  INTEGER NOT NULL,
  received  INTEGER NOT NULL,
  complete  INTEGER NOT NULL,
  PRIMARY KEY (stage_id, digest)
) STRICT, WITHOUT ROWID;
CREATE TABLE commits (
  seq             INTEGER PRIMARY KEY AUTOINCREMENT,
  manifest_digest TEXT NOT NULL UNIQUE,
  stage_id        TEXT NOT NULL UNIQUE,
  bundle_id       TEXT NOT NULL,
  revision        TEXT NOT NULL,
  manifest        TEXT NOT NULL,
  committed_at    INTEGER NOT NULL,
  retired_at      INTEGER,
  UNIQUE (bundle_id, revision)
) STRICT;
CREATE TABLE commit_blobs (
  manifest_digest TEXT NOT NULL REFERENCES commits(manifest_digest),
  digest          TEXT NOT NULL,
  PRIMARY KEY (manifest_digest, digest)
) STRICT, WITHOUT ROWID;
CREATE INDEX commit_blobs_by_digest ON commit_blobs(digest);
`,
  // 2: bundle signatures (DESIGN.md "Bundle signatures"), one per revision and signing key
  `
CREATE TABLE commit_signatures (
  manifest_digest TEXT NOT NULL REFERENCES commits(manifest_digest),
  fingerprint     TEXT NOT NULL,
  key_type        TEXT NOT NULL,
  principals      TEXT NOT NULL,
  signature       TEXT NOT NULL,
  signed_at       INTEGER NOT NULL,
  at_commit       INTEGER NOT NULL,
  PRIMARY KEY (manifest_digest, fingerprint)
) STRICT;
`,
  // 3: the transparency log's catch-up reads what was committed or signed since its watermark
  `
CREATE INDEX commits_by_time ON commits(committed_at);
CREATE INDEX commit_signatures_by_time ON commit_signatures(signed_at);
`,
];

/** Opens (creating it private when missing) and migrates the delivery database. */
export function openDeliveryDatabase(path: string): DeliveryDatabase {
  const db = openPrivateDatabase(path);
  try {
    db.pragma("foreign_keys = ON");
    migrateSchema(db, MIGRATIONS, "delivery");
    return db;
  } catch (error) {
    db.close();
    throw error;
  }
}
