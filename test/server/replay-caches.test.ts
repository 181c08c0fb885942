/**
 * The replay path answers from memory only while what is stored is unchanged: the journal read
 * cache (file identity, ctime settled, re-read at least every second), the claim store's settled
 * rows (SQLite data_version and this connection's total_changes) and the replay checks (inputs
 * that passed, compared field for field and byte for byte). Each test first shows the memory is
 * really used (the same object comes back), then changes what is stored behind it and requires
 * the change to be seen — so a cache that stopped noticing changes fails here.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import * as fs from "node:fs";
import * as path from "node:path";
import { EmbeddedClaimStore } from "../../src/backends/embedded/claims/claim-store.js";
import { CLAIMS_DATABASE } from "../../src/backends/embedded/index.js";
import { REMEMBERED_READ_MS, SETTLED_FILE_MS, SmallReadJournalStore } from "../../src/backends/embedded/journal/small-read-journal-store.js";
import { sha256Digest } from "../../src/core/digest.js";
import { claimHashOf, type ClaimRecord } from "../../src/invocations/index.js";
import { claimRow, editClaim } from "../invocations/fixtures/tamper.js";
import { OPERATOR, useTestNode } from "../support/app-node.js";
import { tempDir } from "../support/temp.js";

const RUN = "0b7f6a52-3d1e-4c8a-9f1e-2a4b6c8d0e1f";

/** Rewrites one byte in place: same size, same inode. */
function flipByte(file: string, at: number): void {
  const fd = fs.openSync(file, "r+");
  try {
    const one = Buffer.alloc(1);
    fs.readSync(fd, one, 0, 1, at);
    one[0] = one[0]! ^ 0x01;
    fs.writeSync(fd, one, 0, 1, at);
  } finally {
    fs.closeSync(fd);
  }
}

describe("journal read cache", () => {
  let root: string;
  before(() => {
    root = tempDir("server-replay-journal");
  });
  after(() => fs.rmSync(root, { recursive: true, force: true }));

  it("answers a settled journal from memory, and reads it again after any change or after a second", async () => {
    let clock = Date.now() + 10 * SETTLED_FILE_MS;
    const store = new SmallReadJournalStore(path.join(root, "settled"), { now: () => clock });
    const file = store.pathOf(RUN);
    const original = Buffer.from('{"entry":1}\n{"entry":2}\n', "utf8");
    fs.writeFileSync(file, original, { mode: 0o600 });
    const size = original.byteLength;

    const first = await store.read(RUN, size);
    assert.deepEqual(first, original);
    assert.equal(await store.read(RUN, size), first, "a settled, unchanged file is answered from memory");

    flipByte(file, 3);
    const flipped = await store.read(RUN, size);
    assert.notEqual(flipped, first);
    assert.notDeepEqual(flipped, original, "a byte changed in place is seen on the next read");
    assert.equal(await store.read(RUN, size), flipped, "the changed file, once settled, is remembered in turn");

    fs.truncateSync(file, size - 4);
    assert.equal((await store.read(RUN, size))?.byteLength, size - 4, "a truncation is seen");

    fs.writeFileSync(file, Buffer.concat([original, original]), { mode: 0o600 });
    await assert.rejects(store.read(RUN, size), (e: unknown) => (e as { code?: string }).code === "journal-too-large", "growth past the bound is refused");

    // Replaced by rename with the same bytes: a new inode, read again (same content, new buffer).
    const copy = path.join(path.dirname(file), "copy.tmp");
    fs.writeFileSync(copy, original, { mode: 0o600 });
    fs.renameSync(copy, file);
    const renamed = await store.read(RUN, size);
    assert.deepEqual(renamed, original);
    assert.equal(await store.read(RUN, size), renamed);

    clock += REMEMBERED_READ_MS;
    const later = await store.read(RUN, size);
    assert.deepEqual(later, original);
    assert.notEqual(later, renamed, "a remembered file is read again in full once its time is up");

    fs.chmodSync(file, 0o644);
    await assert.rejects(store.read(RUN, size), (e: unknown) => (e as { code?: string }).code === "unsafe-storage-mode", "an unsafe file is never answered from memory");
    fs.chmodSync(file, 0o600);

    fs.rmSync(file);
    assert.equal(await store.read(RUN, size), undefined, "a deleted journal is gone");
  });

  it("never remembers a file that changed less than SETTLED_FILE_MS before it was read", async () => {
    const store = new SmallReadJournalStore(path.join(root, "fresh"));
    const file = store.pathOf(RUN);
    fs.writeFileSync(file, "line\n", { mode: 0o600 });
    const first = await store.read(RUN, 5);
    const second = await store.read(RUN, 5);
    assert.deepEqual(second, first);
    assert.notEqual(second, first, "a file written just now is read in full every time");
  });
});

describe("claim store row cache", () => {
  let root: string;
  let store: EmbeddedClaimStore;
  before(() => {
    root = tempDir("server-replay-claims");
    fs.mkdirSync(path.join(root, "owners"), { mode: 0o700 });
    store = EmbeddedClaimStore.open({ path: path.join(root, CLAIMS_DATABASE), ownersDir: path.join(root, "owners"), maxClaims: 100 });
  });
  after(async () => {
    await store.close();
    fs.rmSync(root, { recursive: true, force: true });
  });

  async function recordedKey(): Promise<{ scope: string; id: string }> {
    const key = { scope: "api:test", id: randomUUID() };
    const identity = { ...key, request_hash: sha256Digest("request"), agent: "agent", run_id: randomUUID(), created_at: Date.now() };
    const attempt = await store.claim({ ...identity, claim_hash: claimHashOf(identity) });
    assert.equal(attempt.created, true);
    const result = {
      hash: sha256Digest('{"ok":true}'),
      payload: '{"ok":true}',
      recorded_at: Date.now(),
      journal: { entries: 2, tail_hash: "a".repeat(64), bytes: 100, sha256: sha256Digest("journal") },
    };
    assert.equal(await store.record(key, identity.run_id, result, claimHashOf({ ...identity, result } as ClaimRecord)), true);
    return key;
  }

  it("answers a settled row from memory until another connection or this one writes", async () => {
    const key = await recordedKey();
    const first = await store.get(key);
    assert.equal(first?.result?.payload, '{"ok":true}');
    assert.equal(await store.get(key), first, "an unchanged settled row is answered from memory");

    // Another connection (here the tamper fixture) commits: data_version moves.
    assert.equal(editClaim(root, key.scope, key.id, "result = ?", '{"ok":false}'), 1);
    const edited = await store.get(key);
    assert.equal(edited?.result?.payload, '{"ok":false}', "a row edited by another connection is read again");
    assert.equal(await store.get(key), edited);

    // This connection writes another row: total_changes moves, and nothing stale is answered.
    await recordedKey();
    const afterOwnWrite = await store.get(key);
    assert.notEqual(afterOwnWrite, edited);
    assert.deepEqual(afterOwnWrite, edited);
    assert.equal(claimRow(root, key.scope, key.id)?.result, '{"ok":false}');
  });

  it("reads an open claim (its owner's liveness) every time", async () => {
    const key = { scope: "api:test", id: randomUUID() };
    const identity = { ...key, request_hash: sha256Digest("request"), agent: "agent", run_id: randomUUID(), created_at: Date.now() };
    await store.claim({ ...identity, claim_hash: claimHashOf(identity) });
    const first = await store.get(key);
    assert.equal(first?.owner_alive, true);
    assert.notEqual(await store.get(key), first);
    await store.release(key, identity.run_id);
    const released = await store.get(key);
    assert.equal(released?.released, true);
    assert.equal(released?.owner_alive, false);
  });
});

describe("warmed replays over HTTP", () => {
  const node = useTestNode("server-replay-warm");

  const body = { provider: "kimi", prompt: "replay me" };
  const post = (key: string) =>
    node.app.inject({ method: "POST", url: "/v1/invocations", headers: { ...OPERATOR, "idempotency-key": key, prefer: "wait=20" }, payload: body });

  /** Records `key`, lets its journal settle, and replays it until every cache holds it. */
  async function warmed(key: string): Promise<{ runId: string; journal: string }> {
    const fresh = await post(key);
    assert.equal(fresh.statusCode, 200, fresh.payload);
    const runId = (JSON.parse(fresh.payload) as { run_id: string }).run_id;
    // Time itself is what is awaited: the store remembers a journal only once its file is older
    // than SETTLED_FILE_MS by the clock (a machine's load only makes that come later, not sooner).
    await new Promise((r) => setTimeout(r, SETTLED_FILE_MS + 100));
    for (let i = 0; i < 3; i++) {
      const replay = await post(key);
      assert.equal(replay.statusCode, 200, replay.payload);
      assert.equal(replay.headers["idempotency-replayed"], "true");
    }
    return { runId, journal: path.join(node.home, "journals", `${runId}.ndjson`) };
  }

  it("refuses a journal byte changed in place after warm replays (409 unresolved)", async () => {
    const key = randomUUID();
    const { journal } = await warmed(key);
    flipByte(journal, 40);
    const replay = await post(key);
    assert.equal(replay.statusCode, 409, replay.payload);
    assert.equal((JSON.parse(replay.payload) as { code: string }).code, "unresolved");
  });

  it("refuses a row edited after warm replays, even a consistent forgery (500, then 409)", async () => {
    const key = randomUUID();
    await warmed(key);
    const scope = "api:alice";
    editClaim(node.home, scope, key, "result = ?", '{"forged":true}');
    const corrupt = await post(key);
    assert.equal(corrupt.statusCode, 500, corrupt.payload);
    assert.equal((JSON.parse(corrupt.payload) as { code: string }).code, "claim-record-corrupt");

    // Payload, result hash and claim hash rewritten consistently: the journal's signed
    // termination still names the real result hash.
    const o = claimRow(node.home, scope, key)!;
    const payload = '{"forged":true}';
    const hash = sha256Digest(payload);
    const record = {
      scope, id: key, request_hash: o.request_hash, agent: o.agent, run_id: o.run_id, created_at: o.created_at,
      result: { hash, recorded_at: o.recorded_at, journal: { entries: o.journal_entries, tail_hash: o.journal_tail, bytes: o.journal_bytes, sha256: o.journal_sha256 } },
    } as unknown as ClaimRecord;
    editClaim(node.home, scope, key, "result = ?, result_hash = ?, claim_hash = ?", payload, hash, claimHashOf(record));
    const forged = await post(key);
    assert.equal(forged.statusCode, 409, forged.payload);
    assert.equal((JSON.parse(forged.payload) as { code: string }).code, "unresolved");
  });
});
