/**
 * The console's session rules at the HTTP layer (DESIGN.md "Operator console"): a login link is
 * single-use and expires; a session cookie is HttpOnly, SameSite=Strict and bound to its role; a
 * cookie's changing request needs the session's CSRF token and the node's own Origin; observers
 * stay read-only; the console's files carry a strict CSP; nothing of it weakens bearer auth (G12).
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as path from "node:path";
import { ConsoleSessions, LOGIN_MS, SESSION_MS } from "../../src/server/console/sessions.js";
import { OBSERVER, OBSERVER_TOKEN, OPERATOR, openTestNode, type TestNode } from "../support/app-node.js";
import { tempDir } from "../support/temp.js";

describe("console sessions (in memory, with a clock)", () => {
  it("spends a login link on first use, refuses it after LOGIN_MS, and ends a session after SESSION_MS", () => {
    let now = 1_000_000;
    const sessions = new ConsoleSessions(() => now);
    const caller = { name: "alice", role: "operator" as const };
    const link = sessions.createLogin(caller);
    assert.deepEqual(sessions.redeemLogin(link.secret), caller);
    assert.throws(() => sessions.redeemLogin(link.secret), { code: "login-link-invalid" });
    const late = sessions.createLogin(caller);
    now += LOGIN_MS;
    assert.throws(() => sessions.redeemLogin(late.secret), { code: "login-link-invalid" });
    const { id } = sessions.open(caller);
    assert.equal(sessions.find(id)?.caller.role, "operator");
    now += SESSION_MS;
    assert.equal(sessions.find(id), undefined);
  });
});

describe("console over HTTP", () => {
  let root: string;
  let node: TestNode;
  let built: TestNode;

  before(async () => {
    root = tempDir("console-http");
    // A built console of its own (a stand-in page and asset, as the build names them), so the test does not depend on `npm run build`.
    const dir = path.join(root, "console");
    fs.mkdirSync(path.join(dir, "assets"), { recursive: true });
    fs.writeFileSync(path.join(dir, "index.html"), "<!doctype html><title>console</title>");
    fs.writeFileSync(path.join(dir, "assets", "console-ABCDEFGH.js"), "console.log(1)");
    fs.writeFileSync(path.join(dir, "assets", "secret.txt"), "not served");
    node = await openTestNode(path.join(root, "a"), { server: { consoleDir: path.join(root, "missing") } });
    built = await openTestNode(path.join(root, "b"), { server: { consoleDir: dir } });
  });
  after(async () => {
    await node.close();
    await built.close();
    fs.rmSync(root, { recursive: true, force: true });
  });

  const login = async (app: TestNode["app"], headers: Record<string, string> = OPERATOR): Promise<{ cookie: string; csrf: string; setCookie: string }> => {
    const link = await app.inject({ method: "POST", url: "/v1/console/logins", headers });
    assert.equal(link.statusCode, 201, link.body);
    const secret = (link.json() as { path: string }).path.split("#")[1]!;
    const opened = await app.inject({ method: "POST", url: "/ui/session", payload: { login: secret } });
    assert.equal(opened.statusCode, 201, opened.body);
    const setCookie = String(opened.headers["set-cookie"]);
    return { cookie: setCookie.split(";")[0]!, csrf: (opened.json() as { csrf: string }).csrf, setCookie };
  };

  it("serves the console's page and hashed assets with a strict CSP; / redirects to /ui/; only built files are served", async () => {
    const root = await built.app.inject({ method: "GET", url: "/" });
    assert.equal(root.statusCode, 302);
    assert.equal(root.headers.location, "/ui/");
    const page = await built.app.inject({ method: "GET", url: "/ui/invocations?status=unresolved" });
    assert.equal(page.statusCode, 200);
    assert.match(String(page.headers["content-security-policy"]), /^default-src 'self'; script-src 'self';.*frame-ancestors 'none'$/);
    assert.equal(page.headers["cache-control"], "no-store");
    const asset = await built.app.inject({ method: "GET", url: "/ui/assets/console-ABCDEFGH.js", headers: { "accept-encoding": "gzip" } });
    assert.equal(asset.statusCode, 200);
    assert.equal(asset.headers["cache-control"], "public, max-age=31536000, immutable");
    assert.equal(asset.headers["content-encoding"], "gzip");
    const other = await built.app.inject({ method: "GET", url: "/ui/assets/secret.txt" });
    assert.equal(other.statusCode, 404);
    assert.equal(other.json().code, "console-asset-not-found");
    const unbuilt = await node.app.inject({ method: "GET", url: "/ui/" });
    assert.equal(unbuilt.statusCode, 404);
    assert.equal(unbuilt.json().code, "console-not-built");
  });

  it("exchanges a login link once for an HttpOnly SameSite=Strict cookie that reads the API with the token's role", async () => {
    const anonymous = await node.app.inject({ method: "POST", url: "/v1/console/logins" });
    assert.equal(anonymous.statusCode, 401);
    const link = await node.app.inject({ method: "POST", url: "/v1/console/logins", headers: OPERATOR });
    const body = link.json() as { path: string; expires_at: string };
    assert.match(body.path, /^\/ui\/login#[A-Za-z0-9_-]{43}$/);
    const secret = body.path.split("#")[1]!;
    const opened = await node.app.inject({ method: "POST", url: "/ui/session", payload: { login: secret } });
    assert.equal(opened.statusCode, 201);
    const setCookie = String(opened.headers["set-cookie"]);
    assert.match(setCookie, /^warden_session=[A-Za-z0-9_-]{43}; Path=\/; HttpOnly; SameSite=Strict; Max-Age=3600$/);
    assert.equal((opened.json() as { role: string }).role, "operator");
    const again = await node.app.inject({ method: "POST", url: "/ui/session", payload: { login: secret } });
    assert.equal(again.statusCode, 401);
    assert.equal(again.json().code, "login-link-invalid");
    const cookie = setCookie.split(";")[0]!;
    const read = await node.app.inject({ method: "GET", url: "/v1/node", headers: { cookie } });
    assert.equal(read.statusCode, 200);
    assert.equal((read.json() as { backend: string }).backend, "embedded");
    const forged = await node.app.inject({ method: "GET", url: "/v1/node", headers: { cookie: "warden_session=forged" } });
    assert.equal(forged.statusCode, 401);
    const badToken = await node.app.inject({ method: "POST", url: "/ui/session", payload: { token: "not-a-token" } });
    assert.equal(badToken.statusCode, 401);
    assert.equal(badToken.json().code, "unauthorized");
  });

  it("refuses a cookie's change without the session's CSRF token or from another Origin, and an observer's change whatever it sends", async () => {
    const { cookie, csrf } = await login(node.app);
    const url = "/v1/bundles/nothing/r1/retirement";
    const missing = await node.app.inject({ method: "POST", url, headers: { cookie } });
    assert.equal(missing.statusCode, 403);
    assert.equal(missing.json().code, "csrf-token-invalid");
    const wrong = await node.app.inject({ method: "POST", url, headers: { cookie, "x-warden-csrf": csrf.slice(1) + "x" } });
    assert.equal(wrong.json().code, "csrf-token-invalid");
    const foreign = await node.app.inject({ method: "POST", url, headers: { cookie, "x-warden-csrf": csrf, origin: "http://evil.example" } });
    assert.equal(foreign.statusCode, 403);
    assert.equal(foreign.json().code, "origin-refused");
    // With both, the request reaches the route (which answers: no such bundle).
    const passes = await node.app.inject({ method: "POST", url, headers: { cookie, "x-warden-csrf": csrf, origin: "http://localhost:80", host: "localhost:80" } });
    assert.equal(passes.statusCode, 404, passes.body);

    const observerSession = await node.app.inject({ method: "POST", url: "/ui/session", payload: { token: OBSERVER_TOKEN } });
    assert.equal((observerSession.json() as { role: string }).role, "observer");
    const observerCookie = String(observerSession.headers["set-cookie"]).split(";")[0]!;
    const observerCsrf = (observerSession.json() as { csrf: string }).csrf;
    const refused = await node.app.inject({ method: "POST", url, headers: { cookie: observerCookie, "x-warden-csrf": observerCsrf } });
    assert.equal(refused.statusCode, 403);
    assert.equal(refused.json().code, "forbidden");
    // An observer's bearer token cannot make login links (a POST), so it cannot mint an operator's session either.
    assert.equal((await node.app.inject({ method: "POST", url: "/v1/console/logins", headers: OBSERVER })).statusCode, 403);
  });

  it("ends a session on logout (with its CSRF token); the cookie no longer reads anything", async () => {
    const { cookie, csrf } = await login(node.app);
    const refused = await node.app.inject({ method: "DELETE", url: "/ui/session", headers: { cookie } });
    assert.equal(refused.statusCode, 403);
    const out = await node.app.inject({ method: "DELETE", url: "/ui/session", headers: { cookie, "x-warden-csrf": csrf } });
    assert.equal(out.statusCode, 204);
    assert.match(String(out.headers["set-cookie"]), /Max-Age=0/);
    assert.equal((await node.app.inject({ method: "GET", url: "/v1/node", headers: { cookie } })).statusCode, 401);
    assert.equal((await node.app.inject({ method: "GET", url: "/ui/session", headers: { cookie } })).statusCode, 401);
  });
});
