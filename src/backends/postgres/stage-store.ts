/**
 * Stages of the postgres backend. A blob's partial is append-only `warden_stage_chunks` rows,
 * one per acknowledged chunk, and its durable offset IS the end of its committed rows: there is
 * no separate offset to drift from the bytes. A chunk is buffered while it arrives and inserted
 * by `flush` in one statement (warden_stage_append) that first checks, under the blob's row lock,
 * that the chunk starts exactly where the committed rows end. So an upload can move between nodes
 * (it resumes from the rows, wherever they were written) and two nodes receiving the same blob
 * can never interleave: the second is refused `chunk-out-of-order` with the offset to resume at.
 *
 * Unacknowledged bytes never reach the database, so nothing ever has to be cut back.
 */
import type { Digest } from "../../core/digest.js";
import { ConflictError, IntegrityError, LimitError, NotFoundError } from "../../core/errors.js";
import type { BlobRef } from "../../delivery/manifest-types.js";
import type { ChunkTarget, PartialAppender, StageActivity, StageBlob, StageRecord, StageStore } from "../../delivery/stage.js";
import { readRangeOf } from "./blob-store.js";
import { FOREIGN_KEY_VIOLATION, ROW_CHECKED_TYPES, UNIQUE_VIOLATION, pgFailure, query, sqlState, type PgPool } from "./connection.js";
import { checkStageRecord, ManifestCache, storedManifestText } from "../../delivery/manifest-record.js";

interface StageRow {
  stage_id: string;
  manifest_digest: string;
  manifest: string;
  created_at: number;
  last_active_at: number;
  reserved_bytes: number;
  blobs: StageBlob[];
}

/**
 * A stage with its blobs (received = end of committed rows; byte_len once complete). Read with
 * ROW_CHECKED_TYPES: a value out of range is refused by the record check, naming the stage.
 */
const BLOB_JSON = `json_build_object(
  'digest', b.digest, 'byte_len', b.byte_len, 'complete', b.complete,
  'received', CASE WHEN b.complete THEN b.byte_len ELSE COALESCE((
    SELECT c.off + c.len FROM warden_stage_chunks c
    WHERE c.stage_id = b.stage_id AND c.digest = b.digest ORDER BY c.off DESC LIMIT 1), 0) END)`;

const SELECT_STAGE = `
  SELECT s.stage_id, s.manifest_digest, s.manifest, s.created_at, s.last_active_at, s.reserved_bytes,
    COALESCE((
      SELECT json_agg(${BLOB_JSON} ORDER BY b.digest)
      FROM warden_stage_blobs b WHERE b.stage_id = s.stage_id), '[]'::json) AS blobs
  FROM warden_stages s`;

interface ChunkTargetRow {
  stage_id: string;
  manifest_digest: string;
  created_at: number;
  last_active_at: number;
  reserved_bytes: number;
  blob: StageBlob | null;
}

/**
 * A stage's own fields and one blob, by primary keys: no manifest text (read once per process,
 * see `chunkTarget`) and no other blob's rows.
 */
const SELECT_CHUNK_TARGET = `
  SELECT s.stage_id, s.manifest_digest, s.created_at, s.last_active_at, s.reserved_bytes,
    (SELECT ${BLOB_JSON} FROM warden_stage_blobs b WHERE b.stage_id = s.stage_id AND b.digest = $2) AS blob
  FROM warden_stages s WHERE s.stage_id = $1`;

const CREATE_STAGE = `
  WITH s AS (
    INSERT INTO warden_stages (stage_id, manifest_digest, manifest, created_at, last_active_at, reserved_bytes)
    VALUES ($1, $2, $3, $4, $5, $6) RETURNING stage_id
  )
  INSERT INTO warden_stage_blobs (stage_id, digest, byte_len, complete)
  SELECT (SELECT stage_id FROM s), t.digest, t.byte_len, t.complete
  FROM unnest($7::text[], $8::bigint[], $9::boolean[]) AS t(digest, byte_len, complete)`;

const SQLSTATE_NOT_RECEIVING = "WSTG1";
const SQLSTATE_OFFSET_MOVED = "WSTG2";
const SQLSTATE_OVERFLOW = "WSTG3";
const SQLSTATE_PARTIAL_SHORT = "WSTG4";
const SQLSTATE_PARTIAL_MISMATCH = "WSTG5";

export class PostgresStageStore implements StageStore {
  readonly #pool: PgPool;
  readonly #manifests = new ManifestCache();
  /** The chunk insert in flight per stage blob: a promote of that blob waits for it. */
  readonly #syncing = new Map<string, Promise<void>>();

  constructor(pool: PgPool) {
    this.#pool = pool;
  }

  async create(stage: StageRecord): Promise<void> {
    try {
      await this.#pool.query({
        name: "warden-stage-create",
        text: CREATE_STAGE,
        values: [
          stage.stage_id,
          stage.manifest.manifest_digest,
          storedManifestText(stage.manifest),
          stage.created_at,
          stage.last_active_at,
          stage.reserved_bytes,
          stage.blobs.map((b) => b.digest),
          stage.blobs.map((b) => b.byte_len),
          stage.blobs.map((b) => b.complete),
        ],
      });
    } catch (error) {
      if (sqlState(error) === UNIQUE_VIOLATION) {
        throw new ConflictError("stage-begin-conflict", "another node began staging the same manifest at the same moment; begin again to resume it", {
          details: { manifest_digest: stage.manifest.manifest_digest },
        });
      }
      throw pgFailure(error, "create a stage");
    }
  }

  async get(stageId: string): Promise<StageRecord | undefined> {
    return this.#one("warden-stage-get", "s.stage_id = $1", stageId);
  }

  async chunkTarget(stageId: string, digest: Digest): Promise<ChunkTarget | undefined> {
    const result = await query<ChunkTargetRow>(this.#pool, "read a stage", {
      name: "warden-stage-chunk-target",
      text: SELECT_CHUNK_TARGET,
      values: [stageId, digest],
      types: ROW_CHECKED_TYPES,
    });
    const row = result.rows[0];
    if (row === undefined) return undefined;
    let text = "";
    if (!this.#manifests.has(row.manifest_digest)) {
      const stored = await query<{ manifest: string }>(this.#pool, "read a stage's manifest", {
        name: "warden-stage-manifest",
        text: "SELECT manifest FROM warden_stages WHERE stage_id = $1",
        values: [stageId],
      });
      // Gone in between: the stage closed (committed or removed) after the first read.
      if (stored.rows[0] === undefined) return undefined;
      text = stored.rows[0].manifest;
    }
    const manifest = this.#manifests.verified(row.manifest_digest, text, `stage ${row.stage_id}`, { stage_id: row.stage_id });
    const blob = row.blob === null ? undefined : { digest: row.blob.digest, byte_len: row.blob.byte_len, received: row.blob.received, complete: row.blob.complete };
    // The checks `get` makes, on what this read: the stage's own fields and this one blob.
    checkStageRecord({ ...row, manifest, blobs: blob === undefined ? [] : [blob] });
    return { stage_id: row.stage_id, manifest, last_active_at: row.last_active_at, blob };
  }

  async findByManifest(manifestDigest: Digest): Promise<StageRecord | undefined> {
    return this.#one("warden-stage-by-manifest", "s.manifest_digest = $1", manifestDigest);
  }

  async list(): Promise<readonly StageRecord[]> {
    const result = await query<StageRow>(this.#pool, "list stages", {
      name: "warden-stage-list",
      text: `${SELECT_STAGE} ORDER BY s.created_at, s.stage_id`,
      types: ROW_CHECKED_TYPES,
    });
    return result.rows.map((row) => this.#record(row));
  }

  async activity(): Promise<readonly StageActivity[]> {
    const result = await query<StageActivity>(this.#pool, "read stage activity", {
      name: "warden-stage-activity",
      text: "SELECT stage_id, last_active_at, reserved_bytes FROM warden_stages",
      // A value past 2^53 in one row arrives as text for the caller's check, not as an error for all.
      types: ROW_CHECKED_TYPES,
    });
    return result.rows;
  }

  async touch(stageId: string, now: number): Promise<void> {
    await query(this.#pool, "touch a stage", {
      name: "warden-stage-touch",
      text: "UPDATE warden_stages SET last_active_at = GREATEST(last_active_at, $2) WHERE stage_id = $1",
      values: [stageId, now],
    });
  }

  async openPartial(stageId: string, digest: Digest, durableOffset: number): Promise<PartialAppender> {
    return new RowPartial(this, stageId, digest, durableOffset);
  }

  async partialLength(stageId: string, digest: Digest): Promise<number | undefined> {
    const result = await query<{ end: number }>(this.#pool, "measure a partial", {
      name: "warden-stage-partial-end",
      text: "SELECT off + len AS end FROM warden_stage_chunks WHERE stage_id = $1 AND digest = $2 ORDER BY off DESC LIMIT 1",
      values: [stageId, digest],
    });
    return result.rows[0]?.end;
  }

  async readPartial(stageId: string, digest: Digest, position: number, length: number): Promise<Uint8Array> {
    const bytes = await readRangeOf(this.#pool, "warden_stage_chunks", "len", ["stage_id = $3", "digest = $4"], [stageId, digest], position, length);
    if (bytes.byteLength !== length) {
      throw new IntegrityError("stage-partial-short", `the partial of ${digest} ends before ${position + length}`, {
        details: { stage_id: stageId, digest },
      });
    }
    return bytes;
  }

  /**
   * The durable offset moves with the committed rows (RowPartial.flush); this records the
   * activity and confirms the stage still receives the blob.
   */
  async recordReceived(stageId: string, digest: Digest, _received: number, now: number): Promise<void> {
    const result = await query(this.#pool, "record a chunk", {
      name: "warden-stage-received",
      text:
        "UPDATE warden_stages SET last_active_at = GREATEST(last_active_at, $3) WHERE stage_id = $1 AND EXISTS (" +
        "SELECT 1 FROM warden_stage_blobs WHERE stage_id = $1 AND digest = $2 AND NOT complete)",
      values: [stageId, digest, now],
    });
    if (result.rowCount !== 1) throw noLongerReceives(stageId, digest);
  }

  async requireBlob(stageId: string, ref: BlobRef): Promise<void> {
    try {
      await this.#pool.query({
        name: "warden-stage-require",
        text:
          "WITH dropped AS (DELETE FROM warden_stage_chunks WHERE stage_id = $1 AND digest = $2) " +
          "INSERT INTO warden_stage_blobs (stage_id, digest, byte_len, complete) VALUES ($1, $2, $3, false) " +
          "ON CONFLICT (stage_id, digest) DO UPDATE SET complete = false",
        values: [stageId, ref.digest, ref.byte_len],
      });
    } catch (error) {
      if (sqlState(error) === FOREIGN_KEY_VIOLATION) throw stageNotFound(stageId);
      throw pgFailure(error, "ask for a blob again");
    }
  }

  /** Chunk rows are durable once inserted: nothing to do. */
  async syncReceived(): Promise<void> {}

  async promote(stageId: string, ref: BlobRef, now: number): Promise<boolean> {
    // A chunk's insert may still be in flight (another request of the same client); if that
    // insert fails, nothing of it may be published (its rows may be another node's).
    await this.#syncing.get(syncKey(stageId, ref.digest));
    try {
      const result = await this.#pool.query<{ created: boolean }>({
        name: "warden-stage-promote",
        text: "SELECT warden_stage_promote($1, $2, $3, $4) AS created",
        values: [stageId, ref.digest, ref.byte_len, now],
      });
      return result.rows[0]?.created === true;
    } catch (error) {
      const state = sqlState(error);
      if (state === SQLSTATE_NOT_RECEIVING) throw noLongerReceives(stageId, ref.digest);
      if (state === SQLSTATE_PARTIAL_SHORT || state === SQLSTATE_PARTIAL_MISMATCH) {
        await this.requireBlob(stageId, ref);
        // The service verified the rows' bytes as they arrived (or hashed them again after a
        // restart): rows that no longer add up to the blob were changed since.
        throw new IntegrityError("blob-tampered", `the stored partial of ${ref.digest} is not the blob; it restarts at offset 0`, {
          details: { stage_id: stageId, digest: ref.digest, expected_offset: 0 },
        });
      }
      throw pgFailure(error, "publish a blob");
    }
  }

  async markStored(stageId: string, ref: BlobRef): Promise<void> {
    await query(this.#pool, "mark a blob stored", {
      name: "warden-stage-mark-stored",
      text:
        "WITH dropped AS (DELETE FROM warden_stage_chunks WHERE stage_id = $1 AND digest = $2) " +
        "UPDATE warden_stage_blobs SET complete = true WHERE stage_id = $1 AND digest = $2",
      values: [stageId, ref.digest],
    });
  }

  async remove(stageId: string): Promise<void> {
    await query(this.#pool, "remove a stage", {
      name: "warden-stage-remove",
      text: "DELETE FROM warden_stages WHERE stage_id = $1",
      values: [stageId],
    });
  }

  /** Inserts one acknowledged chunk (see the module comment); tracked so promote can wait for it. */
  appendChunk(stageId: string, digest: Digest, start: number, bytes: Buffer): Promise<void> {
    const key = syncKey(stageId, digest);
    const insert = this.#appendChunk(stageId, digest, start, bytes);
    this.#syncing.set(key, insert);
    const forget = (): void => {
      if (this.#syncing.get(key) === insert) this.#syncing.delete(key);
    };
    insert.then(forget, forget);
    return insert;
  }

  async #appendChunk(stageId: string, digest: Digest, start: number, bytes: Buffer): Promise<void> {
    try {
      await this.#pool.query({
        name: "warden-stage-append",
        text: "SELECT warden_stage_append($1, $2, $3, $4)",
        values: [stageId, digest, start, bytes],
      });
    } catch (error) {
      const state = sqlState(error);
      const detail = error instanceof Error ? Number(error.message) : NaN;
      if (state === SQLSTATE_NOT_RECEIVING) throw noLongerReceives(stageId, digest);
      if (state === SQLSTATE_OFFSET_MOVED) {
        throw new ConflictError("chunk-out-of-order", `blob ${digest} expects a chunk at offset ${detail}, got ${start}`, {
          details: { digest, expected_offset: detail, offset: start },
        });
      }
      if (state === SQLSTATE_OVERFLOW) {
        throw new LimitError("chunk-overflow", `a chunk ending at ${start + bytes.byteLength} passes the blob's ${detail} bytes`, {
          details: { digest, byte_len: detail, end: start + bytes.byteLength },
        });
      }
      throw pgFailure(error, "append a chunk");
    }
  }

  async #one(name: string, where: string, value: string): Promise<StageRecord | undefined> {
    const result = await query<StageRow>(this.#pool, "read a stage", { name, text: `${SELECT_STAGE} WHERE ${where}`, values: [value], types: ROW_CHECKED_TYPES });
    const row = result.rows[0];
    return row === undefined ? undefined : this.#record(row);
  }

  #record(row: StageRow): StageRecord {
    const record: StageRecord = {
      stage_id: row.stage_id,
      manifest: this.#manifests.verified(row.manifest_digest, row.manifest, `stage ${row.stage_id}`, { stage_id: row.stage_id }),
      created_at: row.created_at,
      last_active_at: row.last_active_at,
      reserved_bytes: row.reserved_bytes,
      blobs: row.blobs.map((b) => ({ digest: b.digest, byte_len: b.byte_len, received: b.received, complete: b.complete })),
    };
    checkStageRecord(record);
    return record;
  }
}

/** A chunk being received: buffered until `flush` inserts it as one row. */
class RowPartial implements PartialAppender {
  readonly #stages: PostgresStageStore;
  readonly #stageId: string;
  readonly #digest: Digest;
  #offset: number;
  #pending: Buffer[] = [];

  constructor(stages: PostgresStageStore, stageId: string, digest: Digest, durableOffset: number) {
    this.#stages = stages;
    this.#stageId = stageId;
    this.#digest = digest;
    this.#offset = durableOffset;
  }

  async append(bytes: Uint8Array): Promise<void> {
    this.#pending.push(Buffer.from(bytes));
  }

  async flush(): Promise<void> {
    const bytes = this.#pending.length === 1 ? this.#pending[0]! : Buffer.concat(this.#pending);
    this.#pending = [];
    // An empty chunk adds no row: a row of no bytes at an offset would collide with the chunk
    // that next starts there (the table's key is the offset).
    if (bytes.byteLength === 0) return;
    await this.#stages.appendChunk(this.#stageId, this.#digest, this.#offset, bytes);
    this.#offset += bytes.byteLength;
  }

  async abandon(): Promise<void> {
    this.#pending = [];
  }

  async close(): Promise<void> {
    this.#pending = [];
  }
}

function syncKey(stageId: string, digest: Digest): string {
  return `${stageId}:${digest}`;
}

function noLongerReceives(stageId: string, digest: Digest): NotFoundError {
  return new NotFoundError("stage-not-found", `stage ${stageId} no longer receives ${digest}`, { details: { stage_id: stageId, digest } });
}

function stageNotFound(stageId: string): NotFoundError {
  return new NotFoundError("stage-not-found", `no stage ${stageId}`, { details: { stage_id: stageId } });
}
