/**
 * HTTP API v1 conformance for requests the router itself refuses before any route or hook runs
 * (DESIGN.md "HTTP API v1": every error is an `application/problem+json` document with a stable
 * `code`; "Limits": a scope is 1–256 bytes). fastify answers such URLs with its own JSON unless
 * the app hands them to the problem handler, and its default parameter bound (100 characters)
 * is shorter than a valid scope in a URL.
 */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import type { LightMyRequestResponse } from "fastify";
import { OPERATOR, json, useTestNode } from "../support/app-node.js";

function assertProblem(res: LightMyRequestResponse, status: number, code: string): Record<string, unknown> {
  assert.equal(res.statusCode, status, res.payload);
  assert.match(String(res.headers["content-type"]), /^application\/problem\+json/);
  const problem = json(res.payload);
  assert.equal(problem.code, code);
  assert.equal(problem.status, status);
  assert.equal(problem.type, `urn:warden:problem:${code}`);
  assert.equal(typeof problem.title, "string");
  assert.equal(typeof problem.detail, "string");
  // The id a client quotes is the one the node logged under.
  assert.equal(problem.request_id, res.headers["x-request-id"]);
  return problem;
}

describe("HTTP conformance: URLs the router refuses", () => {
  const node = useTestNode("server-conformance");

  const stillServing = async (): Promise<void> => {
    const ready = await node.app.inject({ url: "/readyz", headers: OPERATOR });
    assert.equal(ready.statusCode, 200);
  };

  for (const [what, headers] of [
    ["with a token", OPERATOR],
    ["without a token", {}],
  ] as const) {
    it(`a malformed percent-encoding in the path is a 400 url-invalid problem (${what})`, async () => {
      const res = await node.app.inject({ method: "GET", url: "/v1/bundles/%zz", headers });
      const problem = assertProblem(res, 400, "url-invalid");
      assert.doesNotMatch(JSON.stringify(problem), /FST_ERR/);
      await stillServing();
    });
  }

  it("a scope of 256 bytes (762 characters percent-encoded) reaches the route", async () => {
    const scope = `api:${"é".repeat(126)}`;
    assert.equal(Buffer.byteLength(scope), 256);
    const id = randomUUID();
    const res = await node.app.inject({ url: `/v1/invocations/${encodeURIComponent(scope)}/${id}`, headers: OPERATOR });
    const problem = assertProblem(res, 404, "invocation-not-found");
    assert.equal(problem.scope, scope);
    assert.equal(res.headers["cache-control"], "no-store");
    // One byte more is the scope limit's own refusal, not the router's.
    const over = await node.app.inject({ url: `/v1/invocations/${encodeURIComponent(`${scope}a`)}/${id}`, headers: OPERATOR });
    assert.equal(json(over.payload).code, "scope-too-large");
    assert.match(String(over.headers["content-type"]), /^application\/problem\+json/);
  });

  it("a path segment longer than any valid parameter is a 414 url-too-long problem", async () => {
    for (const url of [`/v1/bundles/${"a".repeat(2000)}`, `/v1/invocations/${"a".repeat(2000)}/${randomUUID()}`]) {
      const res = await node.app.inject({ url, headers: OPERATOR });
      const problem = assertProblem(res, 414, "url-too-long");
      assert.ok(!JSON.stringify(problem).includes("a".repeat(200)), "the refused URL is not echoed back");
    }
    await stillServing();
  });
});

describe("HTTP conformance: a known resource asked with a method it does not answer", () => {
  const node = useTestNode("server-conformance-405");

  it("is a 405 method-not-allowed problem naming the methods it does answer (Allow)", async () => {
    const stage = "0123456789abcdef0123456789abcdef";
    for (const [method, url, allow] of [
      ["PUT", "/v1/stages", "GET, HEAD, POST"],
      ["DELETE", "/v1/bundles", "GET, HEAD"],
      ["GET", `/v1/stages/${stage}/commit`, "POST"],
      ["POST", `/v1/runs/${randomUUID()}/journal`, "GET, HEAD"],
    ] as const) {
      const res = await node.app.inject({ method, url, headers: OPERATOR });
      const problem = assertProblem(res, 405, "method-not-allowed");
      assert.equal(res.headers.allow, allow, `${method} ${url}`);
      assert.match(String(problem.detail), new RegExp(`not ${method}$`));
    }
  });

  it("a path no route answers stays a 404 route-not-found, with no Allow", async () => {
    for (const url of ["/v1/nothing", "/v1/stages/x/y/z", "/v1/runs"]) {
      const res = await node.app.inject({ method: "GET", url, headers: OPERATOR });
      assertProblem(res, 404, "route-not-found");
      assert.equal(res.headers.allow, undefined, url);
    }
  });
});
