/**
 * What Node's HTTP layer refuses before any route runs, on real sockets (inject has none): a
 * malformed request and oversized headers are answered as problem documents with their own codes,
 * a request naming two Authorization headers is refused, and a chunk whose body stalls is cut off
 * once its time to arrive is up, so the blob it held is free again for the push that resumes it;
 * and a body refused for the length it declares is read and dropped (up to a bound), so that the
 * client reads the refusal instead of a reset and its connection serves on.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as net from "node:net";
import type { AddressInfo } from "node:net";
import * as path from "node:path";
import { OBSERVER_TOKEN, OPERATOR, OPERATOR_TOKEN, compileTestBundle, contentOf, json, logSink, openTestNode, type TestNode } from "../support/app-node.js";
import { READY_MS, waitFor } from "../support/wait.js";
import { DRAIN_MAX_BYTES } from "../../src/server/http-framing.js";
import { tempDir } from "../support/temp.js";

interface RawAnswer {
  readonly status: number;
  readonly headers: string;
  readonly body: string;
  /** ms from the first byte sent to the answer's end (the node closed the socket) */
  readonly ms: number;
}

/** Sends `head` (and `body`) on a new socket and reads until the node closes it. */
function raw(port: number, head: string, body: Buffer = Buffer.alloc(0), ms = READY_MS): Promise<RawAnswer> {
  return new Promise((resolve, reject) => {
    const started = performance.now();
    const socket = net.connect(port, "127.0.0.1");
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`no answer within ${ms / 1000} s`));
    }, ms);
    let text = "";
    socket.setEncoding("latin1");
    socket.on("data", (s: string) => (text += s));
    socket.on("error", () => undefined);
    socket.on("close", () => {
      clearTimeout(timer);
      const [headers = "", rest = ""] = text.split("\r\n\r\n", 2);
      resolve({ status: Number(/^HTTP\/1\.1 (\d{3})/.exec(headers)?.[1] ?? 0), headers, body: rest, ms: performance.now() - started });
    });
    socket.write(head);
    if (body.byteLength > 0) socket.write(body);
  });
}

describe("HTTP framing", () => {
  let node: TestNode;
  let port: number;
  before(async () => {
    // Requests must arrive within 1 s here (300 s in a real node).
    node = await openTestNode(tempDir("server-http-framing"), { server: { requestArrivalMs: 1000 } });
    await node.app.listen({ host: "127.0.0.1", port: 0 });
    port = (node.app.server.address() as AddressInfo).port;
  });
  after(async () => {
    await node.close();
    fs.rmSync(node.root, { recursive: true, force: true });
  });

  async function stillServing(): Promise<void> {
    const health = await raw(port, "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    assert.equal(health.status, 200);
  }

  function assertProblem(answer: RawAnswer, status: number, code: string): void {
    assert.equal(answer.status, status, answer.headers + answer.body);
    assert.match(answer.headers, /content-type: application\/problem\+json/i);
    assert.equal(json(answer.body).code, code);
  }

  it("answers a malformed request and oversized headers with problem documents, and goes on serving", async () => {
    const bad = await raw(port, "GET /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n");
    assertProblem(bad, 400, "request-malformed");
    const big = await raw(port, `GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: ${"a".repeat(20 * 1024)}\r\n\r\n`);
    assertProblem(big, 431, "headers-too-large");
    await stillServing();
  });

  it("refuses a request with two Authorization headers, whichever comes first", async () => {
    for (const [first, second] of [
      [OPERATOR_TOKEN, "wrong"],
      ["wrong", OPERATOR_TOKEN],
    ]) {
      const answer = await raw(port, `GET /v1/bundles HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${first}\r\nAuthorization: Bearer ${second}\r\nConnection: close\r\n\r\n`);
      assertProblem(answer, 401, "unauthorized");
      assert.match(json(answer.body).detail as string, /exactly one Authorization/);
    }
  });

  it("invites a chunk's body (100 Continue) only when its token lets it through; others hear their refusal first", async () => {
    const bundle = await compileTestBundle(node.root, "expect", "r1");
    const begun = json((await node.app.inject({ method: "POST", url: "/v1/stages", headers: OPERATOR, payload: bundle.manifest })).payload);
    const blob = (begun.missing as { digest: string; byte_len: number }[])[0]!;
    const bytes = contentOf(bundle, blob.digest);
    const head = (token: string): string =>
      `PATCH /v1/stages/${begun.stage_id as string}/blobs/${blob.digest} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${token}\r\n` +
      `Content-Type: application/octet-stream\r\nUpload-Offset: 0\r\nContent-Length: ${bytes.byteLength}\r\nExpect: 100-continue\r\nConnection: close\r\n\r\n`;
    // No body is sent: the refusal must come without it, and without an invitation.
    for (const [token, status] of [["wrong-token-0123456789", 401], [OBSERVER_TOKEN, 403]] as const) {
      const refused = await raw(port, head(token), Buffer.alloc(0), 3000);
      assert.equal(refused.status, status, refused.headers);
      assert.doesNotMatch(refused.headers, /100 Continue/);
    }
    // The operator is invited, then sends the body.
    const answer = await new Promise<string>((resolve, reject) => {
      const socket = net.connect(port, "127.0.0.1");
      let text = "";
      let sent = false;
      const timer = setTimeout(() => {
        socket.destroy();
        reject(new Error(`no invitation: ${text}`));
      }, 3000);
      socket.setEncoding("latin1");
      socket.on("data", (chunk: string) => {
        text += chunk;
        if (!sent && text.startsWith("HTTP/1.1 100 Continue\r\n\r\n")) {
          sent = true;
          socket.write(bytes);
        }
      });
      socket.on("error", reject);
      socket.on("close", () => {
        clearTimeout(timer);
        resolve(text);
      });
      socket.write(head(OPERATOR_TOKEN));
    });
    assert.match(answer, /^HTTP\/1\.1 100 Continue\r\n\r\nHTTP\/1\.1 204 /);
    await stillServing();
  });

  it("cuts off a chunk whose body stalls, freeing its blob for the resumed push", async () => {
    const bundle = await compileTestBundle(node.root, "stalled", "r1");
    const begun = json((await node.app.inject({ method: "POST", url: "/v1/stages", headers: OPERATOR, payload: bundle.manifest })).payload);
    const stageId = begun.stage_id as string;
    const blob = (begun.missing as { digest: string; byte_len: number }[]).sort((a, b) => b.byte_len - a.byte_len)[0]!;
    const bytes = contentOf(bundle, blob.digest);
    const path = `/v1/stages/${stageId}/blobs/${blob.digest}`;
    // Two bytes of the declared length, then silence.
    const stalled = raw(
      port,
      `PATCH ${path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${OPERATOR_TOKEN}\r\nContent-Type: application/octet-stream\r\n` +
        `Upload-Offset: 0\r\nContent-Length: ${bytes.byteLength}\r\n\r\n`,
      bytes.subarray(0, 2),
    );
    const cut = await stalled;
    assert.ok(cut.ms < 5000, `the stalled chunk was cut off after ${Math.round(cut.ms)} ms`);
    // The resumed push gets the blob at once (it waited behind the stalled chunk for good before).
    const resumed = await node.app.inject({
      method: "PATCH",
      url: path,
      headers: { ...OPERATOR, "content-type": "application/octet-stream", "upload-offset": "0" },
      payload: bytes,
    });
    assert.equal(resumed.statusCode, 204, resumed.payload);
    assert.equal(resumed.headers["upload-offset"], String(bytes.byteLength));
    await stillServing();
  });

  /**
   * One connection: a request's head and the first `sent` bytes of a body declared `declared`
   * bytes long; the answer read whole; then, unless the node closed the connection, the rest of
   * the body and a second request on the same connection, whose answer is read too.
   */
  async function refusedThenNext(head: string, declared: number, sent: number): Promise<{ first: RawAnswer; closedAfterFirst: boolean; second?: RawAnswer }> {
    const socket = net.connect(port, "127.0.0.1");
    socket.setEncoding("latin1");
    let text = "";
    let closed = false;
    let failure: Error | undefined;
    socket.on("data", (s: string) => (text += s));
    socket.on("error", (error) => (failure = error));
    socket.on("close", () => (closed = true));
    /** The first whole answer in `text` from `from` on (by its Content-Length), once it is there. */
    const answerFrom = (from: number): Promise<{ answer: RawAnswer; end: number }> =>
      waitFor(`an answer on the connection from byte ${from}`, () => {
        const rest = text.slice(from);
        const split = rest.indexOf("\r\n\r\n");
        const length = /content-length: (\d+)/i.exec(rest.slice(0, split))?.[1];
        if (split < 0 || length === undefined || rest.length < split + 4 + Number(length)) {
          if (closed || failure !== undefined) throw new Error(`the connection ended before an answer: ${failure?.message ?? "closed"}; got ${JSON.stringify(rest)}`);
          return undefined;
        }
        const headers = rest.slice(0, split);
        const body = rest.slice(split + 4, split + 4 + Number(length));
        return { answer: { status: Number(/^HTTP\/1\.1 (\d{3})/.exec(headers)?.[1] ?? 0), headers, body, ms: 0 }, end: from + split + 4 + Number(length) };
      });
    try {
      socket.write(head + `Content-Length: ${declared}\r\n\r\n`);
      socket.write(Buffer.alloc(sent, 0x20));
      const { answer: first, end } = await answerFrom(0);
      // Whatever the node does with the connection, it has done once the answer is written: a
      // node that closes it has its FIN on the way with the answer's last byte.
      await new Promise((r) => setImmediate(r));
      if (/^connection: close/im.test(first.headers)) {
        await waitFor("the node closing the connection it said it would close", () => (closed ? true : undefined));
        return { first, closedAfterFirst: true };
      }
      await new Promise<void>((resolve, reject) => socket.write(Buffer.alloc(declared - sent, 0x20), (error) => (error ? reject(error) : resolve())));
      socket.write("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n");
      const { answer: second } = await answerFrom(end);
      return { first, closedAfterFirst: false, second };
    } finally {
      socket.destroy();
    }
  }

  it("reads and drops the rest of a body refused unread for its declared length, so the client reads the refusal and its connection serves on", async () => {
    const MiB = 1024 * 1024;
    const head = `POST /v1/stages HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${OPERATOR_TOKEN}\r\nContent-Type: application/json\r\n`;
    // Refused by the length its head declares (over the 2 MiB JSON limit), with 64 KiB of it sent.
    const drained = await refusedThenNext(head, 3 * MiB, 64 * 1024);
    assertProblem(drained.first, 413, "body-too-large");
    assert.equal(drained.closedAfterFirst, false, `the node closed the connection after its refusal: ${drained.first.headers}`);
    assert.equal(drained.second?.status, 200, "the same connection's next request was answered");
    // A declared length past what the node reads to drop is still cut off after the refusal.
    const cut = await refusedThenNext(head, DRAIN_MAX_BYTES + 1, 64 * 1024);
    assertProblem(cut.first, 413, "body-too-large");
    assert.equal(cut.closedAfterFirst, true);
    await stillServing();
  });
});

describe("a client that goes away mid-chunk", () => {
  it("is logged as such, not as a failure of the node, and nothing of its chunk is kept", async () => {
    const log = logSink();
    const sink = log.stream;
    const node = await openTestNode(tempDir("server-client-gone"), { settings: { logLevel: "info" }, server: { logStream: sink } });
    try {
      await node.app.listen({ host: "127.0.0.1", port: 0 });
      const port = (node.app.server.address() as AddressInfo).port;
      const bundle = await compileTestBundle(node.root, "gone", "r1");
      const begun = json((await node.app.inject({ method: "POST", url: "/v1/stages", headers: OPERATOR, payload: bundle.manifest })).payload);
      const stageId = begun.stage_id as string;
      const blob = (begun.missing as { digest: string; byte_len: number }[]).sort((a, b) => b.byte_len - a.byte_len)[0]!;
      const socket = net.connect(port, "127.0.0.1");
      await new Promise<void>((resolve) => socket.once("connect", () => resolve()));
      socket.write(
        `PATCH /v1/stages/${stageId}/blobs/${blob.digest} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${OPERATOR_TOKEN}\r\n` +
          `Content-Type: application/octet-stream\r\nUpload-Offset: 0\r\nContent-Length: ${blob.byte_len}\r\n\r\n`,
      );
      socket.write(contentOf(bundle, blob.digest).subarray(0, 3));
      // The client leaves mid-chunk only once the node is in it: its 3 bytes are in the blob's partial.
      const partialOf3 = (dir: string): boolean =>
        fs.existsSync(dir) && fs.readdirSync(dir, { withFileTypes: true }).some((e) => (e.isDirectory() ? partialOf3(path.join(dir, e.name)) : fs.statSync(path.join(dir, e.name)).size === 3));
      await waitFor("the chunk's first 3 bytes in the blob's partial", () => (partialOf3(path.join(node.home, "delivery", "stages")) ? true : undefined));
      socket.destroy();
      let status = json((await node.app.inject({ url: `/v1/stages/${stageId}`, headers: OPERATOR })).payload);
      for (let i = 0; i < 100 && !log.text().includes("client went away"); i++) {
        await new Promise((r) => setTimeout(r, 20));
        status = json((await node.app.inject({ url: `/v1/stages/${stageId}`, headers: OPERATOR })).payload);
      }
      const lines = log.text().split("\n").filter((l) => l !== "").map((l) => JSON.parse(l) as { level: number; msg: string; code?: string });
      const gone = lines.find((l) => l.msg === "client went away mid-request");
      assert.ok(gone !== undefined, `no line for the client that left among: ${log.text()}`);
      assert.equal(gone.level, 30);
      // Reported as what it is: the chunk's body was aborted, not a storage failure (503).
      assert.equal(gone.code, "chunk-body-aborted");
      assert.deepEqual(lines.filter((l) => l.level >= 40).map((l) => l.msg), [], "no warning or error was logged");
      assert.ok(!log.text().includes("delivery-storage-failed"), log.text());
      const metrics = (await node.app.inject({ url: "/metrics", headers: OPERATOR })).payload;
      assert.match(metrics, /^warden_http_requests_aborted_total\{route="\/v1\/stages\/:stage_id\/blobs\/:digest"\} 1$/m);
      assert.doesNotMatch(metrics, /^warden_http_requests_total\{[^}]*status="5\d\d"[^}]*\}/m, "no 5xx was counted");
      const offset = (status.missing as { digest: string; offset: number }[]).find((m) => m.digest === blob.digest)?.offset;
      assert.equal(offset, 0, "nothing of the cut chunk was kept");
    } finally {
      await node.close();
      fs.rmSync(node.root, { recursive: true, force: true });
    }
  });
});
