/**
 * The node's bound on open connections (DESIGN.md "Limits", issue 27): idle sockets from one
 * client cannot take the node to its descriptor limit, the operator still gets in, and a
 * connection that finds no room is refused with a problem document. Real sockets on loopback.
 */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import * as net from "node:net";
import type { AddressInfo } from "node:net";
import { OBSERVER_TOKEN, OPERATOR, OPERATOR_TOKEN, openTestNode, type TestNode } from "../support/app-node.js";
import { tempDir } from "../support/temp.js";

async function listen(node: TestNode): Promise<number> {
  await node.app.listen({ host: "127.0.0.1", port: 0 });
  return (node.app.server.address() as AddressInfo).port;
}

function connect(port: number): Promise<net.Socket> {
  return new Promise((resolve, reject) => {
    const socket = net.connect({ host: "127.0.0.1", port }, () => resolve(socket));
    socket.on("error", reject);
  });
}

/** Sends one request on `socket` and resolves with what arrives until the answer's head and `until` are in. */
function exchange(socket: net.Socket, request: string, until: RegExp): Promise<string> {
  return new Promise((resolve, reject) => {
    let text = "";
    const onData = (chunk: Buffer): void => {
      text += chunk.toString("utf8");
      if (until.test(text)) {
        socket.off("data", onData);
        resolve(text);
      }
    };
    socket.on("data", onData);
    socket.once("close", () => (until.test(text) ? resolve(text) : reject(new Error(`socket closed before ${String(until)}; got ${JSON.stringify(text)}`))));
    if (request !== "") socket.write(request);
  });
}

const get = (path: string, token: string): string => `GET ${path} HTTP/1.1\r\nHost: node\r\nAuthorization: Bearer ${token}\r\n\r\n`;

function serverConnections(node: TestNode): Promise<number> {
  return new Promise((resolve, reject) => node.app.server.getConnections((error, count) => (error ? reject(error) : resolve(count))));
}

describe("bounded connections", () => {
  it("2,000 idle sockets from one client stay within its bound, and an operator's real request still succeeds", { timeout: 120_000 }, async () => {
    const node = await openTestNode(tempDir("server-connections-flood"), { warden: { limits: { connections: 300, connectionsPerClient: 200 } } });
    const sockets: net.Socket[] = [];
    try {
      const port = await listen(node);
      for (let batch = 0; batch < 20; batch++) {
        const opened = await Promise.all(Array.from({ length: 100 }, () => connect(port)));
        for (const s of opened) {
          s.on("error", () => {});
          sockets.push(s);
        }
      }
      // Every one connected; the node closed the oldest idle ones to stay within 200 from this address.
      assert.ok((await serverConnections(node)) <= 200, `the node holds ${await serverConnections(node)} connections`);
      const operator = await connect(port);
      sockets.push(operator);
      const answer = await exchange(operator, get("/v1/node", OPERATOR_TOKEN), /\r\n\r\n[\s\S]*\}$/);
      assert.match(answer, /^HTTP\/1\.1 200 /, answer);
      assert.ok((await serverConnections(node)) <= 200);
    } finally {
      for (const s of sockets) s.destroy();
      await node.close();
    }
  });

  it("the operator's connections are never closed to make room; with none to close, a new one is refused with a problem", { timeout: 60_000 }, async () => {
    const node = await openTestNode(tempDir("server-connections-refused"), { warden: { limits: { connections: 10, connectionsPerClient: 3 } } });
    const sockets: net.Socket[] = [];
    try {
      const port = await listen(node);
      // Two operator connections (kept alive, idle between requests) and one observer's.
      for (const token of [OPERATOR_TOKEN, OPERATOR_TOKEN, OBSERVER_TOKEN]) {
        const s = await connect(port);
        sockets.push(s);
        assert.match(await exchange(s, get("/v1/node", token), /\r\n\r\n[\s\S]*\}$/), /^HTTP\/1\.1 200 /);
      }
      // A fourth connection takes the observer's place; the operators' stay.
      const observerClosed = new Promise<void>((resolve) => sockets[2]!.once("close", () => resolve()));
      const fourth = await connect(port);
      sockets.push(fourth);
      await observerClosed;
      assert.match(await exchange(fourth, get("/v1/node", OPERATOR_TOKEN), /\r\n\r\n[\s\S]*\}$/), /^HTTP\/1\.1 200 /);
      for (const s of sockets.slice(0, 2)) assert.match(await exchange(s, get("/v1/node", OPERATOR_TOKEN), /\r\n\r\n[\s\S]*\}$/), /^HTTP\/1\.1 200 /);
      // Three operators' connections: the next is refused, clearly.
      const refused = await connect(port);
      sockets.push(refused);
      const text = await exchange(refused, "", /\}$/);
      assert.match(text, /^HTTP\/1\.1 503 /);
      assert.match(text, /content-type: application\/problem\+json/i);
      assert.equal((JSON.parse(text.slice(text.indexOf("\r\n\r\n") + 4)) as { code: string }).code, "client-connections-exhausted");
      // The node kept serving the operator all along.
      assert.equal((await node.app.inject({ url: "/v1/node", headers: OPERATOR })).statusCode, 200);
    } finally {
      for (const s of sockets) s.destroy();
      await node.close();
    }
  });

  it("a connection that sends no request in time is closed; one that sent its request is served", { timeout: 60_000 }, async () => {
    const node = await openTestNode(tempDir("server-connections-silent"), { server: { firstRequestMs: 300 } });
    try {
      const port = await listen(node);
      const silent = await connect(port);
      const talking = await connect(port);
      const answer = exchange(talking, get("/v1/node", OPERATOR_TOKEN), /\r\n\r\n[\s\S]*\}$/);
      await new Promise<void>((resolve) => silent.once("close", () => resolve()));
      assert.match(await answer, /^HTTP\/1\.1 200 /);
      assert.equal(talking.destroyed, false, "the connection that spoke is kept");
      talking.destroy();
    } finally {
      await node.close();
    }
  });
});
