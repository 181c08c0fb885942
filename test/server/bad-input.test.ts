/**
 * Bad input over HTTP (inject, real stores): every malformed request gets its own status and
 * problem code, the server keeps serving, and nothing stored changes.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import * as fs from "node:fs";
import { randomUUID } from "node:crypto";
import type { InjectOptions } from "fastify";
import { Settings } from "typebox/system";
import { problemOf } from "../../src/server/problem.js";
import {
  OPERATOR,
  chunkHeaders,
  compileTestBundle,
  contentOf,
  json,
  openTestNode,
  pushThroughApp,
  storedState,
  type TestNode,
} from "../support/app-node.js";
import { tempDir } from "../support/temp.js";

const KiB = 1024;

/** The statuses docs/errors.md lists for a code (none when it does not list the code). */
function referenceStatuses(code: string): string[] {
  const reference = fs.readFileSync(new URL("../../docs/errors.md", import.meta.url), "utf8");
  const row = reference.split("\n").find((line) => line.startsWith(`| \`${code}\` |`));
  return row === undefined ? [] : row.split("|")[2]!.split(",").map((s) => s.trim());
}

interface Case {
  readonly name: string;
  readonly request: () => InjectOptions;
  readonly status: number;
  readonly code: string | RegExp;
}

describe("bad input over HTTP", () => {
  let root: string;
  let node: TestNode;
  let stageId: string;
  let pendingDigest: string;
  before(async () => {
    root = tempDir("server-bad-input");
    node = await openTestNode(root, { settings: { jsonBodyBytes: 64 * KiB }, warden: { limits: { chunkBytes: 16 * KiB } } });
    // Something of everything stored: a committed bundle, a finished invocation, a half-uploaded stage.
    await pushThroughApp(node.app, await compileTestBundle(root, "kept", "r1"));
    const invoked = await node.app.inject({
      method: "POST",
      url: "/v1/invocations",
      headers: { ...OPERATOR, "idempotency-key": randomUUID(), prefer: "wait=20" },
      payload: { provider: "claude", prompt: "kept" },
    });
    assert.equal(invoked.statusCode, 200, invoked.payload);
    const pending = await compileTestBundle(root, "pending", "r1", { "skills/extra/SKILL.md": "---\nname: extra\ndescription: An extra skill.\n---\nbody\n" });
    const begun = json((await node.app.inject({ method: "POST", url: "/v1/stages", headers: OPERATOR, payload: pending.manifest })).payload);
    stageId = begun.stage_id as string;
    pendingDigest = (begun.missing as { digest: string }[])[0]!.digest;
    const part = await node.app.inject({
      method: "PATCH",
      url: `/v1/stages/${stageId}/blobs/${pendingDigest}`,
      headers: chunkHeaders(0),
      payload: contentOf(pending, pendingDigest).subarray(0, 5),
    });
    assert.equal(part.statusCode, 204);
  });
  after(async () => {
    await node.close();
    fs.rmSync(root, { recursive: true, force: true });
  });

  const manifestWith = (change: (m: Record<string, unknown>) => void) => async (): Promise<Record<string, unknown>> => {
    const bundle = await compileTestBundle(root, "bad", "r1");
    const m = JSON.parse(JSON.stringify(bundle.manifest)) as Record<string, unknown>;
    change(m);
    return m;
  };
  const traversal = manifestWith((m) => {
    const components = m.components as { relative_path: string }[];
    components[components.length - 1]!.relative_path = "skills/../../etc/passwd";
  });
  const unknownField = manifestWith((m) => {
    m.owner = "mallory";
  });
  let traversalManifest: Record<string, unknown>;
  let unknownFieldManifest: Record<string, unknown>;
  before(async () => {
    traversalManifest = await traversal();
    unknownFieldManifest = await unknownField();
  });

  const invoke = (headers: Record<string, string>, payload: unknown, contentType = "application/json") => ({
    method: "POST" as const,
    url: "/v1/invocations",
    headers: { ...OPERATOR, "content-type": contentType, ...headers },
    payload: typeof payload === "string" ? payload : JSON.stringify(payload),
  });
  const good = { provider: "claude", prompt: "hello" };

  const cases: Case[] = [
    { name: "malformed JSON", request: () => invoke({ "idempotency-key": randomUUID() }, '{"provider": "claude",'), status: 400, code: "json-malformed" },
    { name: "empty JSON body", request: () => invoke({ "idempotency-key": randomUUID() }, ""), status: 400, code: "json-body-empty" },
    { name: "prototype pollution", request: () => invoke({ "idempotency-key": randomUUID() }, '{"__proto__": {"x": 1}, "provider": "claude", "prompt": "p"}'), status: 400, code: "json-malformed" },
    { name: "unknown field in an invocation", request: () => invoke({ "idempotency-key": randomUUID() }, { ...good, scope: "api:root" }), status: 400, code: "invoke-request-unknown-field" },
    { name: "missing field", request: () => invoke({ "idempotency-key": randomUUID() }, { provider: "claude" }), status: 400, code: "invoke-request-missing-field" },
    { name: "an empty invocation", request: () => invoke({ "idempotency-key": randomUUID() }, {}), status: 400, code: "invoke-request-missing-field" },
    { name: "an empty materialization", request: () => ({ method: "POST", url: "/v1/bundles/kept/r1/materializations", headers: OPERATOR, payload: {} }), status: 400, code: "materialization-missing-field" },
    { name: "a signature of the wrong type", request: () => ({ method: "POST", url: "/v1/bundles/kept/r1/signatures", headers: OPERATOR, payload: { signature: 1 } }), status: 400, code: /^signature-(field-type|unknown-field|missing-field)$/ },
    { name: "wrong field type", request: () => invoke({ "idempotency-key": randomUUID() }, { ...good, timeout_s: "10" }), status: 400, code: "invoke-request-field-type" },
    { name: "not an object", request: () => invoke({ "idempotency-key": randomUUID() }, [good]), status: 400, code: "invoke-request-field-type" },
    { name: "oversized body", request: () => invoke({ "idempotency-key": randomUUID() }, { ...good, prompt: "x".repeat(80 * KiB) }), status: 413, code: "body-too-large" },
    { name: "wrong Content-Type on JSON", request: () => invoke({ "idempotency-key": randomUUID() }, JSON.stringify(good), "text/plain"), status: 415, code: "unsupported-media-type" },
    { name: "binary to a JSON route", request: () => invoke({ "idempotency-key": randomUUID() }, "\u0000\u0001", "application/octet-stream"), status: 415, code: "unsupported-media-type" },
    { name: "missing Idempotency-Key", request: () => invoke({}, good), status: 400, code: "idempotency-key-missing" },
    { name: "invalid Idempotency-Key", request: () => invoke({ "idempotency-key": "12345" }, good), status: 400, code: "idempotency-key-invalid" },
    { name: "unknown field in a manifest", request: () => ({ method: "POST", url: "/v1/stages", headers: OPERATOR, payload: unknownFieldManifest }), status: 400, code: "manifest-unknown-field" },
    { name: "path traversal in a manifest", request: () => ({ method: "POST", url: "/v1/stages", headers: OPERATOR, payload: traversalManifest }), status: 400, code: "manifest-path-traversal" },
    {
      name: "bad digest in the path",
      request: () => ({ method: "PATCH", url: `/v1/stages/${stageId}/blobs/sha256:XYZ`, headers: chunkHeaders(0), payload: Buffer.from("x") }),
      status: 400,
      code: "digest-invalid",
    },
    {
      name: "bad stage id in the path",
      request: () => ({ method: "PATCH", url: `/v1/stages/..%2F..%2Fetc/blobs/${pendingDigest}`, headers: chunkHeaders(0), payload: Buffer.from("x") }),
      status: 400,
      code: "stage-id-invalid",
    },
    {
      name: "a chunk for an unknown stage",
      request: () => ({ method: "PATCH", url: `/v1/stages/${"0".repeat(32)}/blobs/${pendingDigest}`, headers: chunkHeaders(0), payload: Buffer.from("x") }),
      status: 404,
      code: "stage-not-found",
    },
    {
      name: "a chunk of a blob the stage does not expect",
      request: () => ({ method: "PATCH", url: `/v1/stages/${stageId}/blobs/sha256:${"ab".repeat(32)}`, headers: chunkHeaders(0), payload: Buffer.from("x") }),
      status: 404,
      code: "stage-blob-not-found",
    },
    {
      name: "a chunk without Upload-Offset",
      request: () => ({ method: "PATCH", url: `/v1/stages/${stageId}/blobs/${pendingDigest}`, headers: { ...OPERATOR, "content-type": "application/octet-stream" }, payload: Buffer.from("x") }),
      status: 400,
      code: "upload-offset-missing",
    },
    {
      name: "a negative Upload-Offset",
      request: () => ({ method: "PATCH", url: `/v1/stages/${stageId}/blobs/${pendingDigest}`, headers: chunkHeaders(-1), payload: Buffer.from("x") }),
      status: 400,
      code: "upload-offset-invalid",
    },
    {
      // Digits only, but past 2^53: not an offset a number can hold (16 digits are over the schema's 15).
      name: "an Upload-Offset beyond a safe integer",
      request: () => ({ method: "PATCH", url: `/v1/stages/${stageId}/blobs/${pendingDigest}`, headers: { ...chunkHeaders(0), "upload-offset": "9007199254740993" }, payload: Buffer.from("x") }),
      status: 400,
      code: "upload-offset-invalid",
    },
    {
      name: "a chunk sent as JSON",
      request: () => ({ method: "PATCH", url: `/v1/stages/${stageId}/blobs/${pendingDigest}`, headers: { ...chunkHeaders(5), "content-type": "application/json" }, payload: "{}" }),
      status: 415,
      code: "unsupported-media-type",
    },
    {
      name: "a chunk over the chunk limit",
      request: () => ({ method: "PATCH", url: `/v1/stages/${stageId}/blobs/${pendingDigest}`, headers: chunkHeaders(5), payload: Buffer.alloc(17 * KiB) }),
      status: 413,
      code: "chunk-too-large",
    },
    // Bytes that are not UTF-8 would be decoded to U+FFFD: a different request than the one sent.
    {
      name: "a body that is not UTF-8",
      request: () => ({
        ...invoke({ "idempotency-key": randomUUID() }, ""),
        payload: Buffer.concat([Buffer.from('{"provider": "claude", "prompt": "caf'), Buffer.from([0xe9]), Buffer.from('"}')]),
      }),
      status: 400,
      code: "json-malformed",
    },
    // JSON.parse keeps the last of two names; a proxy that checked the request may have read the first.
    { name: "a name twice in one object", request: () => invoke({ "idempotency-key": randomUUID() }, '{"provider": "claude", "prompt": "a", "prompt": "b"}'), status: 400, code: "json-duplicate-name" },
    // JSON.parse accepts a lone surrogate; it has no UTF-8 form, so no request hash can be taken over it.
    { name: "a lone surrogate in a string", request: () => invoke({ "idempotency-key": randomUUID() }, '{"provider": "claude", "prompt": "\\ud800"}'), status: 400, code: "invalid-json" },
    // One rule for the id in the path: a UUID, with one code however it fails.
    { name: "an invocation id of 36 dashes", request: () => ({ method: "GET", url: `/v1/invocations/api:alice/${"-".repeat(36)}`, headers: OPERATOR }), status: 400, code: "invocation-id-invalid" },
    { name: "an invocation id that is no UUID", request: () => ({ method: "GET", url: "/v1/invocations/api:alice/xyz", headers: OPERATOR }), status: 400, code: "invocation-id-invalid" },
    // An id no manifest could carry is malformed, not merely unknown (docs/errors.md).
    ...["..%2f..%2fetc", "a%20b", "a%5cb", "x".repeat(129)].map((id) => ({
      name: `bundle id ${decodeURIComponent(id).slice(0, 20)} in the URL`,
      request: () => ({ method: "GET" as const, url: `/v1/bundles/${id}`, headers: OPERATOR }),
      status: 400,
      code: "bundle-id-invalid",
    })),
    { name: "a revision with a backslash in the URL", request: () => ({ method: "GET", url: "/v1/bundles/kept/r%5c1/manifest", headers: OPERATOR }), status: 400, code: "revision-invalid" },
    { name: "unknown route", request: () => ({ method: "GET", url: "/v1/nothing", headers: OPERATOR }), status: 404, code: "route-not-found" },
    { name: "unknown query parameter", request: () => ({ method: "GET", url: "/v1/invocations?owner=me", headers: OPERATOR }), status: 400, code: "query-unknown-field" },
    { name: "bad status filter", request: () => ({ method: "GET", url: "/v1/invocations?status=done", headers: OPERATOR }), status: 400, code: "query-invalid" },
    // A number in a query is read as written, never rounded or parsed from another notation.
    ...["1.5", "1e1", "0x10", "01", "%201", "true"].map((limit) => ({
      name: `page size ${limit}`,
      request: () => ({ method: "GET" as const, url: `/v1/invocations?limit=${limit}`, headers: OPERATOR }),
      status: 400,
      code: "query-invalid",
    })),
    { name: "a query parameter to a route that takes none", request: () => ({ method: "GET", url: "/v1/bundles?revision=r1", headers: OPERATOR }), status: 400, code: "query-unknown-field" },
    { name: "a query parameter to a run's journal", request: () => ({ method: "GET", url: `/v1/runs/${randomUUID()}/journal?x=1`, headers: OPERATOR }), status: 400, code: "query-unknown-field" },
    { name: "bad cursor", request: () => ({ method: "GET", url: "/v1/invocations?cursor=%7B%7D", headers: OPERATOR }), status: 400, code: "invalid-cursor" },
    { name: "bad run id", request: () => ({ method: "GET", url: "/v1/runs/not-a-uuid/journal", headers: OPERATOR }), status: 400, code: "run-id-invalid" },
    { name: "unknown run", request: () => ({ method: "GET", url: `/v1/runs/${randomUUID()}/verification`, headers: OPERATOR }), status: 404, code: "run-not-found" },
    {
      name: "review with an unknown field and every other field wrong or missing",
      request: () => ({ method: "POST", url: `/v1/invocations/api:alice/${randomUUID()}/reconciliation`, headers: OPERATOR, payload: { snapshot_hash: "x", extra: 1 } }),
      status: 400,
      code: "review-invalid",
    },
  ];

  for (const c of cases) {
    it(`${c.name} → ${c.status}`, async () => {
      const before = await storedState(node);
      const res = await node.app.inject(c.request());
      assert.equal(res.statusCode, c.status, res.payload);
      assert.match(String(res.headers["content-type"]), /^application\/problem\+json/);
      const problem = json(res.payload);
      if (typeof c.code === "string") assert.equal(problem.code, c.code);
      else assert.match(String(problem.code), c.code);
      assert.equal(problem.status, c.status);
      // The error reference lists the code with the status it is really answered with.
      assert.ok(referenceStatuses(String(problem.code)).includes(String(c.status)), `docs/errors.md lists ${String(problem.code)} with ${referenceStatuses(String(problem.code)).join(", ") || "nothing"}, answered ${c.status}`);
      assert.equal(problem.type, `urn:warden:problem:${problem.code as string}`);
      assert.equal(typeof problem.detail, "string");
      assert.doesNotMatch(res.payload, /node_modules|\n\s+at /);
      // The server keeps serving, and nothing stored changed.
      const ready = await node.app.inject({ url: "/readyz", headers: OPERATOR });
      assert.equal(ready.statusCode, 200);
      assert.equal(await storedState(node), before);
    });
  }

  it("the half-uploaded stage still resumes where it was after all of that", async () => {
    const status = json((await node.app.inject({ url: `/v1/stages/${stageId}`, headers: OPERATOR })).payload);
    assert.equal((status.missing as { digest: string; offset: number }[]).find((m) => m.digest === pendingDigest)?.offset, 5);
  });

  it("a wrong status filter is told every status a list takes, the ninth too", async () => {
    // TypeBox stops collecting errors at 8 by default, one per literal of a union: the list
    // shown once ended at "expired", leaving out "refused", which the filter accepts.
    const setting = Settings.Get().maxErrors;
    const res = await node.app.inject({ method: "GET", url: "/v1/invocations?status=done", headers: OPERATOR });
    assert.equal(res.statusCode, 400, res.payload);
    const listed = ["in_progress", "awaiting_approval", "unresolved", "recorded", "reconciled", "queued", "cancelled", "expired", "refused"];
    assert.equal(json(res.payload).detail, `query parameter "status" must be one of ${listed.map((s) => `"${s}"`).join(", ")}`);
    assert.equal(Settings.Get().maxErrors, setting, "TypeBox's process-wide limit is back to what it was");
    for (const status of listed) {
      const ok = await node.app.inject({ method: "GET", url: `/v1/invocations?status=${status}`, headers: OPERATOR });
      assert.equal(ok.statusCode, 200, `${status}: ${ok.payload}`);
    }
  });

  it("an unknown query parameter is named as one", async () => {
    const res = await node.app.inject({ method: "GET", url: "/v1/invocations?owner=me", headers: OPERATOR });
    assert.equal(res.statusCode, 400, res.payload);
    assert.equal(json(res.payload).detail, 'unknown query parameter "owner"');
    assert.equal(json(res.payload).field, "owner");
  });

  it("a malformed path parameter is told what it must be, not a regular expression", async () => {
    const told = async (url: string): Promise<string> => String(json((await node.app.inject({ method: "GET", url, headers: OPERATOR })).payload).detail);
    assert.equal(await told("/v1/bundles/a%20b"), `path parameter "bundle_id" must be 1–128 bytes of printable ASCII without a space, '/' or '\\'`);
    assert.equal(await told("/v1/invocations/api:alice/xyz"), 'path parameter "id" must be a UUID');
    assert.equal(await told("/v1/stages/XYZ"), 'path parameter "stage_id" must be 32 lowercase hex digits');
    assert.equal(await told(`/v1/runs/${randomUUID()}/changes/blobs/sha256:AB`), 'path parameter "digest" must be "sha256:" + 64 lowercase hex digits');
  });

  it("an unexpected error is a 500 internal-error that reveals nothing of it", () => {
    const spec = problemOf(new Error("secret path /etc/shadow at line 3"), undefined);
    assert.equal(spec.status, 500);
    assert.equal(spec.code, "internal-error");
    assert.doesNotMatch(spec.detail, /secret|shadow/);
  });
});
