/**
 * The versioned schema of the postgres backend. `migrate` runs at every start: under a
 * transaction-scoped advisory lock, so nodes starting at the same moment apply each migration
 * exactly once (the others wait, then find it recorded), and each migration commits together
 * with its row in `warden_schema`. Append a migration to change the schema; never edit one.
 *
 * Text keys use the "C" collation: byte order of UTF-8 (the order the embedded backend lists in)
 * and the cheapest comparisons. Every lookup a request makes is a B-tree descent on a primary
 * key or an index below; nothing scans a table on a request path.
 */
import { StorageError } from "../../core/errors.js";
import { query, transaction, type PgPool } from "./connection.js";

/** Advisory lock key (transaction scope) that serialises migrations: "warden-m" in ASCII. */
const MIGRATION_LOCK_KEY = "8602282538778373485";

export const SCHEMA_MIGRATIONS: readonly string[] = [
  // 1: claims, journals, keys
  `
  CREATE TABLE warden_claims (
    scope text COLLATE "C" NOT NULL,
    id text COLLATE "C" NOT NULL,
    request_hash text NOT NULL,
    agent text NOT NULL,
    run_id text NOT NULL,
    owner text NOT NULL,
    created_at bigint NOT NULL,
    released boolean NOT NULL DEFAULT false,
    claim_hash text NOT NULL,
    result_hash text,
    result text,
    recorded_at bigint,
    pruned_at bigint,
    journal_entries bigint,
    journal_tail text,
    journal_bytes bigint,
    journal_sha256 text,
    receipt text,
    PRIMARY KEY (scope, id)
  );
  CREATE INDEX warden_claims_open ON warden_claims (scope, id) WHERE result_hash IS NULL AND receipt IS NULL;
  CREATE INDEX warden_claims_reconciled ON warden_claims (scope, id) WHERE receipt IS NOT NULL;
  CREATE INDEX warden_claims_prunable ON warden_claims (recorded_at) WHERE result IS NOT NULL;
  CREATE TABLE warden_counters (name text PRIMARY KEY, value bigint NOT NULL);
  INSERT INTO warden_counters (name, value) VALUES ('claims', 0);

  CREATE TABLE warden_journals (run_id text COLLATE "C" PRIMARY KEY, created_at bigint NOT NULL);
  -- A journal's bytes are its lines in line_no order; sizes are always measured on the bytes
  -- themselves (no stored offsets an edit could falsify).
  CREATE TABLE warden_journal_lines (
    run_id text COLLATE "C" NOT NULL,
    line_no integer NOT NULL,
    line bytea NOT NULL,
    PRIMARY KEY (run_id, line_no)
  );

  CREATE TABLE warden_signing_keys (
    n integer PRIMARY KEY,
    key_id text NOT NULL UNIQUE,
    public_key text NOT NULL,
    private_pkcs8 bytea NOT NULL,
    created_at bigint NOT NULL
  );

  -- Owner liveness (owner.ts). The lock key of an owner id is derived here and only here, so the
  -- owner that takes its lock and every node that probes it agree on the key.
  CREATE FUNCTION warden_owner_key(owner text) RETURNS bigint
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
    AS $$ SELECT ('x' || substr(encode(sha256(convert_to('warden-owner-v1:' || owner, 'UTF8')), 'hex'), 1, 16))::bit(64)::bigint $$;
  -- A read of pg_locks: it never takes the lock, so probing cannot disturb a live owner. A bigint
  -- advisory key shows as classid (high half), objid (low half), objsubid 1.
  CREATE FUNCTION warden_owner_alive(owner text) RETURNS boolean
    LANGUAGE sql STABLE STRICT
    AS $$
      SELECT EXISTS (
        SELECT 1 FROM pg_catalog.pg_locks l
        WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1
          AND l.database = (SELECT d.oid FROM pg_catalog.pg_database d WHERE d.datname = pg_catalog.current_database())
          AND l.classid = ((warden_owner_key(owner) >> 32) & 4294967295)::oid
          AND l.objid = (warden_owner_key(owner) & 4294967295)::oid)
    $$;
  -- Raised inside a claim batch (claim-store.ts) so the whole statement, inserts included, aborts.
  CREATE FUNCTION warden_check_capacity(total bigint, max_claims bigint) RETURNS boolean
    LANGUAGE plpgsql
    AS $$
    BEGIN
      IF total > max_claims THEN
        RAISE EXCEPTION 'claim capacity exhausted' USING ERRCODE = 'WCAP1';
      END IF;
      RETURN true;
    END $$;
  `,
  // 2: delivery — blobs, stages with their partials, the catalog of commits
  `
  CREATE TABLE warden_blobs (
    digest text COLLATE "C" PRIMARY KEY,
    byte_len bigint NOT NULL,
    created_at bigint NOT NULL
  );
  CREATE TABLE warden_blob_chunks (
    digest text COLLATE "C" NOT NULL REFERENCES warden_blobs (digest) ON DELETE CASCADE,
    off bigint NOT NULL,
    bytes bytea NOT NULL,
    PRIMARY KEY (digest, off)
  );
  CREATE TABLE warden_stages (
    stage_id text COLLATE "C" PRIMARY KEY,
    manifest_digest text COLLATE "C" NOT NULL UNIQUE,
    manifest text NOT NULL,
    created_at bigint NOT NULL,
    last_active_at bigint NOT NULL,
    reserved_bytes bigint NOT NULL
  );
  CREATE TABLE warden_stage_blobs (
    stage_id text COLLATE "C" NOT NULL REFERENCES warden_stages (stage_id) ON DELETE CASCADE,
    digest text COLLATE "C" NOT NULL,
    byte_len bigint NOT NULL,
    complete boolean NOT NULL,
    PRIMARY KEY (stage_id, digest)
  );
  -- A partial is append-only rows; the durable offset of a blob is the end of its committed rows.
  CREATE TABLE warden_stage_chunks (
    stage_id text COLLATE "C" NOT NULL,
    digest text COLLATE "C" NOT NULL,
    off bigint NOT NULL,
    len integer NOT NULL,
    bytes bytea NOT NULL,
    PRIMARY KEY (stage_id, digest, off),
    FOREIGN KEY (stage_id, digest) REFERENCES warden_stage_blobs (stage_id, digest) ON DELETE CASCADE
  );
  CREATE TABLE warden_commits (
    seq bigserial PRIMARY KEY,
    manifest_digest text COLLATE "C" NOT NULL UNIQUE,
    stage_id text COLLATE "C" NOT NULL UNIQUE,
    bundle_id text COLLATE "C" NOT NULL,
    revision text COLLATE "C" NOT NULL,
    manifest text NOT NULL,
    committed_at bigint NOT NULL,
    retired_at bigint,
    UNIQUE (bundle_id, revision)
  );
  CREATE INDEX warden_commits_by_bundle ON warden_commits (bundle_id, seq);
  CREATE TABLE warden_commit_blobs (
    manifest_digest text COLLATE "C" NOT NULL REFERENCES warden_commits (manifest_digest),
    digest text COLLATE "C" NOT NULL,
    PRIMARY KEY (manifest_digest, digest)
  );
  CREATE INDEX warden_commit_blobs_by_digest ON warden_commit_blobs (digest);

  -- One chunk appended to a partial, atomically with the check that it starts where the
  -- committed rows end: two nodes appending to one blob can never interleave or overlap.
  CREATE FUNCTION warden_stage_append(p_stage text, p_digest text, p_start bigint, p_bytes bytea) RETURNS bigint
    LANGUAGE plpgsql
    AS $$
    DECLARE
      v_complete boolean;
      v_len bigint;
      v_end bigint;
    BEGIN
      SELECT complete, byte_len INTO v_complete, v_len FROM warden_stage_blobs
        WHERE stage_id = p_stage AND digest = p_digest FOR UPDATE;
      IF NOT FOUND OR v_complete THEN
        RAISE EXCEPTION 'the stage does not receive this blob' USING ERRCODE = 'WSTG1';
      END IF;
      SELECT off + len INTO v_end FROM warden_stage_chunks
        WHERE stage_id = p_stage AND digest = p_digest ORDER BY off DESC LIMIT 1;
      v_end := COALESCE(v_end, 0);
      IF v_end <> p_start THEN
        RAISE EXCEPTION '%', v_end USING ERRCODE = 'WSTG2';
      END IF;
      IF p_start + octet_length(p_bytes) > v_len THEN
        RAISE EXCEPTION '%', v_len USING ERRCODE = 'WSTG3';
      END IF;
      INSERT INTO warden_stage_chunks (stage_id, digest, off, len, bytes)
        VALUES (p_stage, p_digest, p_start, octet_length(p_bytes), p_bytes);
      RETURN p_start + octet_length(p_bytes);
    END $$;

  -- Publishes a complete partial as a blob in one transaction: the rows are checked for length,
  -- contiguity and digest here, on the bytes actually stored, so no node can publish a blob whose
  -- bytes differ from its address. Returns true when this call created the blob.
  CREATE FUNCTION warden_stage_promote(p_stage text, p_digest text, p_byte_len bigint, p_now bigint) RETURNS boolean
    LANGUAGE plpgsql
    AS $$
    DECLARE
      v_complete boolean;
      v_total bigint;
      v_end bigint;
      v_hash text;
      v_created integer;
    BEGIN
      SELECT complete INTO v_complete FROM warden_stage_blobs
        WHERE stage_id = p_stage AND digest = p_digest FOR UPDATE;
      IF NOT FOUND THEN
        RAISE EXCEPTION 'the stage does not receive this blob' USING ERRCODE = 'WSTG1';
      END IF;
      IF v_complete THEN
        RETURN false;
      END IF;
      SELECT COALESCE(sum(len), 0), COALESCE(max(off + len), 0),
             'sha256:' || encode(sha256(COALESCE(string_agg(bytes, ''::bytea ORDER BY off), ''::bytea)), 'hex')
        INTO v_total, v_end, v_hash
        FROM warden_stage_chunks WHERE stage_id = p_stage AND digest = p_digest;
      IF v_total <> p_byte_len OR v_end <> p_byte_len THEN
        IF EXISTS (SELECT 1 FROM warden_blobs WHERE digest = p_digest) THEN
          DELETE FROM warden_stage_chunks WHERE stage_id = p_stage AND digest = p_digest;
          UPDATE warden_stage_blobs SET complete = true WHERE stage_id = p_stage AND digest = p_digest;
          UPDATE warden_stages SET last_active_at = p_now WHERE stage_id = p_stage;
          RETURN false;
        END IF;
        RAISE EXCEPTION 'the partial holds % of % bytes', v_total, p_byte_len USING ERRCODE = 'WSTG4';
      END IF;
      IF v_hash <> p_digest THEN
        RAISE EXCEPTION '%', v_hash USING ERRCODE = 'WSTG5';
      END IF;
      INSERT INTO warden_blobs (digest, byte_len, created_at) VALUES (p_digest, p_byte_len, p_now)
        ON CONFLICT (digest) DO NOTHING;
      GET DIAGNOSTICS v_created = ROW_COUNT;
      IF v_created = 1 THEN
        INSERT INTO warden_blob_chunks (digest, off, bytes)
          SELECT p_digest, off, bytes FROM warden_stage_chunks WHERE stage_id = p_stage AND digest = p_digest;
      END IF;
      DELETE FROM warden_stage_chunks WHERE stage_id = p_stage AND digest = p_digest;
      UPDATE warden_stage_blobs SET complete = true WHERE stage_id = p_stage AND digest = p_digest;
      UPDATE warden_stages SET last_active_at = p_now WHERE stage_id = p_stage;
      RETURN v_created = 1;
    END $$;
  `,
  // 3: bundle signatures (DESIGN.md "Bundle signatures"), one per revision and signing key
  `
  CREATE TABLE warden_commit_signatures (
    seq bigserial PRIMARY KEY,
    manifest_digest text COLLATE "C" NOT NULL REFERENCES warden_commits (manifest_digest),
    fingerprint text COLLATE "C" NOT NULL,
    key_type text NOT NULL,
    principals text NOT NULL,
    signature text NOT NULL,
    signed_at bigint NOT NULL,
    at_commit boolean NOT NULL,
    UNIQUE (manifest_digest, fingerprint)
  );
  `,
  // 4: the fleet's transparency log (DESIGN.md "Transparency", log-store.ts): one head row whose
  // lock serializes appenders fleet-wide, leaves, Merkle nodes, checkpoints, cosignatures
  `
  CREATE TABLE warden_tlog_head (one boolean PRIMARY KEY DEFAULT true CHECK (one), size bigint NOT NULL);
  INSERT INTO warden_tlog_head (size) VALUES (0);
  CREATE TABLE warden_tlog_leaves (
    idx bigint PRIMARY KEY,
    key text COLLATE "C" NOT NULL UNIQUE,
    body bytea NOT NULL
  );
  CREATE TABLE warden_tlog_nodes (
    level integer NOT NULL,
    idx bigint NOT NULL,
    hash bytea NOT NULL,
    PRIMARY KEY (level, idx)
  );
  CREATE TABLE warden_tlog_checkpoints (size bigint PRIMARY KEY, note text NOT NULL);
  CREATE TABLE warden_tlog_cosignatures (
    size bigint NOT NULL,
    witness text COLLATE "C" NOT NULL,
    lines text NOT NULL,
    PRIMARY KEY (size, witness)
  );
  CREATE TABLE warden_tlog_witnessed (witness text COLLATE "C" PRIMARY KEY, size bigint NOT NULL);
  `,
  // 5: the fleet's nodes (node-registry.ts), one row per owner incarnation; live = its owner lock is held
  `
  CREATE TABLE warden_nodes (
    owner text COLLATE "C" PRIMARY KEY,
    host text NOT NULL,
    pid integer NOT NULL,
    version text,
    url text,
    started_at bigint NOT NULL
  );
  `,
  // 6: the operator's queue: rows a check found a problem on (see the embedded claim schema)
  `
  CREATE TABLE warden_claim_problems (
    scope text COLLATE "C" NOT NULL,
    id text COLLATE "C" NOT NULL,
    code text NOT NULL,
    found_at bigint NOT NULL,
    PRIMARY KEY (scope, id)
  );
  `,
  // 7: the transparency log's catch-up reads what was committed or signed since its watermark
  // (claims recorded since it are found by warden_claims_prunable, on recorded_at)
  `
  CREATE INDEX warden_commits_by_time ON warden_commits (committed_at);
  CREATE INDEX warden_commit_signatures_by_time ON warden_commit_signatures (signed_at);
  `,
  // 8: the transparency log's catch-up watermark, one per node (log-store.ts)
  `
  CREATE TABLE warden_tlog_watermarks (node text COLLATE "C" PRIMARY KEY, value bigint NOT NULL);
  `,
  // 9: the daily spend counters per workspace and per principal (spend-store.ts)
  `
  CREATE TABLE warden_spend_days (
    day text COLLATE "C" NOT NULL,
    kind text COLLATE "C" NOT NULL CHECK (kind IN ('workspace', 'principal')),
    subject text COLLATE "C" NOT NULL,
    input_tokens bigint NOT NULL,
    output_tokens bigint NOT NULL,
    cost_usd_micros bigint NOT NULL,
    turns bigint NOT NULL,
    wall_ms bigint NOT NULL,
    runs bigint NOT NULL,
    PRIMARY KEY (day, kind, subject)
  );
  `,
  // 10: queued invocations (DESIGN.md "Queued invocations", queue-store.ts): the embedded claim
  // schema's migration 4, with warden_ names
  `
  CREATE TABLE warden_queue (
    scope text COLLATE "C" NOT NULL,
    id text COLLATE "C" NOT NULL,
    request text NOT NULL,
    request_hash text NOT NULL,
    principal text COLLATE "C" NOT NULL,
    workspace text COLLATE "C" NOT NULL,
    provider text COLLATE "C" NOT NULL,
    priority integer NOT NULL,
    labels text NOT NULL,
    enqueued_at bigint NOT NULL,
    deadline bigint NOT NULL,
    state text NOT NULL CHECK (state IN ('queued', 'leased', 'started', 'cancelled', 'expired', 'refused')),
    lease_owner text COLLATE "C",
    leased_at bigint,
    started_at bigint,
    ended_at bigint,
    cancelled_by text,
    error text,
    PRIMARY KEY (scope, id)
  );
  CREATE INDEX warden_queue_waiting ON warden_queue (principal, priority DESC, enqueued_at) WHERE state = 'queued';
  CREATE INDEX warden_queue_going ON warden_queue (lease_owner) WHERE state IN ('leased', 'started') AND ended_at IS NULL;
  CREATE INDEX warden_queue_recent ON warden_queue (leased_at) WHERE leased_at IS NOT NULL;
  CREATE INDEX warden_queue_by_state ON warden_queue (state, scope, id);
  CREATE TABLE warden_queue_principals (principal text COLLATE "C" PRIMARY KEY, last_served bigint NOT NULL);
  `,
  // 11: parked runs' CLI session transcripts (session-store.ts): any node resumes a parked run
  `
  CREATE TABLE warden_parked_sessions (
    run_id text COLLATE "C" NOT NULL,
    dir text COLLATE "C" NOT NULL,
    bytes bytea NOT NULL,
    PRIMARY KEY (run_id, dir)
  );
  `,
];

/** Brings the database to the latest schema; returns the version it is at. */
export async function migrate(pool: PgPool): Promise<number> {
  return transaction(pool, "migrate the database schema", async (client) => {
    await client.query(`SELECT pg_advisory_xact_lock(${MIGRATION_LOCK_KEY})`);
    await client.query("CREATE TABLE IF NOT EXISTS warden_schema (version integer PRIMARY KEY, applied_at bigint NOT NULL)");
    const current = await query<{ version: number | null }>(client, "read the schema version", {
      text: "SELECT max(version) AS version FROM warden_schema",
    });
    const version = current.rows[0]?.version ?? 0;
    if (version > SCHEMA_MIGRATIONS.length) {
      throw new StorageError(
        "schema-too-new",
        `the database schema is at version ${version}, newer than this warden (${SCHEMA_MIGRATIONS.length}); upgrade warden`,
      );
    }
    for (let v = version; v < SCHEMA_MIGRATIONS.length; v++) {
      await client.query(SCHEMA_MIGRATIONS[v]!);
      await client.query({ text: "INSERT INTO warden_schema (version, applied_at) VALUES ($1, $2)", values: [v + 1, Date.now()] });
    }
    return SCHEMA_MIGRATIONS.length;
  });
}
