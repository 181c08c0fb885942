/**
 * Versioned schema of the embedded claim store (`PRAGMA user_version` = number of migrations
 * applied). Append a migration to change it; never edit a released one.
 *
 * Claims are indexed by their (scope, id) primary key, so a lookup is one B-tree descent however
 * many identities the store holds. The two partial indexes cover only the rows an operator pages
 * through (open and reconciled claims), which stay few. The claim count lives in `counters` so the
 * capacity check is O(1) instead of a COUNT(*) over millions of rows.
 */
export const CLAIM_SCHEMA_MIGRATIONS: readonly string[] = [
  `
  CREATE TABLE claims (
    scope TEXT NOT NULL,
    id TEXT NOT NULL,
    request_hash TEXT NOT NULL,
    agent TEXT NOT NULL,
    run_id TEXT NOT NULL,
    owner TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    released INTEGER NOT NULL DEFAULT 0,
    claim_hash TEXT NOT NULL,
    result_hash TEXT,
    result TEXT,
    recorded_at INTEGER,
    pruned_at INTEGER,
    journal_entries INTEGER,
    journal_tail TEXT,
    journal_bytes INTEGER,
    journal_sha256 TEXT,
    receipt TEXT,
    PRIMARY KEY (scope, id)
  );
  CREATE INDEX claims_open ON claims (scope, id) WHERE result_hash IS NULL AND receipt IS NULL;
  CREATE INDEX claims_reconciled ON claims (scope, id) WHERE receipt IS NOT NULL;
  CREATE TABLE counters (name TEXT PRIMARY KEY, value INTEGER NOT NULL) WITHOUT ROWID;
  INSERT INTO counters (name, value) VALUES ('claims', 0);
  `,
  // Retention finds the results to drop through this index, in O(results dropped): without it,
  // every pass (the first at every start) read all claims, which delayed a node with 10^6 claims
  // from listening by as long as reading the whole table takes. Rows leave it as they are pruned.
  `
  CREATE INDEX claims_prunable ON claims (recorded_at, scope, id) WHERE result IS NOT NULL;
  `,
  // The operator's queue (status=unresolved) is the open rows (claims_open) and the rows a check
  // found a problem on (a journal changed since its seal, a damaged row): recorded here when a
  // lookup, a listing or the scrub finds one, so the queue never reads every recorded row.
  `
  CREATE TABLE claim_problems (
    scope TEXT NOT NULL,
    id TEXT NOT NULL,
    code TEXT NOT NULL,
    found_at INTEGER NOT NULL,
    PRIMARY KEY (scope, id)
  ) WITHOUT ROWID;
  `,
];

// The row shape both backends share lives below them; re-exported for the embedded claim files.
export { CLAIM_COLUMNS, type ClaimRow } from "../../shared/claim-rows.js";
