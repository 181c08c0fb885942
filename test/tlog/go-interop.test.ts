/**
 * Interop with an implementation warden did not write: Go's golang.org/x/mod/sumdb/note and
 * sumdb/tlog (Debian's golang-golang-x-mod-dev, installed by scripts/test-prereqs.mjs) check a
 * real node's checkpoint signature, inclusion and consistency proofs, and read its tiles over
 * HTTP — with a log past 65,536 leaves, so tiles of levels 0, 1 and 2, full and partial, are read.
 * Once on an embedded node, once on a fleet node (the log on PostgreSQL).
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { execFile, execFileSync } from "node:child_process";
import { promisify } from "node:util";
import * as fs from "node:fs";
import * as path from "node:path";
import { fileURLToPath } from "node:url";
import type { AddressInfo } from "node:net";
import { parseCheckpointText } from "../../src/tlog/checkpoint.js";
import { parseNote } from "../../src/tlog/note.js";
import { OBSERVER, OBSERVER_TOKEN, json, openTestNode, type TestNode } from "../support/app-node.js";
import { startTestPostgres, type TestPostgres } from "../support/postgres.js";
import { tempDir } from "../support/temp.js";

const run = promisify(execFile);
const PROGRAM = fileURLToPath(new URL("../fixtures/go/tlog-interop.go", import.meta.url));

let built: string;
let binary: string;
before(() => {
  built = tempDir("tlog-go-build");
  // Compiled once for the file, with Debian's x/mod from GOPATH: no network, no module download.
  binary = path.join(built, "tlog-interop");
  execFileSync("go", ["build", "-o", binary, PROGRAM], {
    env: { ...process.env, GOPATH: "/usr/share/gocode", GO111MODULE: "off", GOFLAGS: "", GOCACHE: path.join(built, "gocache") },
    stdio: "pipe",
  });
});
after(() => fs.rmSync(built, { recursive: true, force: true }));

// The same log served by a node of each backend: its own (SQLite), and a fleet's (PostgreSQL).
for (const backend of ["embedded", "postgres"] as const) describe(`Go's x/mod/sumdb verifies warden's log (${backend})`, () => {
  let root: string;
  let pg: TestPostgres | undefined;
  let node: TestNode;
  let base: string;
  before(async () => {
    root = tempDir("tlog-go");
    if (backend === "postgres") pg = await startTestPostgres();
    const postgres = pg === undefined ? {} : { postgres: { url: await pg.createDatabase("interop") } };
    node = await openTestNode(root, { warden: { ...postgres, log: { origin: "warden.test/interop", checkpointIntervalMs: 3_600_000 } } });
    await node.app.listen({ host: "127.0.0.1", port: 0 });
    base = `http://127.0.0.1:${(node.app.server.address() as AddressInfo).port}/v1/log`;
  });
  after(async () => {
    await node.close();
    await pg?.stop();
    fs.rmSync(root, { recursive: true, force: true });
  });

  const checkpoint = async () => parseCheckpointText(parseNote((await node.app.inject({ url: "/v1/log/checkpoint", headers: OBSERVER })).payload).text);
  const fill = async (from: number, to: number) => {
    const log = node.warden.log!;
    for (let at = from; at < to; at += 5000) {
      await Promise.all(
        Array.from({ length: Math.min(5000, to - at) }, (_, i) =>
          log.append({ v: 1, type: "bundle.committed", bundle_id: "fill", revision: `r${at + i}`, bundle_digest: `sha256:${"a".repeat(64)}`, manifest_digest: `sha256:${"b".repeat(64)}` }),
        ),
      );
    }
    await log.checkpoint();
  };
  const vkey = async (): Promise<string> => json((await node.app.inject({ url: "/v1/log", headers: OBSERVER })).payload).vkey as string;
  // Asynchronous: the node answering the program's requests runs in this process.
  const interop = async (key: string, index: number, oldSize: number, oldRoot: Buffer): Promise<string> =>
    (await run(binary, [base, key, String(index), String(oldSize), oldRoot.toString("base64")], { env: { ...process.env, WARDEN_TOKEN: OBSERVER_TOKEN }, encoding: "utf8" })).stdout;
  const rootAt = (size: number): Promise<Buffer> => node.warden.log!.rootAt(size);

  it("checkpoint signature, inclusion and consistency proofs, and tiles at several sizes", async () => {
    const key = await vkey();
    await fill(0, 300);
    const small = await checkpoint();
    assert.equal(small.size, 301, "300 fillers and the node's key");
    let out = await interop(key, 257, 1, await rootAt(1));
    assert.match(out, /checkpoint ok warden\.test\/interop 301\ninclusion ok\nconsistency ok\ntiles ok/);
    await fill(300, 66_000);
    const large = await checkpoint();
    assert.equal(large.size, 66_001);
    for (const [index, old] of [[0, 256], [65_599, 301], [66_000, 65_536], [40_000, 66_001]] as const) {
      out = await interop(key, index, old, old === small.size ? small.root : await rootAt(old));
      assert.match(out, /checkpoint ok .*\ninclusion ok\nconsistency ok\ntiles ok/, `leaf ${index}, old size ${old}`);
    }
  });

  it("Go refuses a checkpoint signed by another key", async () => {
    // The signed-note spec's example key, renamed to the log's origin: a key the checkpoint was not signed with.
    const { formatVkey, SIG_ED25519 } = await import("../../src/tlog/note.js");
    const foreign = formatVkey("warden.test/interop", SIG_ED25519, "tVz8sB/4VTqy1hwLSy9wspqb1SKzaaFCeJ3VLMVagjs=");
    await assert.rejects(interop(foreign, 0, 1, Buffer.alloc(32)), (e: unknown) => /FAIL .*(unknown|verif)/i.test(String((e as { stderr?: string }).stderr)));
  });

});
