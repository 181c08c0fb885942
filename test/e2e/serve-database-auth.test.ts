/**
 * `warden serve --postgres` with a URL that holds no password, against a server that asks for one:
 * the start fails with one line naming the problem and where a password goes, and the process
 * ends at once, not when the server gives up on the half-done login (its authentication timeout,
 * a minute by default). The server here is a stand-in that speaks only the first message of
 * PostgreSQL's protocol: it asks for SCRAM-SHA-256 and sends its first SCRAM message, then waits,
 * as a real server waits for the proof of the password.
 */
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { rmSync } from "node:fs";
import * as net from "node:net";
import type { AddressInfo } from "node:net";
import { warden } from "../support/node.js";
import { READY_MS } from "../support/wait.js";
import { tempDir } from "../support/temp.js";

/** An Authentication message: 'R', int32 length, int32 kind, payload. */
function authentication(kind: number, payload: Buffer): Buffer {
  const head = Buffer.alloc(9);
  head.write("R", 0, "latin1");
  head.writeInt32BE(8 + payload.byteLength, 1);
  head.writeInt32BE(kind, 5);
  return Buffer.concat([head, payload]);
}

let server: net.Server;
let port: number;
const sockets = new Set<net.Socket>();
/** When the node's first connection arrived: from there on, only the login is left to decide. */
let connectedAt: number | undefined;

before(async () => {
  server = net.createServer((socket) => {
    sockets.add(socket);
    connectedAt ??= performance.now();
    socket.on("close", () => sockets.delete(socket));
    socket.on("error", () => undefined);
    let step = 0;
    socket.on("data", (data: Buffer) => {
      step++;
      // 1: the startup packet → AuthenticationSASL (10) offering SCRAM-SHA-256.
      if (step === 1) socket.write(authentication(10, Buffer.from("SCRAM-SHA-256\0\0", "latin1")));
      // 2: the client's first SCRAM message (it needs no password yet) → AuthenticationSASLContinue
      // (11) with the server's first message; answering that needs the password.
      if (step === 2) {
        const nonce = /r=([^,\0]+)/.exec(data.toString("latin1"))?.[1] ?? "";
        socket.write(authentication(11, Buffer.from(`r=${nonce}server,s=c2FsdHNhbHQ=,i=4096`, "latin1")));
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  port = (server.address() as AddressInfo).port;
});
after(async () => {
  for (const socket of sockets) socket.destroy();
  await new Promise((resolve) => server.close(resolve));
});

test("a database that asks for a password the URL lacks: one line, database-auth-failed, and the process ends", { timeout: READY_MS }, async (t) => {
  const home = tempDir("serve-auth");
  t.after(() => rmSync(home, { recursive: true, force: true }));
  const run = await warden(["serve", "--home", home, "--listen", "127.0.0.1:0", "--postgres", `postgresql://warden@127.0.0.1:${port}/warden`], {
    env: { WARDEN_TOKEN: "serve-auth-token-0123456789abcdef" },
  });
  // Counted from the connection, not the process start (which a busy machine makes slow): the
  // stand-in never answers the proof, so only the node's own giving up ends the login.
  assert.ok(connectedAt !== undefined, `the node never connected: ${run.stderr}`);
  const seconds = (performance.now() - connectedAt) / 1000;
  assert.equal(run.code, 1, run.stderr);
  const lines = run.stderr.trim().split("\n");
  assert.equal(lines.length, 1, run.stderr);
  assert.match(lines[0]!, /PGPASSWORD.*\(database-auth-failed\)$/);
  assert.ok(seconds < 20, `the process ended ${seconds.toFixed(1)} s after it connected`);
  assert.ok(sockets.size <= 1);
});
