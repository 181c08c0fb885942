/**
 * A fleet's day budgets (DESIGN.md "Spend"): two real `warden serve --postgres` processes on one
 * throwaway PostgreSQL share the daily counters. A run on one node spends its workspace's and its
 * principal's day; the other node refuses the next run of either with `budget-day-spent`, before
 * any claim, and so does the first node once killed with SIGKILL and started again.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as path from "node:path";
import { randomUUID } from "node:crypto";
import { fixtureAgents, httpCall, startNode, type HttpReply, type NodeProcess } from "../support/node.js";
import { startTestPostgres, type TestPostgres } from "../support/postgres.js";
import { tempDir } from "../support/temp.js";

const TOKEN = "spend-fleet-operator-token-0123456789abcdef";

describe("a fleet's day budgets on one PostgreSQL", () => {
  let pg: TestPostgres;
  let url: string;
  let root: string;
  const nodes: { a?: NodeProcess; b?: NodeProcess } = {};

  const start = (name: "a" | "b"): Promise<NodeProcess> => {
    const home = path.join(root, name);
    for (const ws of ["main", "other"]) fs.mkdirSync(path.join(root, `${name}-${ws}`), { recursive: true });
    return startNode({
      home,
      args: ["--postgres", url, "--provider", `claude=${path.join(fixtureAgents, "claude.mjs")}`, "--workspace", `main=${path.join(root, `${name}-main`)}`, "--workspace", `other=${path.join(root, `${name}-other`)}`, "--log-level", "warn"],
      env: { WARDEN_TOKEN: TOKEN, WARDEN_FIXTURE_STARTS: path.join(root, "starts.log") },
      // Any run of the fixture claude (12 input tokens a turn) spends a day of 10.
      config: { defaultWorkspace: "main", spend: { workspaceDay: { input_tokens: 10 } } },
    });
  };
  const invoke = (at: NodeProcess, key: string, body: unknown): Promise<HttpReply> =>
    httpCall(at.url, TOKEN, "POST", "/v1/invocations", { headers: { "idempotency-key": key, prefer: "wait=60" }, body });

  before(async () => {
    pg = await startTestPostgres();
    url = await pg.createDatabase("spend_fleet");
    root = tempDir("spend-fleet");
    [nodes.a, nodes.b] = await Promise.all([start("a"), start("b")]);
  });
  after(async () => {
    await nodes.a?.kill();
    await nodes.b?.kill();
    await pg?.stop();
    if (root !== undefined) fs.rmSync(root, { recursive: true, force: true });
  });

  it("a day spent on one node is spent on the other, and stays spent after kill -9", async () => {
    const first = await invoke(nodes.a!, randomUUID(), { provider: "claude", prompt: "hello" });
    assert.equal(first.body.status, "recorded", first.text);
    const refusedOn = async (at: NodeProcess): Promise<void> => {
      const key = randomUUID();
      const refused = await invoke(at, key, { provider: "claude", prompt: "hello again" });
      assert.equal(refused.status, 429, refused.text);
      assert.equal(refused.body.code, "budget-day-spent");
      assert.equal(refused.body.workspace, "main");
      assert.equal((await httpCall(at.url, TOKEN, "GET", `/v1/invocations/api:operator/${key}`)).status, 404, "a refused run was claimed");
    };
    await refusedOn(nodes.b!);
    // The other node's /metrics reads the fleet's counters: the first node's run, by workspace and principal.
    const metrics = (await httpCall(nodes.b!.url, TOKEN, "GET", "/metrics")).text;
    for (const labels of ['kind="principal",subject="api:operator"', 'kind="workspace",subject="main"']) {
      const value = Number(new RegExp(`^warden_spend_today_input_tokens\\{${labels}\\} (\\d+)$`, "m").exec(metrics)?.[1]);
      assert.ok(value >= 10, `warden_spend_today_input_tokens{${labels}} is ${value}:\n${metrics}`);
    }
    // The other workspace's day is its own, on either node.
    const other = await invoke(nodes.b!, randomUUID(), { provider: "claude", prompt: "hello", workspace: "other" });
    assert.equal(other.body.status, "recorded", other.text);
    await nodes.a!.kill();
    nodes.a = await start("a");
    await refusedOn(nodes.a);
  });
});
