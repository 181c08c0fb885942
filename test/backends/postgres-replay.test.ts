/**
 * The postgres replay path: a replay of a recorded id is one read statement (the claim row and
 * the digest of its journal together), shared by concurrent replays and never writing; the digest
 * handed on with the row is that of the stored journal, whatever its bytes;
 * and a journal that no longer matches its seal is never replayed, on the shared path too.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { openPostgresBackend, type PostgresBackend } from "../../src/backends/postgres/index.js";
import { Invocations } from "../../src/invocations/index.js";
import { adminQuery as admin, startTestPostgres, type TestPostgres } from "../support/postgres.js";
import { sha256Digest } from "../../src/core/digest.js";

const SCOPE = "replay";
const REQUEST = { task: "replay" };
/** Keys per read statement (READ_BATCH_ITEMS in claim-store.ts). */
const KEYS_PER_READ = 32;

interface Node {
  readonly backend: PostgresBackend;
  readonly invocations: Invocations;
}

async function recordedIds(node: Node, n: number): Promise<{ id: string; runId: string }[]> {
  return Promise.all(
    Array.from({ length: n }, async () => {
      const id = randomUUID();
      let runId = "";
      const outcome = await node.invocations.run(SCOPE, id, REQUEST, "agent", async (h) => {
        runId = h.run_id;
        await h.effect({ kind: "tool", name: "noop", fingerprint: "replay" }, () => 1);
        return { ok: true };
      });
      assert.equal(outcome.status, "recorded");
      return { id, runId };
    }),
  );
}

describe("postgres replays", () => {
  let server: TestPostgres;
  let url: string;
  let node: Node;
  before(async () => {
    server = await startTestPostgres();
    url = await server.createDatabase("replay");
    const backend = await openPostgresBackend({ url });
    node = { backend, invocations: new Invocations({ claims: backend.claims, journals: backend.journals, keys: backend.keys, limits: backend.limits }) };
  });
  after(async () => {
    await node?.backend.close();
    await server?.stop();
  });

  test("64 concurrent replays send no write and two read statements: each row comes with its journal", async () => {
    const ids = await recordedIds(node, 2 * KEYS_PER_READ);
    const { claims, journals } = node.backend;
    const before = { writes: claims.commits + journals.commits, claimReads: claims.reads, journalReads: journals.reads };
    const answers = await Promise.all(ids.map(({ id }) => node.invocations.lookup(SCOPE, id, REQUEST)));
    for (const answer of answers) assert.ok(answer?.status === "recorded" && answer.replayed && answer.result !== undefined);
    assert.equal(claims.commits + journals.commits - before.writes, 0, "a replay writes nothing");
    assert.equal(journals.reads - before.journalReads, 0, "no journal is read on its own: it came with its claim row");
    assert.equal(claims.reads - before.claimReads, 2, `64 keys travel in statements of ${KEYS_PER_READ}`);
  });

  test("the digest read with its claim is that of the stored journal, whatever its bytes; a changed one is not replayed", async () => {
    const [target] = await recordedIds(node, 1);
    const { claims, journals } = node.backend;
    const key = { scope: SCOPE, id: target!.id };
    const claim = await claims.get(key);
    const bound = claim!.result!.journal.bytes;
    const sealed = await journals.read(target!.runId, bound);
    assert.equal(sealed?.byteLength, bound);
    const withSealed = await journals.digest(claim!.run_id, bound);
    assert.equal(withSealed?.sha256, claim!.result!.journal.sha256, "the database's sha256 of the stored journal is the seal's");
    // Every byte value, backslashes and newlines included, at the same length: only the content differs.
    const line = (await admin<{ line: Buffer }>(url, "SELECT line FROM warden_journal_lines WHERE run_id = $1 AND line_no = 1", [target!.runId])).rows[0]!.line;
    const odd = Buffer.alloc(line.byteLength, 0x5c);
    for (let i = 0; i < odd.byteLength; i++) odd[i] = (i * 7) % 256;
    await admin(url, "UPDATE warden_journal_lines SET line = $3 WHERE run_id = $1 AND line_no = $2", [target!.runId, 1, odd]);

    const direct = await journals.read(target!.runId, bound);
    assert.ok(direct !== undefined);
    const fromBytes = await journals.digest(target!.runId, bound);
    const journalReads = journals.reads;
    const again = await claims.get(key);
    const withRow = await journals.digest(again!.run_id, again!.result!.journal.bytes);
    assert.equal(journals.reads, journalReads, "the digest came with the row's statement");
    assert.ok(withRow !== undefined && fromBytes !== undefined);
    assert.equal(withRow.bytes, direct.byteLength);
    assert.equal(withRow.sha256, sha256Digest(direct), "the digest is the stored journal's");
    assert.equal(fromBytes.sha256, withRow.sha256);
    assert.ok(Buffer.from(direct).subarray(direct.byteLength - withRow.tail.byteLength).equals(Buffer.from(withRow.tail)), "the tail is the journal's end");
    assert.ok(Buffer.from(direct).includes(odd), "the stored journal holds the odd line");
    assert.ok(!Buffer.from(direct).equals(Buffer.from(sealed!)));

    const answer = await node.invocations.lookup(SCOPE, target!.id, REQUEST);
    assert.deepEqual(answer?.status === "unresolved" && answer.audit.reasons, ["journal-changed"]);
  });

  test("a changed last line, or lines cut apart differently, is judged on what is stored", async () => {
    const [changed, resplit] = await recordedIds(node, 2);
    for (const { id } of [changed!, resplit!]) assert.equal((await node.invocations.lookup(SCOPE, id, REQUEST))?.status, "recorded");
    // The termination line names another result hash, same length: the sha256 differs.
    const last = (
      await admin<{ line_no: number; line: Buffer }>(url, "SELECT line_no, line FROM warden_journal_lines WHERE run_id = $1 ORDER BY line_no DESC LIMIT 1", [changed!.runId])
    ).rows[0]!;
    const text = last.line.toString("utf8");
    const flipped = text.replace(/"result_hash":"sha256:([0-9a-f])/, (_m, c: string) => `"result_hash":"sha256:${c === "0" ? "1" : "0"}`);
    assert.notEqual(flipped, text);
    await admin(url, "UPDATE warden_journal_lines SET line = $3 WHERE run_id = $1 AND line_no = $2", [changed!.runId, last.line_no, Buffer.from(flipped)]);
    const answer = await node.invocations.lookup(SCOPE, changed!.id, REQUEST);
    assert.deepEqual(answer?.status === "unresolved" && answer.audit.reasons, ["journal-changed"]);

    // The same bytes cut into rows differently (the last row now starts inside the line before):
    // still the sealed journal, and its last line is found in that row.
    const rows = (await admin<{ line_no: number; line: Buffer }>(url, "SELECT line_no, line FROM warden_journal_lines WHERE run_id = $1 ORDER BY line_no", [resplit!.runId])).rows;
    const [before, final] = [rows.at(-2)!, rows.at(-1)!];
    const cut = Math.floor(before.line.byteLength / 2);
    await admin(url, "UPDATE warden_journal_lines SET line = $3 WHERE run_id = $1 AND line_no = $2", [resplit!.runId, before.line_no, before.line.subarray(0, cut)]);
    await admin(url, "UPDATE warden_journal_lines SET line = $3 WHERE run_id = $1 AND line_no = $2", [
      resplit!.runId,
      final.line_no,
      Buffer.concat([before.line.subarray(cut), final.line]),
    ]);
    assert.equal((await node.invocations.lookup(SCOPE, resplit!.id, REQUEST))?.status, "recorded");
  });

  test("a recorded claim whose journal record is gone reads unresolved, not replayed", async () => {
    const [target] = await recordedIds(node, 1);
    assert.equal((await node.invocations.lookup(SCOPE, target!.id, REQUEST))?.status, "recorded");
    await admin(url, "DELETE FROM warden_journals WHERE run_id = $1", [target!.runId]);
    const claim = await node.backend.claims.get({ scope: SCOPE, id: target!.id });
    assert.equal(await node.backend.journals.read(claim!.run_id, claim!.result!.journal.bytes), undefined, "no journal, though its lines remain");
    const answer = await node.invocations.lookup(SCOPE, target!.id, REQUEST);
    assert.deepEqual(answer?.status === "unresolved" && answer.audit.reasons, ["journal-changed"]);
  });
});
