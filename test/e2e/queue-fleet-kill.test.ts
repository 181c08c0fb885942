/**
 * A node killed with SIGKILL while it holds leases (issue 32, "Leases"): on runs it has not
 * started yet and on runs it is running. Real `warden serve --postgres` processes on one throwaway
 * PostgreSQL; what ran is read from the fixture agents' own log (test/fixtures/agents/queue-agent.mjs).
 *
 * Node X runs three long agents (they require a label only X has), then is sent a burst and
 * killed the moment the queue table shows it holding a lease on one of the burst's rows. Once its
 * database sessions are gone, the table says, for good, which rows X had leased and not started
 * and which it had started. Node Y then joins ("elsewhere"): each row X had leased and not started
 * runs once, on Y; each run X had started reads `unresolved` and never runs again; no agent of
 * any invocation starts twice.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as path from "node:path";
import { randomUUID } from "node:crypto";
import pg from "pg";
import { fixtureAgents, httpCall, startNode, type HttpReply, type NodeProcess } from "../support/node.js";
import { startTestPostgres, type TestPostgres } from "../support/postgres.js";
import { analyzeQueueLog, readQueueLog } from "../support/queue-log.js";
import { killIfStillRecorded } from "../support/processes.js";
import { tempDir } from "../support/temp.js";
import { LONG_TEST_MS, READY_MS, waitFor } from "../support/wait.js";

const TOKEN = "queue-kill-operator-token-0123456789abcdef";
const LONG = 3;
const BURST = 12;
/** Room for the long runs and the whole burst: X leases the burst as it comes. */
const SLOTS = LONG + BURST + 1;
/** Attempts at catching X between a lease and its start (a new X each time); one is the rule. */
const ATTEMPTS = 3;

describe("kill -9 of a node holding leases on queued runs not yet spawned and on runs running", () => {
  let pgServer: TestPostgres;
  let url: string;
  let root: string;
  let log: string;
  let db: pg.Client;
  const nodes: NodeProcess[] = [];

  const start = async (name: string, labels: Record<string, string>): Promise<NodeProcess> => {
    const workspace = path.join(root, `${name}-workspace`);
    fs.mkdirSync(workspace, { recursive: true });
    const node = await startNode({
      home: path.join(root, name),
      args: ["--postgres", url, "--provider", `claude=${path.join(fixtureAgents, "queue-agent.mjs")}`, "--workspace", `main=${workspace}`, "--log-level", "warn"],
      env: { WARDEN_TOKEN: TOKEN, WARDEN_FIXTURE_QUEUE_LOG: log, WARDEN_FIXTURE_NODE: name },
      config: { defaultWorkspace: "main", queue: { slots: SLOTS, labels } },
    });
    nodes.push(node);
    return node;
  };
  const submit = (at: NodeProcess, key: string, prompt: string, extra: Record<string, unknown> = {}): Promise<HttpReply> =>
    httpCall(at.url, TOKEN, "POST", "/v1/invocations", { headers: { "idempotency-key": key, prefer: "respond-async" }, body: { provider: "claude", prompt, ...extra } });
  const statusOf = async (at: NodeProcess, key: string): Promise<string> => String((await httpCall(at.url, TOKEN, "GET", `/v1/invocations/api:operator/${key}`)).body.status);
  const rows = async (ids: readonly string[]): Promise<{ id: string; state: string; lease_owner: string | null }[]> =>
    (await db.query<{ id: string; state: string; lease_owner: string | null }>("SELECT id, state, lease_owner FROM warden_queue WHERE id = ANY($1)", [ids])).rows;
  const otherSessions = async (): Promise<number> =>
    Number((await db.query<{ n: string }>("SELECT count(*) AS n FROM pg_stat_activity WHERE datname = current_database() AND backend_type = 'client backend' AND pid <> pg_backend_pid()")).rows[0]!.n);

  before(async () => {
    pgServer = await startTestPostgres();
    url = await pgServer.createDatabase("queue_kill");
    root = tempDir("queue-kill");
    log = path.join(root, "agents.log");
    db = new pg.Client({ connectionString: url });
    await db.connect();
  });

  after(async () => {
    await Promise.all(nodes.map((n) => n.kill()));
    // Agents still running (no end logged): the long ones of a killed node.
    for (const agent of analyzeQueueLog(readQueueLog(log ?? "")).agents.filter((a) => a.end === undefined)) {
      killIfStillRecorded(agent);
    }
    await db?.end().catch(() => undefined);
    await pgServer?.stop();
    if (root !== undefined) fs.rmSync(root, { recursive: true, force: true });
  });

  it("the leased rows run elsewhere exactly once, the started ones are unresolved, no agent runs twice", { timeout: LONG_TEST_MS }, async (t) => {
    let leasedAtDeath: string[] = [];
    let startedAtDeath: string[] = [];
    const long: string[] = [];
    const burst: string[] = [];
    for (let attempt = 1; attempt <= ATTEMPTS && leasedAtDeath.length === 0; attempt++) {
      const x = await start(`x${attempt}`, { victim: "yes" });
      // Runs X is running when it dies: they wait for a label only X has, and sleep for as long as the test.
      const mine = Array.from({ length: LONG }, () => randomUUID());
      long.push(...mine);
      for (const key of mine) assert.equal((await submit(x, key, `job=${key} sleep=600000 long`, { labels: { victim: "yes" } })).status, 202);
      await waitFor(`X's ${LONG} long agents to start`, () => (mine.every((k) => readQueueLog(log).some((l) => l.ev === "start" && l.job === k)) ? true : undefined));

      // The burst, submitted to X at once; X is killed as soon as it holds a lease on one of its rows.
      const keys = Array.from({ length: BURST }, () => randomUUID());
      const submitted = Promise.all(keys.map((key) => submit(x, key, `job=${key} sleep=50 burst`).catch((error: unknown) => error)));
      await waitFor("X to lease a row of the burst", async () => ((await rows(keys)).some((r) => r.state === "leased") ? true : undefined), READY_MS, 1);
      await x.kill();
      await submitted;
      // Its sessions gone (their transactions rolled back, its owner lock released), the table is final for X.
      await waitFor("X's database sessions to end", async () => ((await otherSessions()) === 0 ? true : undefined));
      const final = await rows([...mine, ...keys]);
      // A submission X did not store before it died was refused (its connection cut): not queued.
      burst.push(...keys.filter((k) => final.some((r) => r.id === k)));
      leasedAtDeath = final.filter((r) => r.state === "leased").map((r) => r.id);
      startedAtDeath.push(...final.filter((r) => r.state === "started").map((r) => r.id));
      for (const key of mine) assert.ok(startedAtDeath.includes(key), `long run ${key} was started by X: ${JSON.stringify(final)}`);
    }
    assert.ok(leasedAtDeath.length > 0, `in ${ATTEMPTS} attempts, X was never killed between a lease and its start`);
    t.diagnostic(`at X's death: ${leasedAtDeath.length} rows leased and not started, ${startedAtDeath.length} started (${LONG} of them long runs)`);
    const startedAgents = new Set(readQueueLog(log).filter((l) => l.ev === "start").map((l) => l.job));
    for (const key of leasedAtDeath) assert.ok(!startedAgents.has(key), `a row leased and not started at X's death has an agent: ${key}`);

    // Y joins: it returns X's leases to the queue and runs them; X's started runs are X's, unresolved.
    const y = await start("y", {});
    const submittedKeys = [...long, ...burst];
    await waitFor(
      "every row X leased and did not start to be recorded by Y",
      async () => ((await Promise.all(leasedAtDeath.map((k) => statusOf(y, k)))).every((s) => s === "recorded") ? true : undefined),
    );
    for (const key of startedAtDeath) {
      const status = await waitFor(`the run X started (${key}) to read unresolved or recorded`, async () => {
        const s = await statusOf(y, key);
        return s === "unresolved" || s === "recorded" ? s : undefined;
      });
      if (long.includes(key)) assert.equal(status, "unresolved", `X's long run ${key} was running when X died`);
    }
    // The rest of the burst (queued when X died) runs on Y too; then nothing is left to start.
    await waitFor("the whole burst to end", async () => ((await rows(burst)).every((r) => r.state === "started") && (await Promise.all(burst.map((k) => statusOf(y, k)))).every((s) => s === "recorded" || s === "unresolved") ? true : undefined));
    const report = analyzeQueueLog(readQueueLog(log));
    assert.deepEqual(report.duplicates, [], "an invocation's agent started twice");
    for (const key of leasedAtDeath) {
      const runs = report.agents.filter((a) => a.job === key);
      assert.equal(runs.length, 1, `${key} ran once`);
      assert.equal(runs[0]!.node, "y", `${key} ran on Y`);
    }
    for (const key of long) assert.equal(report.agents.filter((a) => a.job === key).length, 1, `long run ${key} started once, on X only`);
    for (const key of submittedKeys) assert.ok((report.startsByJob.get(key) ?? 0) <= 1);
  });
});
