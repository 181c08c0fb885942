/**
 * Authentication (G12): bearer tokens with operator/observer roles, 401/403 problems, public
 * /healthz and /openapi.json, tokens never in logs, and where tokens come from (env, tokens file,
 * the generated `<home>/token`).
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as path from "node:path";
import { hashToken, loadTokens } from "../../src/config/tokens.js";
import { TokenAuthority } from "../../src/server/auth.js";
import { createServer } from "../../src/server/app.js";
import { OBSERVER, OBSERVER_TOKEN, OPERATOR, OPERATOR_TOKEN, json, logSink, useTestNode } from "../support/app-node.js";
import { tempDir } from "../support/temp.js";

describe("auth over HTTP", () => {
  const node = useTestNode("server-auth");

  for (const [what, headers] of [
    ["no Authorization header", {}],
    ["an unknown token", { authorization: "Bearer not-a-known-token" }],
    ["another scheme", { authorization: `Basic ${OPERATOR_TOKEN}` }],
    ["an empty bearer", { authorization: "Bearer " }],
  ] as const) {
    it(`401 with ${what}`, async () => {
      for (const req of [
        { method: "GET" as const, url: "/v1/bundles" },
        { method: "GET" as const, url: "/readyz" },
        { method: "GET" as const, url: "/metrics" },
        { method: "POST" as const, url: "/v1/stages", payload: {} },
      ]) {
        const res = await node.app.inject({ ...req, headers });
        assert.equal(res.statusCode, 401, `${req.method} ${req.url}`);
        assert.equal(json(res.payload).code, "unauthorized");
        assert.match(String(res.headers["www-authenticate"]), /^Bearer/);
      }
    });
  }

  it("observers read but never change anything (403 forbidden)", async () => {
    assert.equal((await node.app.inject({ url: "/v1/bundles", headers: OBSERVER })).statusCode, 200);
    assert.equal((await node.app.inject({ url: "/v1/keys", headers: OBSERVER })).statusCode, 200);
    for (const req of [
      { method: "POST" as const, url: "/v1/stages", payload: {} },
      { method: "PATCH" as const, url: `/v1/stages/${"0".repeat(32)}/blobs/sha256:${"0".repeat(64)}` },
      { method: "DELETE" as const, url: `/v1/stages/${"0".repeat(32)}` },
      { method: "POST" as const, url: "/v1/invocations", payload: { provider: "claude", prompt: "x" } },
    ]) {
      const res = await node.app.inject({ ...req, headers: OBSERVER });
      assert.equal(res.statusCode, 403, `${req.method} ${req.url}`);
      assert.equal(json(res.payload).code, "forbidden");
    }
  });

  it("/healthz and /openapi.json need no token; the OpenAPI document covers every route", async () => {
    const health = await node.app.inject({ url: "/healthz" });
    assert.equal(health.statusCode, 200);
    assert.deepEqual(json(health.payload), { status: "ok" });
    const doc = json((await node.app.inject({ url: "/openapi.json" })).payload) as {
      openapi: string;
      paths: Record<string, Record<string, { parameters?: { name: string; in: string; required?: boolean }[]; requestBody?: unknown }>>;
    };
    assert.equal(doc.openapi, "3.1.0");
    for (const route of ["/v1/stages", "/v1/stages/{stage_id}/blobs/{digest}", "/v1/invocations", "/v1/invocations/{scope}/{id}/reconciliation", "/v1/runs/{run_id}/events", "/v1/keys"]) {
      assert.ok(doc.paths[route] !== undefined, route);
    }
    const invoke = doc.paths["/v1/invocations"]!.post!;
    assert.ok(invoke.parameters?.some((p) => p.in === "header" && p.name === "idempotency-key" && p.required === true));
    assert.ok(invoke.requestBody !== undefined);
  });

  it("never logs a token, even at trace level", async () => {
    const log = logSink();
    const sink = log.stream;
    const app = await createServer(
      node.warden,
      { tokens: [{ name: "alice", role: "operator", hash: hashToken(OPERATOR_TOKEN) }], maxWaitS: 1, jsonBodyBytes: 1024, logLevel: "trace" },
      { logStream: sink },
    );
    await app.inject({ url: "/v1/bundles", headers: OPERATOR });
    await app.inject({ url: "/v1/bundles", headers: OBSERVER });
    await app.inject({ method: "POST", url: "/v1/stages", headers: { ...OPERATOR, "content-type": "application/json" }, payload: "{" });
    // Whatever a log line is later made to carry, an Authorization value is censored.
    const bearer = `Bearer ${OPERATOR_TOKEN}`;
    app.log.info({ req: { method: "GET", url: "/v1/bundles", headers: { authorization: bearer } } }, "request with headers");
    app.log.info({ headers: { authorization: bearer } }, "headers");
    app.log.info({ authorization: bearer }, "header value");
    await app.close();
    assert.ok(log.text().includes("reqId"), "requests were logged with their ids");
    const line = (msg: string): string => log.text().split("\n").find((l) => l.includes(`"msg":"${msg}"`)) ?? assert.fail(`no log line ${msg}`);
    // Every assert.ok has a message: without one, a failure rebuilds it from the source, slowly.
    assert.ok(line("headers").includes('"authorization":"[redacted]"'), "headers.authorization is censored");
    assert.ok(line("header value").includes('"authorization":"[redacted]"'), "authorization is censored");
    assert.ok(!line("request with headers").includes(OPERATOR_TOKEN), "req.headers.authorization is not logged");
    assert.ok(!log.text().includes(OPERATOR_TOKEN), "the operator token is never logged");
    assert.ok(!log.text().includes(OBSERVER_TOKEN), "the observer token is never logged");
  });
});

describe("token sources", () => {
  let root: string;
  before(() => {
    root = tempDir("server-tokens");
  });
  after(() => fs.rmSync(root, { recursive: true, force: true }));

  it("generates <home>/token once (0600) when nothing is configured, and reuses it", () => {
    const home = path.join(root, "fresh");
    fs.mkdirSync(home, { mode: 0o700 });
    const first = loadTokens({ home });
    assert.equal(first.generated, path.join(home, "token"));
    const st = fs.statSync(path.join(home, "token"));
    assert.equal(st.mode & 0o777, 0o600);
    const token = fs.readFileSync(path.join(home, "token"), "utf8").trim();
    assert.ok(token.length >= 40);
    const authority = new TokenAuthority(first.tokens);
    assert.deepEqual(authority.authenticate(`Bearer ${token}`), { name: "operator", role: "operator" });
    const second = loadTokens({ home });
    assert.equal(second.generated, undefined);
    assert.equal(fs.readFileSync(path.join(home, "token"), "utf8").trim(), token);
    assert.deepEqual(new TokenAuthority(second.tokens).authenticate(`Bearer ${token}`).role, "operator");
  });

  it("an empty <home>/token (a first start that met a full disk) does not refuse the next start: it is replaced", () => {
    const home = path.join(root, "empty-token");
    fs.mkdirSync(home, { mode: 0o700 });
    fs.writeFileSync(path.join(home, "token"), "", { mode: 0o600 });
    const loaded = loadTokens({ home });
    assert.equal(loaded.generated, path.join(home, "token"));
    const token = fs.readFileSync(path.join(home, "token"), "utf8").trim();
    assert.ok(token.length >= 40);
    assert.deepEqual(new TokenAuthority(loaded.tokens).authenticate(`Bearer ${token}`), { name: "operator", role: "operator" });
    assert.deepEqual(fs.readdirSync(home), ["token"], "no temp file is left beside it");
  });

  it("uses env tokens and a tokens file of hashes, and generates nothing then", () => {
    const home = path.join(root, "configured");
    fs.mkdirSync(home, { mode: 0o700 });
    const fileToken = "ci-bot-token-abcdefghijklmnop";
    fs.writeFileSync(
      path.join(home, "tokens.json"),
      JSON.stringify({ tokens: [{ name: "ci-bot", role: "observer", sha256: `sha256:${hashToken(fileToken).toString("hex")}` }] }),
      { mode: 0o600 },
    );
    const loaded = loadTokens({ home, operatorToken: "env-op", observerToken: "env-obs", operatorName: "ops" });
    assert.equal(loaded.generated, undefined);
    assert.ok(!fs.existsSync(path.join(home, "token")));
    const authority = new TokenAuthority(loaded.tokens);
    assert.deepEqual(authority.authenticate("Bearer env-op"), { name: "ops", role: "operator" });
    assert.deepEqual(authority.authenticate("bearer env-obs"), { name: "observer", role: "observer" });
    assert.deepEqual(authority.authenticate(`Bearer ${fileToken}`), { name: "ci-bot", role: "observer" });
    assert.throws(() => authority.authenticate("Bearer env-op2"), { code: "unauthorized" });
    assert.throws(() => authority.authorize({ name: "ci-bot", role: "observer" }, "POST"), { code: "forbidden" });
  });

  it("refuses a tokens file with loose permissions or unknown fields", () => {
    const loose = path.join(root, "loose");
    fs.mkdirSync(loose, { mode: 0o700 });
    fs.writeFileSync(path.join(loose, "tokens.json"), JSON.stringify({ tokens: [] }), { mode: 0o644 });
    fs.chmodSync(path.join(loose, "tokens.json"), 0o644);
    assert.throws(() => loadTokens({ home: loose }), { name: "UnsafeStorageError" });
    const extra = path.join(root, "extra");
    fs.mkdirSync(extra, { mode: 0o700 });
    fs.writeFileSync(path.join(extra, "tokens.json"), JSON.stringify({ tokens: [{ name: "x", role: "operator", sha256: "0".repeat(64), token: "plain" }] }), { mode: 0o600 });
    assert.throws(() => loadTokens({ home: extra }), { code: "config-tokens-invalid" });
    // A reviewer reading from the top sees an observer; JSON.parse would grant an operator.
    const twice = path.join(root, "twice");
    fs.mkdirSync(twice, { mode: 0o700 });
    fs.writeFileSync(path.join(twice, "tokens.json"), `{"tokens": [{"name": "x", "role": "observer", "sha256": "${"0".repeat(64)}", "role": "operator"}]}`, { mode: 0o600 });
    assert.throws(() => loadTokens({ home: twice }), { code: "config-tokens-invalid", message: /the name "role" appears twice/ });
  });
});
