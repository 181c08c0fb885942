/**
 * The client's wire layer against real HTTP peers: a small node:http server stands in for a proxy
 * in front of a node (answering 503s, HTML error pages, dropping connections), which the real node
 * never does on purpose. Also the server-sent-events reader on streams split at awkward places.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { WardenClient, WardenConnectionError, WardenHttpError } from "../../src/client/index.js";
import { readEvents } from "../../src/client/sse.js";

type Handler = (request: IncomingMessage, response: ServerResponse, n: number) => void;

describe("client transport", () => {
  let server: Server;
  let url: string;
  let handler: Handler = () => undefined;
  let requests = 0;
  const seen: { method: string; url: string; auth: string | undefined; body: Buffer }[] = [];

  before(async () => {
    server = createServer((request, response) => {
      const chunks: Buffer[] = [];
      request.on("data", (c: Buffer) => chunks.push(c));
      request.on("end", () => {
        seen.push({ method: request.method!, url: request.url!, auth: request.headers.authorization, body: Buffer.concat(chunks) });
        handler(request, response, requests++);
      });
    });
    await new Promise<void>((done) => server.listen(0, "127.0.0.1", done));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  after(() => new Promise<void>((done) => server.close(() => done())));

  function reset(next: Handler): void {
    handler = next;
    requests = 0;
    seen.length = 0;
  }

  it("retries a GET through 503s with backoff, sending the bearer token each time", async () => {
    reset((_req, res, n) => {
      if (n < 2) {
        res.writeHead(503, { "content-type": "application/problem+json" }).end(JSON.stringify({ code: "not-ready", status: 503, detail: "starting" }));
      } else res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ bundles: [] }));
    });
    const client = new WardenClient({ url, token: "t0k", retries: 3, backoffMs: 1 });
    assert.deepEqual(await client.listBundles(), []);
    assert.equal(seen.length, 3);
    assert.ok(seen.every((r) => r.auth === "Bearer t0k" && r.url === "/v1/bundles"));
    client.close();
  });

  it("gives up after `retries` and throws the last problem with its code and extensions", async () => {
    reset((_req, res) => res.writeHead(503, { "content-type": "application/problem+json" }).end(JSON.stringify({ code: "not-ready", status: 503, detail: "still starting", retry_in: 5 })));
    const client = new WardenClient({ url, token: "x", retries: 2, backoffMs: 1 });
    await assert.rejects(client.listBundles(), (e: unknown) => {
      assert.ok(e instanceof WardenHttpError);
      assert.equal(e.code, "not-ready");
      assert.equal(e.status, 503);
      assert.equal(e.message, "still starting");
      assert.equal(e.details.retry_in, 5);
      return true;
    });
    assert.equal(seen.length, 3);
    client.close();
  });

  it("does not retry a refusal, nor a request that must not be repeated", async () => {
    reset((_req, res) => res.writeHead(409, { "content-type": "application/problem+json" }).end(JSON.stringify({ code: "chunk-out-of-order", status: 409, detail: "x", expected_offset: 4096 })));
    const client = new WardenClient({ url, token: "x", retries: 5, backoffMs: 1 });
    await assert.rejects(client.uploadChunk("a".repeat(32), `sha256:${"0".repeat(64)}`, 0, new Uint8Array(8)), (e: unknown) => e instanceof WardenHttpError && e.expectedOffset === 4096);
    assert.equal(seen.length, 1);
    assert.equal(seen[0]!.method, "PATCH");
    assert.equal(seen[0]!.body.length, 8);
    reset((_req, res) => res.writeHead(503).end());
    await assert.rejects(client.materialize("b", "r", "claude"), (e: unknown) => e instanceof WardenHttpError && e.status === 503);
    assert.equal(seen.length, 1, "a materialization builds a new tree each time: never repeated blindly");
    client.close();
  });

  it("retries only the 503s that pass by themselves, never one a configuration causes", async () => {
    const problem503 = (code: string): Handler => (_req, res) =>
      res.writeHead(503, { "content-type": "application/problem+json" }).end(JSON.stringify({ code, status: 503, detail: code }));
    const client = new WardenClient({ url, token: "x", retries: 3, backoffMs: 1 });
    // A provider CLI that is not installed stays missing until an operator installs it.
    for (const code of ["provider-unavailable", "delivery-storage-failed", "storage-io"]) {
      reset(problem503(code));
      await assert.rejects(client.listBundles(), (e: unknown) => e instanceof WardenHttpError && e.code === code);
      assert.equal(seen.length, 1, `${code} is answered at once`);
    }
    for (const code of ["storage-unavailable", "storage-timeout", "storage-busy", "node-shutting-down"]) {
      reset(problem503(code));
      await assert.rejects(client.listBundles(), (e: unknown) => e instanceof WardenHttpError && e.code === code);
      assert.equal(seen.length, 4, `${code} is tried again`);
    }
    // A proxy's 503 (no problem of the node's) and a gateway's 502/504 may pass.
    for (const status of [502, 503, 504]) {
      reset((_req, res, n) => (n === 0 ? res.writeHead(status, { "content-type": "text/html" }).end("<html>busy</html>") : res.writeHead(200).end('{"bundles":[]}')));
      assert.deepEqual(await client.listBundles(), []);
      assert.equal(seen.length, 2, `a gateway's ${status} is tried again`);
    }
    client.close();
  });

  it("names the status when an error reply is not a problem document (a proxy's HTML page)", async () => {
    reset((_req, res) => res.writeHead(502, { "content-type": "text/html" }).end("<html>Bad Gateway</html>"));
    const client = new WardenClient({ url, token: "x", retries: 0 });
    await assert.rejects(client.listBundles(), (e: unknown) => e instanceof WardenHttpError && e.code === "http-502" && e.status === 502);
    client.close();
  });

  it("a dropped connection is node-unreachable (and transient)", async () => {
    reset((req) => req.socket.destroy());
    const client = new WardenClient({ url, token: "x", retries: 1, backoffMs: 1 });
    await assert.rejects(client.listBundles(), (e: unknown) => e instanceof WardenConnectionError && e.code === "node-unreachable");
    assert.equal(seen.length, 2, "retried once");
    client.close();
  });

  it("keeps one connection for a run of chunk uploads, even when a proxy gives their replies a body", async () => {
    const sockets = new Set<unknown>();
    reset((req, res) => {
      sockets.add(req.socket);
      const body = JSON.stringify({ note: "a proxy's own body on a success reply" });
      res.writeHead(200, { "upload-offset": "8", "content-type": "application/json", "content-length": String(Buffer.byteLength(body)) }).end(body);
    });
    const client = new WardenClient({ url, token: "x" });
    for (let i = 0; i < 8; i++) {
      assert.deepEqual(await client.uploadChunk("a".repeat(32), `sha256:${"0".repeat(64)}`, 0, new Uint8Array(8)), { nextOffset: 8 });
    }
    assert.equal(seen.length, 8);
    assert.equal(sockets.size, 1, "each upload's reply body is drained, so the kept-alive connection is reused");
    client.close();
  });

  it("sends a blob pack's frames as the DESIGN's layout says, its bytes unjoined through its own fetch and joined through a caller's", async () => {
    const heads: { length: string | undefined; chunked: string | undefined }[] = [];
    reset((req, res) => {
      heads.push({ length: req.headers["content-length"], chunked: req.headers["transfer-encoding"] });
      res.writeHead(204).end();
    });
    const frames = [
      { digest: `sha256:${"ab".repeat(32)}`, offset: 0, bytes: new Uint8Array(300_000).fill(7) },
      { digest: `sha256:${"01".repeat(32)}`, offset: 5, bytes: new Uint8Array(0) },
      { digest: `sha256:${"fe".repeat(32)}`, offset: 2 ** 40 + 3, bytes: Uint8Array.from([1, 2, 3]) },
    ];
    // The layout written out by hand (DESIGN.md "Blob packs"): digest ‖ offset u64 BE ‖ length u32 BE ‖ bytes.
    const expected = Buffer.concat(
      frames.flatMap((f) => {
        const head = Buffer.alloc(44);
        Buffer.from(f.digest.slice(7), "hex").copy(head, 0);
        head.writeBigUInt64BE(BigInt(f.offset), 32);
        head.writeUInt32BE(f.bytes.byteLength, 40);
        return [head, Buffer.from(f.bytes)];
      }),
    );
    const own = new WardenClient({ url, token: "x" });
    const callers = new WardenClient({ url, token: "x", fetch: globalThis.fetch });
    for (const client of [own, callers]) await client.uploadPack("a".repeat(32), frames);
    assert.equal(seen.length, 2);
    for (const [i, request] of seen.entries()) {
      assert.equal(request.url, `/v1/stages/${"a".repeat(32)}/blobs`);
      assert.ok(request.body.equals(expected), `request ${i}: the body is the frames back to back`);
      assert.equal(heads[i]!.length, String(expected.byteLength), `request ${i} declares its length`);
      assert.equal(heads[i]!.chunked, undefined);
    }
    assert.equal(frames[0]!.bytes.byteLength, 300_000, "the caller's bytes are left whole");
    own.close();
    callers.close();
  });

  it("sends a chunk over shared memory (a compile's contents) through its own fetch and through a caller's, which refuses such a body", async () => {
    reset((_req, res) => res.writeHead(204, { "upload-offset": "5" }).end());
    const slab = new SharedArrayBuffer(16);
    new Uint8Array(slab).fill(9);
    const chunk = Buffer.from(slab, 3, 5).fill(4);
    const own = new WardenClient({ url, token: "x" });
    const callers = new WardenClient({ url, token: "x", fetch: globalThis.fetch });
    for (const client of [own, callers]) {
      assert.deepEqual(await client.uploadChunk("a".repeat(32), `sha256:${"0".repeat(64)}`, 0, chunk), { nextOffset: 5 });
    }
    assert.deepEqual(
      seen.map((r) => [...r.body]),
      [
        [4, 4, 4, 4, 4],
        [4, 4, 4, 4, 4],
      ],
      "each request's body is the chunk's bytes, none of the memory around them",
    );
    own.close();
    callers.close();
  });

  it("reads server-sent events split at any byte, with CRLF, comments and multi-line data", async () => {
    const text = ': keep-alive\r\nid: 0\r\ndata: {"a":1}\r\n\r\nid: 1\ndata: line one\ndata: line two\n\n: hb\n\nevent: end\ndata: {"reason":"terminated"}\n\n';
    const bytes = new TextEncoder().encode(text);
    for (const step of [1, 3, 7, bytes.length]) {
      const stream = new ReadableStream<Uint8Array>({
        start(controller) {
          for (let i = 0; i < bytes.length; i += step) controller.enqueue(bytes.subarray(i, i + step));
          controller.close();
        },
      });
      const events = [];
      for await (const e of readEvents(new Response(stream), "/v1/runs/x/events")) events.push(e);
      assert.deepEqual(events, [
        { event: "message", id: "0", data: '{"a":1}' },
        { event: "message", id: "1", data: "line one\nline two" },
        { event: "end", id: "1", data: '{"reason":"terminated"}' },
      ], `split every ${step} bytes`);
    }
  });
});
