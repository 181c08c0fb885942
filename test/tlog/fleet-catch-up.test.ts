/**
 * No leaf lost to a crash, in a fleet: a node of a PostgreSQL fleet killed (SIGKILL) after a run's
 * result is durable and before its seal is logged has the seal logged at its own next start, even
 * when the other nodes went on appending meanwhile. The catch-up watermark is the node's own (by
 * its home's node id): a fleet-wide one would have been raised past the lost fact by the others.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import * as fs from "node:fs";
import * as path from "node:path";
import { fileURLToPath } from "node:url";
import { openPool } from "../../src/backends/postgres/connection.js";
import { NODE_ID_FILE } from "../../src/backends/postgres/node.js";
import { PostgresLogStore } from "../../src/backends/postgres/log-store.js";
import { openWarden, type Warden } from "../../src/warden/facade.js";

import { startTestPostgres, type TestPostgres } from "../support/postgres.js";
import { LONG_TEST_MS } from "../support/wait.js";
import { tempDir } from "../support/temp.js";
import { bundledScript } from "../support/bundle.js";

const CHILD = fileURLToPath(new URL("../fixtures/tlog/kill-before-append.ts", import.meta.url));
const ORIGIN = "warden.test/catch-up";
/** Short, so the other node's appends move a fleet-wide watermark past the lost fact at once. */
const MARGIN_MS = 5;

async function killedRecording(home: string, url: string): Promise<string> {
  // Bundled for plain node: through tsx the child spent about 2 s of CPU loading a whole node.
  const child = spawn(process.execPath, [await bundledScript(CHILD), home, "run"], {
    stdio: ["ignore", "pipe", "pipe"],
    env: { ...process.env, WARDEN_TEST_PG_URL: url, WARDEN_TEST_LOG_MARGIN_MS: String(MARGIN_MS) },
  });
  let out = "";
  let err = "";
  child.stdout.on("data", (d: Buffer) => (out += d.toString()));
  child.stderr.on("data", (d: Buffer) => (err += d.toString()));
  const signal = await new Promise<NodeJS.Signals | null>((resolve) => child.once("exit", (_code, s) => resolve(s)));
  assert.equal(signal, "SIGKILL", `the child was not killed at its append: ${out}${err}`);
  const words = out.split("\n")[0]!.split(" ");
  assert.equal(words[0], "run", out);
  return words[2]!;
}

async function nodeOf(home: string, url: string): Promise<Warden> {
  return openWarden({ home, postgres: { url }, log: { origin: ORIGIN, checkpointIntervalMs: 10, watermarkMarginMs: MARGIN_MS } });
}

describe("transparency log catch-up after kill -9, in a fleet", { timeout: LONG_TEST_MS }, () => {
  let pg: TestPostgres;
  before(async () => {
    pg = await startTestPostgres();
  });
  after(async () => {
    await pg?.stop();
  });

  it("a node killed before its seal's leaf logs it at its next start, though another node appended since", async () => {
    const url = await pg.createDatabase("fleet_catch_up");
    const root = tempDir("tlog-fleet-catch-up");
    const homeA = path.join(root, "a");
    const homeB = path.join(root, "b");
    const pool = openPool({ url }, 2);
    const store = new PostgresLogStore(pool);
    try {
      const lost = await killedRecording(homeA, url);
      assert.equal(await store.indexOf(`run:${lost}`), undefined, "killed before the seal's leaf");

      // Node B records and logs runs after A died: its watermark passes the lost fact's time.
      // Time itself is what is awaited: the watermark is a clock time, and must pass the lost fact's.
      await new Promise((r) => setTimeout(r, 4 * MARGIN_MS));
      const b = await nodeOf(homeB, url);
      try {
        for (let i = 0; i < 3; i++) {
          const outcome = await b.invocations.run("api:bob", randomUUID(), { task: i }, "claude", async () => ({ ok: i }));
          assert.equal(outcome.status, "recorded");
        }
      } finally {
        await b.close();
      }
      assert.equal(await store.indexOf(`run:${lost}`), undefined, "B's start and appends did not log A's lost seal (B's catch-up reads since its own watermark)");
      const ids = [homeA, homeB].map((h) => fs.readFileSync(path.join(h, NODE_ID_FILE), "utf8").trim());
      assert.notEqual(ids[0], ids[1], "each home has its own node id");
      const marks = await pool.query<{ node: string; value: number }>("SELECT node, value FROM warden_tlog_watermarks");
      const byNode = new Map(marks.rows.map((r) => [r.node, Number(r.value)]));
      assert.ok(byNode.has(ids[1]!), "B keeps its watermark under its node id");

      // A starts again: its own watermark is from before the lost fact, so the seal is logged.
      const a = await nodeOf(homeA, url);
      try {
        const index = await store.indexOf(`run:${lost}`);
        assert.notEqual(index, undefined, "A's restart logged the seal it lost");
        const proof = await a.log!.runProof(lost);
        assert.equal(proof.index, index);
      } finally {
        await a.close();
      }
    } finally {
      await pool.end();
      fs.rmSync(root, { recursive: true, force: true });
    }
  });
});
