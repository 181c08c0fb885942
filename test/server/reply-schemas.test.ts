/**
 * Every reply of a test node is held against the response schema its route declares for its
 * status (test/support/app-node.ts turns the check on): a reply that does not match fails its
 * request (500) with an error naming the route, the status and the mismatch, instead of reaching
 * a client that reads /openapi.json. Off, replies are written as they are (JSON.stringify).
 */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { Type } from "typebox";
import { hashToken } from "../../src/config/tokens.js";
import { createServer } from "../../src/server/app.js";
import { OPERATOR, OPERATOR_TOKEN, json, logSink, useTestNode } from "../support/app-node.js";

const Reply = Type.Object({ name: Type.String(), count: Type.Integer({ minimum: 0 }) }, { additionalProperties: false });

describe("replies checked against their response schemas", () => {
  const node = useTestNode("server-reply-schemas");

  async function appWith(checkReplies: boolean, reply: unknown) {
    const log = logSink();
    const app = await createServer(
      node.warden,
      { tokens: [{ name: "alice", role: "operator", hash: hashToken(OPERATOR_TOKEN) }], maxWaitS: 1, jsonBodyBytes: 1024, logLevel: "error" },
      { logStream: log.stream, checkReplies },
    );
    app.get("/v1/test-reply", { schema: { response: { 200: Reply } } }, async () => reply as { name: string; count: number });
    await app.ready();
    return { app, log };
  }

  it("fails a reply that does not match, naming the route, the status and the field", async () => {
    const { app, log } = await appWith(true, { name: "x", count: "three" });
    try {
      const res = await app.inject({ url: "/v1/test-reply", headers: OPERATOR });
      assert.equal(res.statusCode, 500, res.payload);
      assert.match(log.text(), /GET \/v1\/test-reply: the 200 reply does not match its declared schema \(\/count: [^)]*\)/);
    } finally {
      await app.close();
    }
  });

  it("fails a reply with a field its schema does not declare", async () => {
    const { app } = await appWith(true, { name: "x", count: 3, extra: true });
    try {
      assert.equal((await app.inject({ url: "/v1/test-reply", headers: OPERATOR })).statusCode, 500);
    } finally {
      await app.close();
    }
  });

  it("sends a matching reply as it is", async () => {
    const { app } = await appWith(true, { name: "x", count: 3 });
    try {
      const res = await app.inject({ url: "/v1/test-reply", headers: OPERATOR });
      assert.equal(res.statusCode, 200, res.payload);
      assert.deepEqual(json(res.payload), { name: "x", count: 3 });
    } finally {
      await app.close();
    }
  });

  it("unchecked (a node in production), writes the reply whole, a field the schema does not name included", async () => {
    const { app } = await appWith(false, { name: "x", count: 3, extra: true });
    try {
      const res = await app.inject({ url: "/v1/test-reply", headers: OPERATOR });
      assert.equal(res.statusCode, 200, res.payload);
      assert.deepEqual(json(res.payload), { name: "x", count: 3, extra: true });
    } finally {
      await app.close();
    }
  });
});
