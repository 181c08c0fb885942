/**
 * What an attacker found in the HTTP layer (issue 27, "Found under attack"): each answer is a
 * refusal with a code, the node keeps serving, and no principal can take what another holds.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as http from "node:http";
import * as path from "node:path";
import { randomUUID } from "node:crypto";
import type { AddressInfo } from "node:net";
import { CONSOLE_CSP } from "../../src/server/console/routes.js";
import { OBSERVER, OBSERVER_TOKEN, OPERATOR, OPERATOR_TOKEN, compileTestBundle, json, logSink, openTestNode, pushThroughApp, type TestNode } from "../support/app-node.js";
import { tempDir } from "../support/temp.js";

const SECURITY_HEADERS = {
  "content-security-policy": CONSOLE_CSP,
  "x-content-type-options": "nosniff",
  "x-frame-options": "DENY",
  "referrer-policy": "no-referrer",
  "cross-origin-opener-policy": "same-origin",
};

describe("found under attack", () => {
  let root: string;
  let node: TestNode;
  const log = logSink();

  before(async () => {
    root = tempDir("server-attack");
    const dir = path.join(root, "console");
    fs.mkdirSync(path.join(dir, "assets"), { recursive: true });
    fs.writeFileSync(path.join(dir, "index.html"), "<!doctype html><title>console</title>");
    fs.writeFileSync(path.join(dir, "assets", "console-ABCDEFGH.js"), "console.log(1)");
    node = await openTestNode(path.join(root, "node"), {
      settings: { logLevel: "info" },
      server: { consoleDir: dir, logStream: log.stream },
      warden: { limits: { eventStreams: 8 } },
    });
  });
  after(async () => {
    await node.close();
    fs.rmSync(root, { recursive: true, force: true });
  });

  it("a tile path over 64 characters is a 400 with a code, and no error in the log", async () => {
    for (const url of [`/v1/log/tile/${"0".repeat(65)}`, `/v1/log/tile/0/${"x001/".repeat(13)}001`]) {
      const res = await node.app.inject({ url, headers: OPERATOR });
      assert.equal(res.statusCode, 400, res.payload);
      assert.equal(json(res.payload).code, "url-invalid");
    }
    const errors = log.text().split("\n").filter((line) => /"level":50/.test(line));
    assert.deepEqual(errors, []);
  });

  it("a path segment over 255 bytes is refused when the manifest is checked; one of 255 materializes", async () => {
    const longest = `${"\u00e9".repeat(126)}abc`; // 255 UTF-8 bytes
    assert.equal(Buffer.byteLength(longest), 255);
    const bundle = await compileTestBundle(root, "long-names", "r1", { [`notes/${longest}`]: "kept\n" });
    await pushThroughApp(node.app, bundle);
    const made = await node.app.inject({ method: "POST", url: "/v1/bundles/long-names/r1/materializations", headers: OPERATOR, payload: { provider: "claude" } });
    assert.equal(made.statusCode, 201, made.payload);
    assert.equal(fs.readFileSync(path.join(json(made.payload).root as string, "bundle", "notes", longest), "utf8"), "kept\n");

    const tooLong = `${longest}d`;
    const manifest = { ...bundle.manifest, revision: "r2", components: bundle.manifest.components.map((c) => (c.relative_path === `notes/${longest}` ? { ...c, relative_path: `notes/${tooLong}` } : c)) };
    const refused = await node.app.inject({ method: "POST", url: "/v1/stages", headers: OPERATOR, payload: manifest });
    assert.equal(refused.statusCode, 400, refused.payload);
    assert.equal(json(refused.payload).code, "manifest-path-segment-too-long");
  });

  it("every kind of answer under /ui/ carries the console's security headers, errors included", async () => {
    const session = await node.app.inject({ method: "POST", url: "/ui/session", payload: { token: OPERATOR_TOKEN } });
    const answers = {
      page: await node.app.inject({ url: "/ui/invocations" }),
      asset: await node.app.inject({ url: "/ui/assets/console-ABCDEFGH.js" }),
      "unknown asset": await node.app.inject({ url: "/ui/assets/nothing.js" }),
      redirect: await node.app.inject({ url: "/ui" }),
      "session opened": session,
      "session read": await node.app.inject({ url: "/ui/session", headers: { cookie: String(session.headers["set-cookie"]).split(";")[0]! } }),
      "no session": await node.app.inject({ url: "/ui/session" }),
      "bad session body": await node.app.inject({ method: "POST", url: "/ui/session", payload: { nothing: 1 } }),
      "bad token": await node.app.inject({ method: "POST", url: "/ui/session", payload: { token: "wrong-token-0123456789012345" } }),
      "malformed JSON": await node.app.inject({ method: "POST", url: "/ui/session", headers: { "content-type": "application/json" }, payload: "{" }),
      "foreign origin": await node.app.inject({ method: "POST", url: "/ui/session", headers: { origin: "http://evil.example" }, payload: { token: OPERATOR_TOKEN } }),
      "method not allowed": await node.app.inject({ method: "PUT", url: "/ui/session", payload: {} }),
      "session closed": await node.app.inject({ method: "DELETE", url: "/ui/session" }),
    };
    for (const [kind, res] of Object.entries(answers)) {
      for (const [name, value] of Object.entries(SECURITY_HEADERS)) assert.equal(res.headers[name], value, `${kind} (${res.statusCode}): ${name}`);
    }
    assert.ok(Object.values(answers).some((r) => r.statusCode >= 400 && r.statusCode < 500) && Object.values(answers).some((r) => r.statusCode < 300));
  });

  it("the console's Origin check counts the scheme: https://<host> is refused on an http node", async () => {
    const from = (origin: string) => node.app.inject({ method: "POST", url: "/ui/session", headers: { host: "node.example:7420", origin }, payload: { token: OPERATOR_TOKEN } });
    for (const origin of ["https://node.example:7420", "ws://node.example:7420", "http://node.example:7421", "null"]) {
      const res = await from(origin);
      assert.equal(res.statusCode, 403, origin);
      assert.equal(json(res.payload).code, "origin-refused", origin);
    }
    assert.equal((await from("http://node.example:7420")).statusCode, 201);
  });

  it("an observer filling its own sessions forgets only its own: the operator's session lives on", async () => {
    const operator = await node.app.inject({ method: "POST", url: "/ui/session", payload: { token: OPERATOR_TOKEN } });
    assert.equal(operator.statusCode, 201);
    const cookie = String(operator.headers["set-cookie"]).split(";")[0]!;
    const first = await node.app.inject({ method: "POST", url: "/ui/session", payload: { token: OBSERVER_TOKEN } });
    const firstCookie = String(first.headers["set-cookie"]).split(";")[0]!;
    // Past the whole node's bound (1024), as the attack did.
    for (let i = 0; i < 1030; i++) {
      const res = await node.app.inject({ method: "POST", url: "/ui/session", payload: { token: OBSERVER_TOKEN } });
      assert.equal(res.statusCode, 201);
    }
    const still = await node.app.inject({ url: "/ui/session", headers: { cookie } });
    assert.equal(still.statusCode, 200, "the operator is still logged in");
    assert.equal(json(still.payload).role, "operator");
    assert.equal((await node.app.inject({ url: "/ui/session", headers: { cookie: firstCookie } })).statusCode, 401, `the observer's own oldest session went`);
  });

  it("an observer holding its share of event streams takes none of the operator's", async () => {
    await node.app.listen({ host: "127.0.0.1", port: 0 });
    const { port } = node.app.server.address() as AddressInfo;
    const started = await node.app.inject({ method: "POST", url: "/v1/invocations", headers: { ...OPERATOR, "idempotency-key": randomUUID() }, payload: { provider: "claude", prompt: "#hang", timeout_s: 60 } });
    assert.equal(started.statusCode, 202, started.payload);
    const runId = json(started.payload).run_id as string;
    const open: http.ClientRequest[] = [];
    const stream = (headers: Record<string, string>): Promise<{ status: number; body: string }> =>
      new Promise((resolve, reject) => {
        const req = http.get({ host: "127.0.0.1", port, path: `/v1/runs/${runId}/events`, headers }, (res) => {
          if (res.statusCode === 200) return resolve({ status: 200, body: "" });
          let body = "";
          res.on("data", (c: Buffer) => (body += c.toString("utf8")));
          res.on("end", () => resolve({ status: res.statusCode ?? 0, body }));
        });
        req.on("error", reject);
        open.push(req);
      });
    try {
      // The node serves 8; one principal may hold 6, leaving 2 to the others.
      for (let i = 0; i < 6; i++) assert.equal((await stream(OBSERVER)).status, 200, `observer stream ${i + 1}`);
      const refused = await stream(OBSERVER);
      assert.equal(refused.status, 429, refused.body);
      assert.equal(json(refused.body).code, "principal-event-streams-exhausted");
      assert.equal((await stream(OPERATOR)).status, 200, "the operator still gets a stream");
      assert.equal((await stream(OPERATOR)).status, 200);
    } finally {
      for (const req of open) req.destroy();
    }
  });
});
