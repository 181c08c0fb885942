/**
 * A chunk refused part-way (overflow here; a full disk or a failing store the same way) must not
 * leave the rest of its body on a kept-alive connection: a client sends its next request behind
 * those bytes, and the node would never read it. Real sockets on loopback (inject has none): the
 * refusal answers at once, and the client's next request on the same connection is answered too.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as http from "node:http";
import type { AddressInfo } from "node:net";
import { OPERATOR, compileTestBundle, json, openTestNode, type TestNode } from "../support/app-node.js";
import { READY_MS } from "../support/wait.js";
import { tempDir } from "../support/temp.js";

const MiB = 1024 * 1024;

interface Answer {
  readonly status: number;
  readonly headers: http.IncomingHttpHeaders;
  readonly body: string;
  readonly reusedSocket: boolean;
}

/** One request on `agent`; the body is written whole, or in pieces with no declared length. */
function call(agent: http.Agent, url: string, method: string, headers: Record<string, string>, body?: Buffer, pieces?: number): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const request = http.request(url, { method, agent, headers }, (response) => {
      let text = "";
      response.setEncoding("utf8").on("data", (s: string) => (text += s));
      response.on("end", () => resolve({ status: response.statusCode ?? 0, headers: response.headers, body: text, reusedSocket: request.reusedSocket }));
    });
    // Writes still under way when the node has answered and closed may fail: the answer counts.
    request.on("error", (error) => (request.reusedSocket ? reject(error) : undefined));
    if (body === undefined) request.end();
    else if (pieces === undefined) request.end(body);
    else {
      const size = Math.ceil(body.byteLength / pieces);
      for (let at = 0; at < body.byteLength; at += size) request.write(body.subarray(at, at + size));
      request.end();
    }
  });
}

function within<T>(ms: number, what: string, promise: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`${what}: no answer within ${ms / 1000} s`)), ms)));
  return Promise.race([promise, late]).finally(() => clearTimeout(timer));
}

describe("a chunk refused part-way leaves the connection usable", () => {
  let node: TestNode;
  let base: string;
  let stageId: string;
  let digest: string;
  let agent: http.Agent;
  before(async () => {
    node = await openTestNode(tempDir("server-refused-chunk"));
    const bundle = await compileTestBundle(node.root, "refused-chunk", "r1");
    const begun = json((await node.app.inject({ method: "POST", url: "/v1/stages", headers: OPERATOR, payload: bundle.manifest })).payload);
    stageId = begun.stage_id as string;
    const smallest = (begun.missing as { digest: string; byte_len: number }[]).sort((a, b) => a.byte_len - b.byte_len)[0]!;
    digest = smallest.digest;
    await node.app.listen({ host: "127.0.0.1", port: 0 });
    base = `http://127.0.0.1:${(node.app.server.address() as AddressInfo).port}`;
  });
  after(async () => {
    agent?.destroy();
    await node.close();
    fs.rmSync(node.root, { recursive: true, force: true });
  });

  // 2 MiB: more than loopback's socket buffers hold, so an unread rest blocks the connection.
  const overflowing = Buffer.alloc(2 * MiB, 0x61);
  const chunkUrl = (): string => `${base}/v1/stages/${stageId}/blobs/${digest}`;
  const chunkHeaders = { ...OPERATOR, "content-type": "application/octet-stream", "upload-offset": "0" };

  it("with a declared length: the rest is read and dropped, and the next request rides the same connection", async () => {
    agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    const refused = await within(READY_MS, "the refusal", call(agent, chunkUrl(), "PATCH", { ...chunkHeaders, "content-length": String(overflowing.byteLength) }, overflowing));
    assert.equal(refused.status, 413, refused.body);
    assert.equal(json(refused.body).code, "chunk-overflow");
    assert.notEqual(refused.headers.connection, "close");
    const status = await within(READY_MS, "the next request on that connection", call(agent, `${base}/v1/stages/${stageId}`, "GET", OPERATOR));
    assert.equal(status.status, 200, status.body);
    assert.equal(status.reusedSocket, true, "the kept-alive connection carried the next request");
    const missing = (json(status.body).missing as { digest: string; offset: number }[]).find((m) => m.digest === digest);
    assert.equal(missing?.offset, 0, "nothing of the refused chunk was kept");
  });

  it("with no declared length: the node answers and closes the connection, and the client's next request gets a new one", async () => {
    agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    const refused = await within(READY_MS, "the refusal", call(agent, chunkUrl(), "PATCH", { ...chunkHeaders, "transfer-encoding": "chunked" }, overflowing, 32));
    assert.equal(refused.status, 413, refused.body);
    assert.equal(json(refused.body).code, "chunk-overflow");
    assert.equal(refused.headers.connection, "close");
    const health = await within(READY_MS, "the next request", call(agent, `${base}/healthz`, "GET", {}));
    assert.equal(health.status, 200);
  });
});
