/**
 * The egress proxy on its own, over real sockets: what it lets through, in which form the
 * upstream sees it, and what it journals (DESIGN.md "Journal", network effects).
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as http from "node:http";
import * as net from "node:net";
import * as os from "node:os";
import * as path from "node:path";
import { EgressProxy, type EgressEvent } from "../../src/sandbox/egress.js";
import { waitFor } from "../support/wait.js";

function exchange(socketPath: string, request: string): Promise<{ text: string; ended: boolean }> {
  return new Promise((resolve) => {
    const s = net.connect(socketPath, () => s.write(request));
    let text = "";
    s.on("data", (d: Buffer) => (text += d.toString("latin1")));
    s.on("error", () => undefined);
    s.on("close", () => resolve({ text, ended: true }));
  });
}

describe("egress proxy", () => {
  let dir: string;
  let server: http.Server;
  let port: number;
  const seen: string[] = [];
  before(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), "warden-egress-"));
    server = http.createServer((req, res) => {
      seen.push(req.url ?? "");
      res.end("answer");
    });
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    port = (server.address() as net.AddressInfo).port;
  });
  after(() => {
    server.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it("plain HTTP: one request per connection, in origin form, journaled with its bytes", async () => {
    const events: EgressEvent[] = [];
    const proxy = await EgressProxy.listen(path.join(dir, "a.sock"), [`127.0.0.1:${port}`], { append: async (e) => (events.push(e), true) });
    seen.length = 0;
    // A client keeping the connection alive sends its next request at once, still absolute-form.
    const two = `GET http://127.0.0.1:${port}/first HTTP/1.1\r\nHost: x\r\nConnection: keep-alive\r\n\r\nGET http://example.invalid:${port}/second HTTP/1.1\r\nHost: y\r\n\r\n`;
    const reply = await exchange(path.join(dir, "a.sock"), two);
    await proxy.close();
    assert.match(reply.text, /^HTTP\/1\.1 200 OK\r\n/);
    assert.match(reply.text, /\r\nConnection: close\r\n/i);
    assert.deepEqual(seen, ["/first"], "the server saw the second, absolute-form request");
    assert.equal(events.length, 2);
    const [started, finished] = events as [Extract<EgressEvent, { type: "effect.started" }>, Extract<EgressEvent, { type: "effect.finished" }>];
    assert.equal(started.name, `127.0.0.1:${port}`);
    assert.equal(finished.outcome, "succeeded");
    const detail = (finished.detail as { egress: { allowed: boolean; bytes_up: number; bytes_down: number } }).egress;
    assert.equal(detail.allowed, true);
    assert.ok(detail.bytes_up > 0 && detail.bytes_down > 0);
  });

  it("CONNECT to an allowed target tunnels; one off the allowlist is refused 403 and journaled", async () => {
    const events: EgressEvent[] = [];
    const proxy = await EgressProxy.listen(path.join(dir, "b.sock"), [`127.0.0.1:${port}`], { append: async (e) => (events.push(e), true) });
    seen.length = 0;
    const tunnel = await exchange(path.join(dir, "b.sock"), `CONNECT 127.0.0.1:${port} HTTP/1.1\r\n\r\nGET /tunnelled HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`);
    assert.match(tunnel.text, /^HTTP\/1\.1 200 Connection Established\r\n\r\nHTTP\/1\.1 200 OK/);
    const denied = await exchange(path.join(dir, "b.sock"), `CONNECT 127.0.0.1:1 HTTP/1.1\r\n\r\n`);
    assert.match(denied.text, /^HTTP\/1\.1 403 /);
    await proxy.close();
    assert.deepEqual(seen, ["/tunnelled"]);
    const finishes = events.filter((e) => e.type === "effect.finished").map((e) => (e.detail as { egress: { target: string; allowed: boolean } }).egress);
    assert.deepEqual(
      finishes.map((f) => [f.target, f.allowed]),
      [
        [`127.0.0.1:${port}`, true],
        ["127.0.0.1:1", false],
      ],
    );
  });

  it("close() ends a connection still open and resolves after its finish is journaled", async () => {
    // An upstream that never ends a connection by itself: close() has to end the tunnel, not wait
    // for the other side to time it out (an HTTP server's headersTimeout did that after 60-90 s).
    const held: net.Socket[] = [];
    const silent = net.createServer((socket) => held.push(socket));
    await new Promise<void>((r) => silent.listen(0, "127.0.0.1", r));
    const silentPort = (silent.address() as net.AddressInfo).port;
    const upstreamClosed = new Promise<void>((r) => silent.once("connection", (socket: net.Socket) => socket.once("close", () => r())));
    const events: EgressEvent[] = [];
    const proxy = await EgressProxy.listen(path.join(dir, "c.sock"), [`127.0.0.1:${silentPort}`], { append: async (e) => (events.push(e), true) });
    const s = net.connect(path.join(dir, "c.sock"));
    s.on("error", () => undefined);
    s.write(`CONNECT 127.0.0.1:${silentPort} HTTP/1.1\r\n\r\n`);
    await new Promise<void>((r) => s.once("data", () => r()));
    let closed = false;
    void proxy.close().then(() => (closed = true));
    try {
      await waitFor("the proxy's close() to resolve while its tunnel's upstream stays open", () => (closed ? true : undefined));
      await upstreamClosed;
      assert.deepEqual(
        events.map((e) => e.type),
        ["effect.started", "effect.finished"],
      );
    } finally {
      s.destroy();
      for (const socket of held) socket.destroy();
      silent.close();
    }
  });
});
