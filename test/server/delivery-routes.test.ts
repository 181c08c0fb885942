/**
 * Delivery over HTTP (inject, real embedded stores): stage begin/resume, binary chunk upload with
 * Upload-Offset, every chunk refusal with its status and code, commit and its replay, abort,
 * the catalog and materializations.
 */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import * as fs from "node:fs";
import { hashToken } from "../../src/config/tokens.js";
import type { LogLevel } from "../../src/config/schema.js";
import { createServer } from "../../src/server/app.js";
import { sha256Digest } from "../../src/core/digest.js";
import {
  OBSERVER,
  OPERATOR,
  OPERATOR_TOKEN,
  chunkHeaders,
  compileTestBundle,
  contentOf,
  json,
  logSink,
  openTestNode,
  pushThroughApp,
  useTestNode,
} from "../support/app-node.js";
import { tempDir } from "../support/temp.js";

describe("delivery routes", () => {
  const node = useTestNode("server-delivery");

  it("uploads a bundle in chunks, resumes a stage, refuses bad chunks, commits idempotently", async () => {
    const bundle = await compileTestBundle(node.root, "chunks", "r1");
    const begin = await node.app.inject({ method: "POST", url: "/v1/stages", headers: OPERATOR, payload: bundle.manifest });
    assert.equal(begin.statusCode, 201);
    const begun = json(begin.payload);
    const stageId = begun.stage_id as string;
    assert.equal(begun.manifest_digest, bundle.manifest.manifest_digest);
    // The node's request limit, so a client sizes its chunks within it from the first.
    assert.equal(begun.chunk_bytes, node.warden.limits.chunkBytes);
    const missing = begun.missing as { digest: string; byte_len: number; offset: number }[];
    assert.equal(missing.length, bundle.manifest.components.length);
    assert.ok(missing.every((m) => m.offset === 0));

    const [first, ...rest] = missing;
    assert.ok(first !== undefined && first.byte_len > 10);
    const bytes = contentOf(bundle, first.digest);
    const url = `/v1/stages/${stageId}/blobs/${first.digest}`;
    const part1 = await node.app.inject({ method: "PATCH", url, headers: chunkHeaders(0), payload: bytes.subarray(0, 10) });
    assert.equal(part1.statusCode, 204);
    assert.equal(part1.headers["upload-offset"], "10");
    assert.equal(part1.payload, "");
    // A body-less 204: no content-type or content-length (RFC 9110), however the route sends it.
    assert.equal(part1.headers["content-type"], undefined);
    assert.equal(part1.headers["content-length"], undefined);

    // The same manifest again resumes the same stage with the durable offsets.
    const again = json((await node.app.inject({ method: "POST", url: "/v1/stages", headers: OPERATOR, payload: bundle.manifest })).payload);
    assert.equal(again.stage_id, stageId);
    assert.equal((again.missing as { digest: string; offset: number }[]).find((m) => m.digest === first.digest)?.offset, 10);

    // A gap is refused with where to continue.
    const gap = await node.app.inject({ method: "PATCH", url, headers: chunkHeaders(12), payload: bytes.subarray(12, 14) });
    assert.equal(gap.statusCode, 409);
    assert.equal(gap.headers["content-type"], "application/problem+json; charset=utf-8");
    assert.equal(json(gap.payload).code, "chunk-out-of-order");
    assert.equal(json(gap.payload).expected_offset, 10);

    // Replaying bytes already received is accepted; different bytes at that offset are not.
    const replay = await node.app.inject({ method: "PATCH", url, headers: chunkHeaders(4), payload: bytes.subarray(4, 8) });
    assert.equal(replay.statusCode, 204);
    assert.equal(replay.headers["upload-offset"], "8");
    const wrongReplay = await node.app.inject({ method: "PATCH", url, headers: chunkHeaders(4), payload: Buffer.from("XXXX") });
    assert.equal(wrongReplay.statusCode, 409);
    assert.equal(json(wrongReplay.payload).code, "chunk-out-of-order");

    // Past the blob's length.
    const overflow = await node.app.inject({ method: "PATCH", url, headers: chunkHeaders(10), payload: Buffer.concat([bytes.subarray(10), Buffer.from("!")]) });
    assert.equal(overflow.statusCode, 413);
    assert.equal(json(overflow.payload).code, "chunk-overflow");

    // Wrong bytes to the end: the blob restarts at 0.
    const wrong = Buffer.from(bytes.subarray(10));
    wrong[0] = wrong[0]! ^ 0xff;
    const mismatch = await node.app.inject({ method: "PATCH", url, headers: chunkHeaders(10), payload: wrong });
    assert.equal(mismatch.statusCode, 422);
    assert.equal(json(mismatch.payload).code, "blob-digest-mismatch");
    const status = json((await node.app.inject({ url: `/v1/stages/${stageId}`, headers: OBSERVER })).payload);
    assert.equal((status.missing as { digest: string; offset: number }[]).find((m) => m.digest === first.digest)?.offset, 0);

    // Commit before everything is there.
    const early = await node.app.inject({ method: "POST", url: `/v1/stages/${stageId}/commit`, headers: OPERATOR });
    assert.equal(early.statusCode, 409);
    assert.equal(json(early.payload).code, "stage-incomplete");

    for (const m of [first, ...rest]) {
      const res = await node.app.inject({ method: "PATCH", url: `/v1/stages/${stageId}/blobs/${m.digest}`, headers: chunkHeaders(0), payload: contentOf(bundle, m.digest) });
      assert.equal(res.statusCode, 204, res.payload);
      assert.equal(res.headers["upload-offset"], String(m.byte_len));
    }
    const commit = await node.app.inject({ method: "POST", url: `/v1/stages/${stageId}/commit`, headers: OPERATOR });
    assert.equal(commit.statusCode, 200);
    const receipt = json(commit.payload).receipt as Record<string, unknown>;
    assert.equal(receipt.manifest_digest, bundle.manifest.manifest_digest);
    assert.equal(receipt.bundle_digest, bundle.manifest.bundle_digest);
    const replayCommit = await node.app.inject({ method: "POST", url: `/v1/stages/${stageId}/commit`, headers: OPERATOR });
    assert.equal(replayCommit.statusCode, 200);
    assert.deepEqual(json(replayCommit.payload).receipt, receipt);

    // Begin of a committed manifest answers its receipt.
    const committed = await node.app.inject({ method: "POST", url: "/v1/stages", headers: OPERATOR, payload: bundle.manifest });
    assert.equal(committed.statusCode, 200);
    assert.deepEqual(json(committed.payload), { stage_id: stageId, manifest_digest: bundle.manifest.manifest_digest, committed: true, receipt, missing: [], chunk_bytes: node.warden.limits.chunkBytes });
  });

  it("logs chunk requests only at debug; a refused chunk is logged at info all the same", async () => {
    /** Pushes a new blob in two chunks plus one refused chunk; answers the log lines. */
    const linesAt = async (logLevel: LogLevel): Promise<{ msg: string; url?: string; code?: string }[]> => {
      const bundle = await compileTestBundle(node.root, "chunk-logs", logLevel, { "notes/level.md": `new bytes at ${logLevel}\n`.repeat(50) });
      const log = logSink();
      const sink = log.stream;
      const tokens = [{ name: "alice", role: "operator" as const, hash: hashToken(OPERATOR_TOKEN) }];
      const app = await createServer(node.warden, { tokens, maxWaitS: 1, jsonBodyBytes: 256 * 1024, logLevel }, { logStream: sink });
      try {
        const begun = json((await app.inject({ method: "POST", url: "/v1/stages", headers: OPERATOR, payload: bundle.manifest })).payload);
        const missing = begun.missing as { digest: string; offset: number }[];
        assert.equal(missing.length, 1, "only the new file is missing");
        const blob = missing[0]!;
        const bytes = contentOf(bundle, blob.digest).subarray(blob.offset);
        const url = `/v1/stages/${begun.stage_id as string}/blobs/${blob.digest}`;
        const half = Math.floor(bytes.byteLength / 2);
        assert.equal((await app.inject({ method: "PATCH", url, headers: chunkHeaders(blob.offset), payload: bytes.subarray(0, half) })).statusCode, 204);
        assert.equal((await app.inject({ method: "PATCH", url, headers: chunkHeaders(blob.offset + half + 1), payload: bytes.subarray(half + 1) })).statusCode, 409);
        assert.equal((await app.inject({ method: "PATCH", url, headers: chunkHeaders(blob.offset + half), payload: bytes.subarray(half) })).statusCode, 204);
        await app.inject({ method: "DELETE", url: `/v1/stages/${begun.stage_id as string}`, headers: OPERATOR });
      } finally {
        await app.close();
      }
      return log.text()
        .split("\n")
        .filter((line) => line !== "")
        .map((line) => JSON.parse(line) as { msg: string; req?: { url?: string }; code?: string })
        .map((entry) => ({ msg: entry.msg, ...(entry.req?.url !== undefined ? { url: entry.req.url } : {}), ...(entry.code !== undefined ? { code: entry.code } : {}) }));
    };
    const isChunk = (line: { url?: string }): boolean => line.url?.includes("/blobs/") === true;

    const info = await linesAt("info");
    assert.ok(info.some((l) => l.msg === "incoming request" && l.url === "/v1/stages"), "other routes still log their requests");
    assert.ok(!info.some(isChunk), "no line per chunk at info");
    assert.equal(info.filter((l) => l.msg === "request completed").length, 2, "begin and abort completed; no chunk");
    assert.deepEqual(info.filter((l) => l.msg === "request refused"), [{ msg: "request refused", code: "chunk-out-of-order" }]);

    const debug = await linesAt("debug");
    assert.equal(debug.filter((l) => l.msg === "incoming request" && isChunk(l)).length, 3, "every chunk is logged at debug");
    assert.equal(debug.filter((l) => l.msg === "request completed").length, 5);
  });

  it("lists bundles for observers, shows one, 404s an unknown one, and aborts stages", async () => {
    const bundle = await compileTestBundle(node.root, "listed", "r1");
    const receipt = await pushThroughApp(node.app, bundle);
    const list = await node.app.inject({ url: "/v1/bundles", headers: OBSERVER });
    assert.equal(list.statusCode, 200);
    const views = json(list.payload).bundles as { bundle_id: string; revisions: { revision: string; receipt: unknown }[] }[];
    const listed = views.find((b) => b.bundle_id === "listed");
    assert.deepEqual(listed?.revisions.map((r) => r.revision), ["r1"]);
    assert.deepEqual(listed?.revisions[0]?.receipt, receipt);
    const show = await node.app.inject({ url: "/v1/bundles/listed", headers: OBSERVER });
    assert.equal(show.statusCode, 200);
    assert.equal(json(show.payload).bundle_id, "listed");
    const unknown = await node.app.inject({ url: "/v1/bundles/nope", headers: OBSERVER });
    assert.equal(unknown.statusCode, 404);
    assert.equal(json(unknown.payload).code, "bundle-not-found");

    const other = await compileTestBundle(node.root, "aborted", "r1", { "skills/extra/SKILL.md": "---\nname: extra\ndescription: An extra skill.\n---\nbody\n" });
    const stageId = json((await node.app.inject({ method: "POST", url: "/v1/stages", headers: OPERATOR, payload: other.manifest })).payload).stage_id as string;
    const del = await node.app.inject({ method: "DELETE", url: `/v1/stages/${stageId}`, headers: OPERATOR });
    assert.equal(del.statusCode, 204);
    const gone = await node.app.inject({ url: `/v1/stages/${stageId}`, headers: OPERATOR });
    assert.equal(gone.statusCode, 404);
    assert.equal(json(gone.payload).code, "stage-not-found");
  });

  it("materializes a committed revision for a provider", async () => {
    const bundle = await compileTestBundle(node.root, "mat", "r1");
    await pushThroughApp(node.app, bundle);
    const res = await node.app.inject({ method: "POST", url: "/v1/bundles/mat/r1/materializations", headers: OPERATOR, payload: { provider: "claude" } });
    assert.equal(res.statusCode, 201, res.payload);
    const m = json(res.payload) as { root: string; args: string[]; env: Record<string, string> };
    assert.deepEqual(m.args, ["--plugin-dir", `${m.root}/bundle`]);
    assert.deepEqual(m.env, {});
    const skill = fs.readFileSync(`${m.root}/bundle/skills/review/SKILL.md`);
    const expected = bundle.manifest.components.find((c) => c.relative_path === "skills/review/SKILL.md")!;
    assert.equal(sha256Digest(skill), expected.blob.digest);
    assert.equal(fs.statSync(m.root).mode & 0o777, 0o700);

    const codex = json((await node.app.inject({ method: "POST", url: "/v1/bundles/mat/r1/materializations", headers: OPERATOR, payload: { provider: "codex" } })).payload);
    assert.deepEqual(codex.args, []);
    assert.deepEqual(codex.env, { CODEX_HOME: `${codex.root as string}/home` });

    const badProvider = await node.app.inject({ method: "POST", url: "/v1/bundles/mat/r1/materializations", headers: OPERATOR, payload: { provider: "gpt" } });
    assert.equal(badProvider.statusCode, 400);
    assert.equal(json(badProvider.payload).code, "materialization-field-invalid");
    const unknownRevision = await node.app.inject({ method: "POST", url: "/v1/bundles/mat/r9/materializations", headers: OPERATOR, payload: { provider: "claude" } });
    assert.equal(unknownRevision.statusCode, 404);
    assert.equal(json(unknownRevision.payload).code, "revision-not-found");
  });
});

describe("materialized trees kept by a node", () => {
  it("are bounded by limits.materializations (429), removed by DELETE /v1/materializations/{session}, which gives the place back", async () => {
    const root = tempDir("server-materializations");
    const node = await openTestNode(root, { warden: { limits: { materializations: 2 } } });
    try {
      await pushThroughApp(node.app, await compileTestBundle(root, "kept", "r1"));
      const materialize = () => node.app.inject({ method: "POST", url: "/v1/bundles/kept/r1/materializations", headers: OPERATOR, payload: { provider: "claude" } });
      const first = json((await materialize()).payload) as { session: string; root: string };
      const second = await materialize();
      assert.equal(second.statusCode, 201, second.payload);
      const third = await materialize();
      assert.equal(third.statusCode, 429, third.payload);
      assert.equal(json(third.payload).code, "materialization-capacity-exhausted");
      // An observer may not remove one; an id the node did not hand out is not found.
      const del = (session: string, headers = OPERATOR) => node.app.inject({ method: "DELETE", url: `/v1/materializations/${session}`, headers });
      assert.equal((await del(first.session, OBSERVER)).statusCode, 403);
      const unknown = await del("6f1c2b1e-1111-4222-8333-944445555666");
      assert.equal(unknown.statusCode, 404);
      assert.equal(json(unknown.payload).code, "materialization-not-found");
      assert.equal((await del("not-a-uuid")).statusCode, 400);
      assert.equal(fs.existsSync(first.root), true);
      assert.equal((await del(first.session)).statusCode, 204);
      assert.equal(fs.existsSync(first.root), false, "the tree is gone from disk");
      assert.equal((await del(first.session)).statusCode, 404, "removed once");
      // Two DELETEs of one tree at once (a retry racing the first): one removes it, the other is not found.
      const raced = json((await materialize()).payload) as { session: string; root: string };
      const both = await Promise.all([del(raced.session), del(raced.session)]);
      assert.deepEqual(both.map((r) => r.statusCode).sort(), [204, 404], both.map((r) => r.payload).join(" "));
      assert.equal(fs.existsSync(raced.root), false);
      assert.equal((await materialize()).statusCode, 201, "its place is free again");
    } finally {
      await node.close();
      fs.rmSync(root, { recursive: true, force: true });
    }
  });
});

describe("a revision retired over the API", () => {
  it("is refused to new sessions, stays listed, and the blobs only it held are deleted at once", async () => {
    const root = tempDir("server-retirement");
    const node = await openTestNode(root);
    try {
      const r1 = await compileTestBundle(root, "ret", "r1", { "docs/only-r1.md": "only in r1\n" });
      const r2 = await compileTestBundle(root, "ret", "r2", { "docs/only-r2.md": "only in r2\n" });
      await pushThroughApp(node.app, r1);
      await pushThroughApp(node.app, r2);
      const retire = (revision: string, headers = OPERATOR) => node.app.inject({ method: "POST", url: `/v1/bundles/ret/${revision}/retirement`, headers });
      assert.equal((await retire("r1", OBSERVER)).statusCode, 403);
      const retired = await retire("r1");
      assert.equal(retired.statusCode, 200, retired.payload);
      const onlyR1 = new Set(r1.manifest.components.map((c) => c.blob.digest));
      for (const c of r2.manifest.components) onlyR1.delete(c.blob.digest);
      assert.ok(onlyR1.size >= 1);
      assert.deepEqual(json(retired.payload), { bundle_id: "ret", revision: "r1", retired: true, collected_blobs: onlyR1.size });
      // Retiring again changes nothing; an unknown revision is not found.
      assert.equal(json((await retire("r1")).payload).collected_blobs, 0);
      const unknown = await retire("r9");
      assert.equal(unknown.statusCode, 404);
      assert.equal(json(unknown.payload).code, "revision-not-found");
      const view = json((await node.app.inject({ url: "/v1/bundles/ret", headers: OBSERVER })).payload) as { revisions: { revision: string; retired: boolean }[] };
      assert.deepEqual(view.revisions.map((r) => [r.revision, r.retired]), [["r1", true], ["r2", false]]);
      const materialize = (revision: string) =>
        node.app.inject({ method: "POST", url: `/v1/bundles/ret/${revision}/materializations`, headers: OPERATOR, payload: { provider: "claude" } });
      const refused = await materialize("r1");
      assert.equal(json(refused.payload).code, "revision-retired");
      assert.equal((await materialize("r2")).statusCode, 201, "the live revision, which shares the other blobs, is whole");
    } finally {
      await node.close();
      fs.rmSync(root, { recursive: true, force: true });
    }
  });
});
