/**
 * The CLI and a node that is gone (DESIGN.md G12; README "Which node": the local operator token is
 * sent to the local node only). `<home>/node.json` names the node's loopback URL; a node killed
 * with -9, or crashed, leaves it behind. Any local user may then listen on that port (a port
 * above 1024 needs no privilege), and a CLI that trusts the stale file sends the operator token to
 * that user. A live node holds `<home>/node.lock` for its whole life: the CLI sends the home's
 * token only while somebody holds it.
 *
 * The "node" here is a plain HTTP listener that records what it is sent; the lock is held by this
 * process in the case where the node is alive, and by nobody in the case where it crashed.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as http from "node:http";
import * as path from "node:path";
import type { AddressInfo } from "node:net";
import { FileLock } from "../../src/storage/lock.js";
import { repo, type CliRun } from "../support/node.js";
import { tempDir } from "../support/temp.js";
import { wardenInProcess } from "../support/cli.js";

const TOKEN = "home-operator-token-7f3a91c4d2e8b605";

/** The real CLI entry point, in this process (its own process costs a second or more per run). */
const warden = (args: readonly string[], env: Record<string, string>): Promise<CliRun> => wardenInProcess(args, { env, cwd: repo });

describe("security: a stale node.json never gets the operator token", () => {
  let root: string;
  let home: string;
  let server: http.Server;
  const received: string[] = [];

  before(async () => {
    root = tempDir("security-node-file");
    home = path.join(root, "home");
    fs.mkdirSync(home, { mode: 0o700 });
    server = http.createServer((req, res) => {
      received.push(req.headers.authorization ?? "");
      res.writeHead(500, { "content-type": "application/problem+json" });
      res.end(JSON.stringify({ type: "about:blank", title: "x", status: 500, code: "listener" }));
    });
    await new Promise<void>((done) => server.listen(0, "127.0.0.1", done));
    const port = (server.address() as AddressInfo).port;
    fs.writeFileSync(path.join(home, "token"), `${TOKEN}\n`, { mode: 0o600 });
    // What a node killed with -9 leaves: its URL, its pid, and its lock file (nobody holds it).
    fs.writeFileSync(path.join(home, "node.json"), `${JSON.stringify({ url: `http://127.0.0.1:${port}`, pid: 2 ** 22 + 1 })}\n`, { mode: 0o600 });
    fs.writeFileSync(path.join(home, "node.lock"), "", { mode: 0o600 });
  });
  after(async () => {
    await new Promise((done) => server.close(done));
    fs.rmSync(root, { recursive: true, force: true });
  });

  it("while the node holds its home, the CLI sends it the home's token (the control)", async () => {
    received.length = 0;
    const lock = FileLock.tryAcquire(path.join(home, "node.lock"));
    assert.ok(lock !== undefined);
    try {
      await warden(["bundles"], { WARDEN_HOME: home });
    } finally {
      lock.release();
    }
    assert.deepEqual(received, [`Bearer ${TOKEN}`]);
  });

  it("once nobody holds the home, whatever listens on the stale URL gets no token", async () => {
    received.length = 0;
    const run = await warden(["bundles"], { WARDEN_HOME: home });
    assert.equal(run.code, 1, run.stderr);
    assert.ok(!received.some((auth) => auth.includes(TOKEN)), `the operator token was sent to a stale node URL: ${JSON.stringify(received)}`);
  });

  it("nor does a WARDEN_TOKEN of the environment, when the URL comes from the stale node.json", async () => {
    received.length = 0;
    const run = await warden(["bundles"], { WARDEN_HOME: home, WARDEN_TOKEN: `env-${TOKEN}` });
    assert.equal(run.code, 1, run.stderr);
    assert.ok(!received.some((auth) => auth.includes(TOKEN)), `the operator token was sent to a stale node URL: ${JSON.stringify(received)}`);
  });
});
