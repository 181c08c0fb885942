/**
 * The behavioural suite's backends. Each test file runs its tests once per backend:
 *
 *   for (const backend of backendsUnderTest()) describe(backend.name, () => { backend.hooks(); … });
 *
 * A `State` is one store's worth of shared state (an embedded home, or a postgres database) that
 * nodes are opened on, closed, and opened again (a restart). The postgres backend starts one
 * throwaway cluster per test file and one database per file; a test that needs a store of its
 * own (capacity limits, garbage collection) asks for `isolated` and gets a fresh database.
 * Tamper helpers edit the stored bytes the way an attacker with access to the storage would.
 */
import { after, before } from "node:test";
import { randomBytes } from "node:crypto";
import { appendFileSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import Database from "better-sqlite3";
import pg from "pg";
import type { Digest } from "../../src/core/digest.js";
import type { Limits } from "../../src/core/limits.js";
import { CLAIMS_DATABASE, openEmbeddedBackend } from "../../src/backends/embedded/index.js";
import { openEmbeddedDelivery } from "../../src/backends/embedded/delivery/delivery-backend.js";
import { DeliveryLayout } from "../../src/backends/embedded/delivery/delivery-layout.js";
import { openPostgresBackend } from "../../src/backends/postgres/index.js";
import { Delivery } from "../../src/delivery/service.js";
import type { TrustPolicy } from "../../src/signing/policy.js";
import { Invocations } from "../../src/invocations/index.js";
import type { ClaimStore } from "../../src/invocations/claim-store.js";
import type { JournalStore, KeyStore } from "../../src/journal/types.js";
import { tempDir } from "../support/temp.js";
import { startTestPostgres, type TestPostgres } from "../support/postgres.js";
import { bytesOf, skillManifest, uploadMissing, type BuiltManifest } from "../delivery/store-harness.js";

export interface NodeOptions {
  readonly limits?: Partial<Limits>;
  readonly now?: () => Date;
  /** the trust policy for bundle signatures */
  readonly trust?: TrustPolicy;
}

/** One opened node: the domain services over one backend's stores. */
export interface StoreNode {
  readonly invocations: Invocations;
  readonly delivery: Delivery;
  readonly claims: ClaimStore;
  readonly journals: JournalStore;
  readonly keys: KeyStore;
  close(): Promise<void>;
}

export interface State {
  open(options?: NodeOptions): Promise<StoreNode>;
  /** Where another process opens the same stores: the embedded home, or the postgres database. */
  readonly location: { readonly home: string } | { readonly url: string };
  /** Replaces (or with undefined, deletes) line `index` (0-based) of a run's journal. */
  editJournalLine(runId: string, index: number, edit: (line: Buffer) => Buffer | undefined): Promise<void>;
  /** Appends a line to a run's journal behind the writer's back. */
  appendJournalLine(runId: string, line: Buffer): Promise<void>;
  /** Rewrites a stored blob's bytes. */
  editBlob(digest: Digest, edit: (bytes: Buffer) => Buffer): Promise<void>;
  /** Rewrites the bytes a stage received for a blob (its partial), before they are published. */
  editPartial(stageId: string, digest: Digest, edit: (bytes: Buffer) => Buffer): Promise<void>;
  /** Rewrites the manifest text stored with a stage or a commit (found by its stage id). */
  editStoredManifest(where: "stage" | "commit", stageId: string, edit: (text: string) => string): Promise<void>;
  /**
   * Sets columns of (with `set` undefined: deletes) the rows of a stored table that match `where`,
   * as an operator's hand edit or a bad disk would; answers how many rows changed. Tables and
   * columns are named as the embedded backend names them (postgres prefixes `warden_`).
   */
  editRows(table: StoredTable, where: Readonly<Record<string, unknown>>, set?: Readonly<Record<string, unknown>>): Promise<number>;
}

/** The last two are postgres tables only: the embedded backend keeps those records in files. */
export type StoredTable = "claims" | "stages" | "stage_blobs" | "commits" | "commit_blobs" | "commit_signatures" | "stage_chunks" | "signing_keys";

export interface BackendUnderTest {
  readonly name: "embedded" | "postgres";
  /** Registers the file's before/after hooks (cluster start and stop for postgres). */
  hooks(): void;
  /** State for one test, removed after it. */
  state(t: { after(fn: () => unknown): void }, options?: { isolated?: boolean }): Promise<State>;
}

/** A bundle no other test of the file shares (the postgres backend shares one database per file). */
export function uniqueBundle(sizes: readonly number[] = [20_000, 9_000]): BuiltManifest {
  const tag = randomBytes(4).toString("hex");
  return skillManifest(
    `bundle-${tag}`,
    "r1",
    sizes.map((size, i) => ({ path: `data/${tag}-${i}.bin`, content: bytesOf(Number.parseInt(tag, 16) + i, size) })),
  );
}

/** Begins, uploads and commits a bundle; answers its stage id. */
export async function commitWhole(delivery: Delivery, built: BuiltManifest): Promise<string> {
  const begun = await delivery.begin(built.manifest);
  await uploadMissing(delivery, begun, built.blobs, 7_000);
  await delivery.commit(begun.stage_id);
  return begun.stage_id;
}

export function backendsUnderTest(): BackendUnderTest[] {
  return [embeddedBackend(), postgresBackend()];
}

function embeddedBackend(): BackendUnderTest {
  return {
    name: "embedded",
    hooks: () => undefined,
    async state(t) {
      const root = tempDir("backends");
      const home = join(root, "home");
      const open: StoreNode[] = [];
      t.after(async () => {
        for (const node of open) await node.close().catch(() => undefined);
        rmSync(root, { recursive: true, force: true });
      });
      return {
        location: { home },
        async open(options = {}) {
          const backend = await openEmbeddedBackend({ home, ...(options.limits === undefined ? {} : { limits: options.limits }) });
          const delivery = (await openEmbeddedDelivery(home, { limits: backend.limits, ...deliveryClock(options) }).catch(async (error: unknown) => {
            await backend.close();
            throw error;
          })).delivery;
          const node = nodeOf(backend, delivery, options, () => backend.close());
          open.push(node);
          return node;
        },
        async editJournalLine(runId, index, edit) {
          const path = join(home, "journals", `${runId}.ndjson`);
          const lines = readFileSync(path).toString("utf8").split(/(?<=\n)/);
          const replaced = edit(Buffer.from(lines[index]!, "utf8"));
          if (replaced === undefined) lines.splice(index, 1);
          else lines[index] = replaced.toString("utf8");
          writeFileSync(path, lines.join(""));
        },
        async appendJournalLine(runId, line) {
          appendFileSync(join(home, "journals", `${runId}.ndjson`), line);
        },
        async editBlob(digest, edit) {
          const path = new DeliveryLayout(home).blobPath(digest);
          writeFileSync(path, edit(readFileSync(path)));
        },
        async editPartial(stageId, digest, edit) {
          const path = new DeliveryLayout(home).partialPath(stageId, digest);
          writeFileSync(path, edit(readFileSync(path)));
        },
        async editStoredManifest(where, stageId, edit) {
          const db = new Database(new DeliveryLayout(home).dbPath);
          try {
            const table = where === "stage" ? "stages" : "commits";
            const row = db.prepare<[string], { manifest: string }>(`SELECT manifest FROM ${table} WHERE stage_id = ?`).get(stageId)!;
            db.prepare(`UPDATE ${table} SET manifest = ? WHERE stage_id = ?`).run(edit(row.manifest), stageId);
          } finally {
            db.close();
          }
        },
        async editRows(table, where, set) {
          if (table === "stage_chunks" || table === "signing_keys") throw new Error(`the embedded backend keeps no ${table} table`);
          const db = new Database(table === "claims" ? join(home, CLAIMS_DATABASE) : new DeliveryLayout(home).dbPath);
          try {
            const [sql, values] = editStatement(table, where, set, () => "?");
            return db.prepare(sql).run(...values).changes;
          } finally {
            db.close();
          }
        },
      };
    },
  };
}

function postgresBackend(): BackendUnderTest {
  let server: TestPostgres | undefined;
  let shared: string | undefined;
  return {
    name: "postgres",
    hooks() {
      before(async () => {
        server = await startTestPostgres();
        shared = await server.createDatabase("suite");
      });
      after(async () => {
        await server?.stop();
      });
    },
    async state(t, options = {}) {
      if (server === undefined || shared === undefined) throw new Error("postgres hooks() were not registered");
      const url = options.isolated === true ? await server.createDatabase("isolated") : shared;
      const open: StoreNode[] = [];
      t.after(async () => {
        for (const node of open) await node.close().catch(() => undefined);
      });
      return {
        location: { url },
        async open(nodeOptions = {}) {
          const backend = await openPostgresBackend({ url, ...(nodeOptions.limits === undefined ? {} : { limits: nodeOptions.limits }) });
          const delivery = await Delivery.open(backend.delivery, { limits: backend.limits, ...deliveryClock(nodeOptions) });
          const node = nodeOf(backend, delivery, nodeOptions, () => backend.close());
          open.push(node);
          return node;
        },
        async editJournalLine(runId, index, edit) {
          await withClient(url, async (client) => {
            const row = await client.query<{ line: Buffer }>("SELECT line FROM warden_journal_lines WHERE run_id = $1 AND line_no = $2", [runId, index]);
            const replaced = edit(row.rows[0]!.line);
            if (replaced === undefined) await client.query("DELETE FROM warden_journal_lines WHERE run_id = $1 AND line_no = $2", [runId, index]);
            else await client.query("UPDATE warden_journal_lines SET line = $3 WHERE run_id = $1 AND line_no = $2", [runId, index, replaced]);
          });
        },
        async appendJournalLine(runId, line) {
          await withClient(url, async (client) => {
            await client.query(
              "INSERT INTO warden_journal_lines (run_id, line_no, line) SELECT $1, COALESCE(max(line_no) + 1, 0), $2 FROM warden_journal_lines WHERE run_id = $1",
              [runId, line],
            );
          });
        },
        async editBlob(digest, edit) {
          await withClient(url, async (client) => {
            const rows = await client.query<{ bytes: Buffer }>("SELECT bytes FROM warden_blob_chunks WHERE digest = $1 ORDER BY off", [digest]);
            const whole = edit(Buffer.concat(rows.rows.map((r) => r.bytes)));
            await client.query("DELETE FROM warden_blob_chunks WHERE digest = $1", [digest]);
            await client.query("INSERT INTO warden_blob_chunks (digest, off, bytes) VALUES ($1, 0, $2)", [digest, whole]);
          });
        },
        async editPartial(stageId, digest, edit) {
          await withClient(url, async (client) => {
            const where = "WHERE stage_id = $1 AND digest = $2";
            const rows = await client.query<{ bytes: Buffer }>(`SELECT bytes FROM warden_stage_chunks ${where} ORDER BY off`, [stageId, digest]);
            const whole = edit(Buffer.concat(rows.rows.map((r) => r.bytes)));
            await client.query(`DELETE FROM warden_stage_chunks ${where}`, [stageId, digest]);
            await client.query("INSERT INTO warden_stage_chunks (stage_id, digest, off, len, bytes) VALUES ($1, $2, 0, $3, $4)", [stageId, digest, whole.byteLength, whole]);
          });
        },
        async editStoredManifest(where, stageId, edit) {
          await withClient(url, async (client) => {
            const table = where === "stage" ? "warden_stages" : "warden_commits";
            const row = await client.query<{ manifest: string }>(`SELECT manifest FROM ${table} WHERE stage_id = $1`, [stageId]);
            await client.query(`UPDATE ${table} SET manifest = $2 WHERE stage_id = $1`, [stageId, edit(row.rows[0]!.manifest)]);
          });
        },
        async editRows(table, where, set) {
          let changed = 0;
          await withClient(url, async (client) => {
            let n = 0;
            const [sql, values] = editStatement(`warden_${table}`, where, set, () => `$${++n}`);
            changed = (await client.query(sql, values)).rowCount ?? 0;
          });
          return changed;
        },
      };
    },
  };
}

/** The node's clock, for its delivery service too (stage activity and expiry). */
function deliveryClock(options: NodeOptions): { clock?: () => number; trust?: TrustPolicy } {
  const now = options.now;
  return { ...(now === undefined ? {} : { clock: () => now().getTime() }), ...(options.trust === undefined ? {} : { trust: options.trust }) };
}

function nodeOf(
  stores: { claims: ClaimStore; journals: JournalStore; keys: KeyStore; limits: Limits },
  delivery: Delivery,
  options: NodeOptions,
  closeBackend: () => Promise<void>,
): StoreNode {
  const invocations = new Invocations({
    claims: stores.claims,
    journals: stores.journals,
    keys: stores.keys,
    limits: stores.limits,
    ...(options.now === undefined ? {} : { now: options.now }),
  });
  let closing: Promise<void> | undefined;
  return {
    invocations,
    delivery,
    claims: stores.claims,
    journals: stores.journals,
    keys: stores.keys,
    close() {
      closing ??= (async () => {
        try {
          await delivery.close();
        } finally {
          await closeBackend();
        }
      })();
      return closing;
    },
  };
}

function editStatement(
  table: string,
  where: Readonly<Record<string, unknown>>,
  set: Readonly<Record<string, unknown>> | undefined,
  param: () => string,
): [string, unknown[]] {
  const values: unknown[] = [];
  const bind = (value: unknown): string => {
    values.push(value);
    return param();
  };
  const assignments = set === undefined ? undefined : Object.entries(set).map(([column, value]) => `${column} = ${bind(value)}`).join(", ");
  const condition = Object.entries(where).map(([column, value]) => `${column} = ${bind(value)}`).join(" AND ");
  return [assignments === undefined ? `DELETE FROM ${table} WHERE ${condition}` : `UPDATE ${table} SET ${assignments} WHERE ${condition}`, values];
}

async function withClient(url: string, work: (client: pg.Client) => Promise<void>): Promise<void> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    await work(client);
  } finally {
    await client.end();
  }
}
