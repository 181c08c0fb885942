/**
 * `warden serve` on an address another process listens on fails before it writes anything: no new
 * home, no token, no node.json, no stores (issue 19: it used to write a token into a new home and
 * open its stores first). And the address it holds while it opens is handed to its own listener:
 * a fixed port that is free is served.
 */
import { after, describe, it } from "node:test";
import assert from "node:assert/strict";
import { existsSync, mkdirSync, readdirSync, rmSync } from "node:fs";
import { createServer, type Server } from "node:net";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { removeHome, startNode, warden } from "../support/node.js";
import { tempDir } from "../support/temp.js";

function listenOnFreePort(): Promise<Server> {
  const server = createServer((socket) => socket.destroy());
  return new Promise((done, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => done(server));
  });
}

describe("warden serve on a port in use", () => {
  const root = tempDir("port-in-use");
  after(() => rmSync(root, { recursive: true, force: true }));

  it("fails with address-in-use before creating the home or writing into it", async () => {
    const holder = await listenOnFreePort();
    const port = (holder.address() as AddressInfo).port;
    try {
      const fresh = join(root, "fresh-home");
      const run = await warden(["serve", "--home", fresh, "--listen", `127.0.0.1:${port}`]);
      assert.equal(run.code, 1, run.stdout + run.stderr);
      assert.match(run.stderr, new RegExp(`^warden: 127\\.0\\.0\\.1:${port} is in use by another process.*\\(address-in-use\\)\\n$`));
      assert.equal(run.stdout, "");
      assert.equal(existsSync(fresh), false, "no home was created");

      // A home that exists but is empty (made by the operator beforehand) stays empty.
      const empty = join(root, "empty-home");
      mkdirSync(empty, { mode: 0o700 });
      const again = await warden(["serve", "--listen", `127.0.0.1:${port}`], { env: { WARDEN_HOME: empty } });
      assert.equal(again.code, 1, again.stdout + again.stderr);
      assert.match(again.stderr, /\(address-in-use\)\n$/);
      assert.deepEqual(readdirSync(empty), [], "nothing was written into the home");
    } finally {
      await new Promise((done) => holder.close(done));
    }
  });

  it("serves a free fixed port: the address it held while opening is handed to its listener", async () => {
    const probe = await listenOnFreePort();
    const port = (probe.address() as AddressInfo).port;
    await new Promise((done) => probe.close(done));
    const node = await startNode({ args: ["--listen", `127.0.0.1:${port}`] });
    try {
      assert.equal(node.url, `http://127.0.0.1:${port}`);
      const health = await fetch(`${node.url}/healthz`);
      assert.equal(health.status, 200);
      // While it serves, a second start on its port is refused the same way, and its home untouched.
      const second = join(root, "second-home");
      const run = await warden(["serve", "--home", second, "--listen", `127.0.0.1:${port}`]);
      assert.match(run.stderr, /\(address-in-use\)\n$/);
      assert.equal(existsSync(second), false);
    } finally {
      assert.equal(await node.stop(), 0);
      removeHome(node);
    }
  });
});
