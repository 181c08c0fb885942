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
  // Queued invocations (DESIGN.md "Queued invocations"), in the claims' file so that one
  // transaction moves a row to started and creates its claim. queue_waiting serves the dequeue's
  // per-principal candidates, queue_going the counts of runs going and the dead-lease sweep,
  // queue_recent the per-provider rate; queue_principals keeps who was served last.
  `
  CREATE TABLE queue (
    scope TEXT NOT NULL,
    id TEXT NOT NULL,
    request TEXT NOT NULL,
    request_hash TEXT NOT NULL,
    principal TEXT NOT NULL,
    workspace TEXT NOT NULL,
    provider TEXT NOT NULL,
    priority INTEGER NOT NULL,
    labels TEXT NOT NULL,
    enqueued_at INTEGER NOT NULL,
    deadline INTEGER NOT NULL,
    state TEXT NOT NULL,
    lease_owner TEXT,
    leased_at INTEGER,
    started_at INTEGER,
    ended_at INTEGER,
    cancelled_by TEXT,
    error TEXT,
    PRIMARY KEY (scope, id)
  ) WITHOUT ROWID;
  CREATE INDEX queue_waiting ON queue (principal, priority DESC, enqueued_at) WHERE state = 'queued';
  CREATE INDEX queue_going ON queue (lease_owner) WHERE state IN ('leased', 'started') AND ended_at IS NULL;
  CREATE INDEX queue_recent ON queue (leased_at) WHERE leased_at IS NOT NULL;
  CREATE INDEX queue_by_state ON queue (state, scope, id);
  CREATE TABLE queue_principals (principal TEXT PRIMARY KEY, last_served INTEGER NOT NULL) WITHOUT ROWID;
  `,
];

// The row shape both backends share lives below them; re-exported for the embedded claim files.
export { CLAIM_COLUMNS, type ClaimRow } from "../../shared/claim-rows.js";
