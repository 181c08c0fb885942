/**
 * Two real `warden serve --postgres <url>` processes on one throwaway PostgreSQL, driven only
 * through HTTP: they start together on an empty database (one schema, one key), one id invoked
 * 32 times at once across both runs its agent once, a run on one node streams its journal from the
 * other until it terminates, a bundle pushed to one node materializes on
 * the other, an upload moves between nodes, kill -9 of the node owning a run makes the other
 * answer `unresolved` within a second, and a PostgreSQL restart mid-run fails calls with
 * `storage-unavailable`, loses and duplicates nothing, and both nodes recover.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as path from "node:path";
import { randomUUID } from "node:crypto";
import { pathToFileURL } from "node:url";
import { buildManifest } from "../delivery/manifest-fixtures.js";
import { fullBundleFiles } from "../providers/helpers.js";
import { fixtureAgents, httpCall, startNode, type HttpCallOptions, type HttpReply, type NodeProcess } from "../support/node.js";
import { startTestPostgres, type TestPostgres } from "../support/postgres.js";
import { killGroupIfStillRecorded } from "../support/processes.js";
import { READY_MS, waitFor } from "../support/wait.js";
import { tempDir } from "../support/temp.js";

const TOKEN = "fleet-operator-token-0123456789abcdef";
/** The fixture claude, delayed when the prompt says #slow: the run outlasts a burst of retries. */
const SLOW_AGENT = (fixture: string): string => `#!/usr/bin/env node
if (process.argv.some((a) => a.includes("#slow"))) await new Promise((r) => setTimeout(r, 2000));
await import(${JSON.stringify(pathToFileURL(fixture).href)});
`;

type Reply = HttpReply;

describe("a fleet: two warden serve processes on one PostgreSQL", () => {
  let pg: TestPostgres;
  let url: string;
  let root: string;
  let startsFile: string;
  let agent: string;
  const nodes: { a?: NodeProcess; b?: NodeProcess } = {};

  const start = (name: "a" | "b"): Promise<NodeProcess> => {
    const home = path.join(root, name);
    const workspace = path.join(root, `${name}-workspace`);
    fs.mkdirSync(workspace, { recursive: true });
    return startNode({
      home,
      args: ["--postgres", url, "--provider", `claude=${agent}`, "--workspace", `main=${workspace}`, "--log-level", "warn"],
      env: { WARDEN_TOKEN: TOKEN, WARDEN_FIXTURE_STARTS: startsFile },
    });
  };
  const node = (name: "a" | "b"): NodeProcess => nodes[name]!;

  const call = (at: NodeProcess, method: string, route: string, options: HttpCallOptions = {}): Promise<Reply> =>
    httpCall(at.url, TOKEN, method, route, options);
  const invoke = (at: NodeProcess, key: string, body: unknown): Promise<Reply> =>
    call(at, "POST", "/v1/invocations", { headers: { "idempotency-key": key }, body });
  const stateOf = async (at: NodeProcess, key: string): Promise<Reply> => call(at, "GET", `/v1/invocations/api:operator/${key}`);
  const putChunk = (at: NodeProcess, stageId: string, digest: string, offset: number, bytes: Uint8Array): Promise<Reply> =>
    call(at, "PATCH", `/v1/stages/${stageId}/blobs/${digest}`, {
      raw: bytes,
      headers: { "content-type": "application/octet-stream", "upload-offset": String(offset) },
    });
  const starts = (): { pid: number; startTicks?: string; argv: string[] }[] =>
    fs.existsSync(startsFile) ? fs.readFileSync(startsFile, "utf8").split("\n").filter(Boolean).map((l) => JSON.parse(l) as { pid: number; startTicks?: string; argv: string[] }) : [];
  const startsOf = (marker: string): number => starts().filter((s) => s.argv.some((a) => a.includes(marker))).length;

  before(async () => {
    pg = await startTestPostgres();
    url = await pg.createDatabase("fleet");
    root = tempDir("fleet");
    startsFile = path.join(root, "starts.log");
    agent = path.join(root, "slow-claude.mjs");
    fs.writeFileSync(agent, SLOW_AGENT(path.join(fixtureAgents, "claude.mjs")), { mode: 0o755 });
    // Both start at once on an empty database: migrations and the first key race.
    [nodes.a, nodes.b] = await Promise.all([start("a"), start("b")]);
  });

  after(async () => {
    await nodes.a?.kill();
    await nodes.b?.kill();
    for (const s of starts()) killGroupIfStillRecorded(s);
    await pg?.stop();
    if (root !== undefined) fs.rmSync(root, { recursive: true, force: true });
  });

  it("nodes that started together on an empty database share one schema and one signing key", async () => {
    const [ka, kb] = await Promise.all([call(node("a"), "GET", "/v1/keys"), call(node("b"), "GET", "/v1/keys")]);
    assert.equal(ka.status, 200);
    assert.deepEqual(ka.body, kb.body);
    assert.equal((ka.body.keys as unknown[]).length, 1);
  });

  it("32 concurrent invocations of one id across both nodes: the agent runs once, the rest get 409 in-progress, then the replay", async () => {
    const key = randomUUID();
    const body = { provider: "claude", prompt: `fleet burst ${key} #slow` };
    const replies = await Promise.all(Array.from({ length: 32 }, (_, i) => invoke(node(i % 2 === 0 ? "a" : "b"), key, body)));
    const owners = replies.filter((r) => r.status === 202);
    assert.equal(owners.length, 1, replies.map((r) => `${r.status} ${String(r.body.code)}`).join(", "));
    const busy = replies.filter((r) => r.status === 409);
    assert.equal(busy.length, 31);
    for (const r of busy) assert.equal(r.body.code, "in-progress");
    const runId = owners[0]!.body.run_id as string;

    await waitFor("the run to be recorded", async () => ((await stateOf(node("b"), key)).body.status === "recorded" ? true : undefined));
    const replays = await Promise.all(Array.from({ length: 32 }, (_, i) => invoke(node(i % 2 === 0 ? "a" : "b"), key, body)));
    for (const r of replays) {
      assert.equal(r.status, 200);
      assert.equal(r.headers.get("idempotency-replayed"), "true");
      assert.equal(r.body.run_id, runId);
    }
    assert.equal(startsOf(key), 1, "the agent was started exactly once");
    // The journal written through one node verifies on the other, with the shared key.
    for (const at of [node("a"), node("b")]) {
      const verification = await call(at, "GET", `/v1/runs/${runId}/verification`);
      assert.equal(verification.status, 200);
      assert.equal(verification.body.ok, true);
      assert.equal(verification.body.requires_reconciliation, false);
    }
  });

  it("a run on node A followed from node B: its entries stream as they are written, and the stream ends when it terminates", async () => {
    const key = randomUUID();
    const started = await invoke(node("a"), key, { provider: "claude", prompt: `followed ${key} #slow` });
    assert.equal(started.status, 202);
    const runId = started.body.run_id as string;
    const began = Date.now();
    const res = await fetch(`${node("b").url}/v1/runs/${runId}/events`, { headers: { authorization: `Bearer ${TOKEN}` } });
    assert.equal(res.status, 200);
    const events = (await res.text()).split("\n\n").filter((e) => e.trim() !== "" && !e.startsWith(":"));
    assert.ok(Date.now() - began >= 1000, "node B kept the stream open while the run went on at node A");
    assert.equal(events.at(-1), 'event: end\ndata: {"reason":"terminated"}');
    const types = events
      .slice(0, -1)
      .map((e) => (JSON.parse(e.slice(e.indexOf("data: ") + 6)) as { entry: { event: { type: string } } }).entry.event.type);
    assert.equal(types[0], "run.started");
    assert.equal(types.at(-1), "run.terminated");
    assert.ok(types.includes("effect.finished"));
  });

  it("a bundle pushed to node A materializes on node B", async () => {
    const { manifest, blobs } = buildManifest(fullBundleFiles(), "fleet-tools", "r1");
    const begun = await call(node("a"), "POST", "/v1/stages", { body: manifest });
    assert.equal(begun.status, 201);
    const stageId = begun.body.stage_id as string;
    for (const m of begun.body.missing as { digest: string; byte_len: number }[]) {
      const res = await putChunk(node("a"), stageId, m.digest, 0, blobs.get(m.digest as `sha256:${string}`)!);
      assert.equal(res.status, 204, res.text);
    }
    const commit = await call(node("a"), "POST", `/v1/stages/${stageId}/commit`);
    assert.equal(commit.status, 200, commit.text);

    const listed = await call(node("b"), "GET", "/v1/bundles/fleet-tools");
    assert.equal(listed.status, 200);
    const materialized = await call(node("b"), "POST", "/v1/bundles/fleet-tools/r1/materializations", { body: { provider: "claude" } });
    assert.equal(materialized.status, 201, materialized.text);
    const rootDir = materialized.body.root as string;
    assert.ok(rootDir.startsWith(path.join(root, "b")), `materialized under node B's home: ${rootDir}`);
    for (const c of manifest.components) {
      const onDisk = fs.readFileSync(path.join(rootDir, "bundle", c.relative_path));
      assert.deepEqual(new Uint8Array(onDisk), new Uint8Array(blobs.get(c.blob.digest)!));
    }
  });

  it("an upload started on node A resumes on node B", async () => {
    const data = new Uint8Array(300_000).map((_, i) => (i * 7919) & 0xff);
    const { manifest, blobs } = buildManifest([...fullBundleFiles(), { path: "data/model.bin", content: data }], "fleet-upload", "r1");
    const begun = await call(node("a"), "POST", "/v1/stages", { body: manifest });
    assert.equal(begun.status, 201);
    const stageId = begun.body.stage_id as string;
    const big = (begun.body.missing as { digest: string; byte_len: number }[]).find((m) => m.byte_len === data.byteLength)!;
    assert.equal((await putChunk(node("a"), stageId, big.digest, 0, data.subarray(0, 100_000))).status, 204);
    assert.equal((await putChunk(node("a"), stageId, big.digest, 100_000, data.subarray(100_000, 180_000))).status, 204);

    const resumed = await call(node("b"), "POST", "/v1/stages", { body: manifest });
    assert.equal(resumed.body.stage_id, stageId, "the same manifest resumes the same stage on the other node");
    const missing = resumed.body.missing as { digest: string; byte_len: number; offset: number }[];
    assert.deepEqual(missing.map((m) => [m.digest, m.offset]), [[big.digest, 180_000]], "only the unsent bytes are missing");
    // A stale offset sent to B is refused with the offset the fleet has.
    const stale = await putChunk(node("b"), stageId, big.digest, 200_000, data.subarray(200_000));
    assert.equal(stale.status, 409);
    assert.equal(stale.body.expected_offset, 180_000);
    assert.equal((await putChunk(node("b"), stageId, big.digest, 180_000, data.subarray(180_000))).status, 204);
    const commit = await call(node("b"), "POST", `/v1/stages/${stageId}/commit`);
    assert.equal(commit.status, 200, commit.text);
    const status = await call(node("a"), "GET", `/v1/stages/${stageId}`);
    assert.equal(status.body.committed, true);
    assert.deepEqual(status.body.receipt, commit.body.receipt);
    const blob = blobs.get(big.digest as `sha256:${string}`)!;
    assert.equal(blob.byteLength, data.byteLength);
  });

  it("kill -9 of the node owning a run: the other node answers unresolved within a second and never re-runs it", async () => {
    const key = randomUUID();
    const body = { provider: "claude", prompt: `owned ${key} #hang` };
    const fresh = await invoke(node("a"), key, body);
    assert.equal(fresh.status, 202);
    await waitFor("the agent to start", () => (startsOf(key) === 1 ? true : undefined));
    assert.equal((await stateOf(node("b"), key)).body.status, "in_progress");
    assert.equal((await invoke(node("b"), key, body)).body.code, "in-progress");

    await node("a").kill();
    const killedAt = Date.now();
    const unresolved = await waitFor("node B to answer unresolved", async () => {
      const state = await stateOf(node("b"), key);
      return state.body.status === "unresolved" ? state : undefined;
    }, 5_000, 10);
    const elapsed = Date.now() - killedAt;
    assert.ok(elapsed < 1000, `unresolved after ${elapsed} ms`);
    assert.deepEqual(unresolved.body.reasons, ["owner-gone"]);
    const retry = await invoke(node("b"), key, body);
    assert.equal(retry.status, 409);
    assert.equal(retry.body.code, "unresolved");
    killGroupIfStillRecorded(starts().find((s) => s.argv.some((a) => a.includes(key)))!);

    nodes.a = await start("a");
    assert.equal((await invoke(node("a"), key, body)).body.code, "unresolved");
    // A pause, not a wait: it checks that nothing happens (the agent is not started again), which has no moment to wait for.
    await new Promise((r) => setTimeout(r, 200));
    assert.equal(startsOf(key), 1, "never started again");
  });

  it("a PostgreSQL restart mid-run: calls fail storage-unavailable, nothing is lost or duplicated, both nodes recover", async (t) => {
    if (!pg.owned) {
      t.skip("WARDEN_TEST_POSTGRES_URL names a server the tests do not restart");
      return;
    }
    const done = randomUUID();
    const doneBody = { provider: "claude", prompt: `kept ${done}` };
    assert.equal((await invoke(node("b"), done, doneBody)).status, 202);
    const recorded = await waitFor("the run to be recorded", async () => {
      const state = await stateOf(node("a"), done);
      return state.body.status === "recorded" ? state.body : undefined;
    });
    const hang = randomUUID();
    const hangBody = { provider: "claude", prompt: `mid-run ${hang} #hang` };
    assert.equal((await invoke(node("a"), hang, hangBody)).status, 202);
    await waitFor("the agent to start", () => (startsOf(hang) === 1 ? true : undefined));

    pg.stopServer("fast");
    const during = [randomUUID(), randomUUID()];
    const failed = await Promise.all([
      invoke(node("a"), during[0]!, { provider: "claude", prompt: `during ${during[0]}` }),
      invoke(node("b"), during[1]!, { provider: "claude", prompt: `during ${during[1]}` }),
      stateOf(node("b"), done),
      call(node("a"), "POST", "/v1/stages", { body: buildManifest(fullBundleFiles(), "fleet-outage", "r1").manifest }),
    ]);
    for (const f of failed) {
      assert.equal(f.status, 503, f.text);
      assert.equal(f.body.code, "storage-unavailable", f.text);
    }
    // A load balancer asking /readyz takes both nodes out while the database is gone...
    for (const name of ["a", "b"] as const) {
      const ready = await waitFor(`node ${name} to say it is not ready`, async () => {
        const r = await call(node(name), "GET", "/readyz");
        return r.status === 503 ? r : undefined;
      });
      assert.equal(ready.body.code, "storage-unavailable", ready.text);
    }
    pg.startServer();
    // ...and back in once it returns.
    for (const name of ["a", "b"] as const) {
      await waitFor(`node ${name} to be ready again`, async () => ((await call(node(name), "GET", "/readyz")).status === 200 ? true : undefined), READY_MS, 100);
    }

    // Both nodes serve again once the database is back (pool and owner lock reconnect).
    for (const [i, name] of (["a", "b"] as const).entries()) {
      const key = during[i]!;
      const reply = await waitFor(`node ${name} to take new runs`, async () => {
        const r = await invoke(node(name), key, { provider: "claude", prompt: `during ${key}` });
        return r.status === 503 ? undefined : r;
      }, 15_000, 100);
      assert.equal(reply.status, 202, reply.text);
    }
    for (const key of during) {
      await waitFor("the retried run to be recorded", async () => ((await stateOf(node("a"), key)).body.status === "recorded" ? true : undefined));
      assert.equal(startsOf(key), 1, "a call refused during the outage ran exactly once after it");
    }
    // Nothing lost: the recorded run replays as before, on both nodes.
    for (const name of ["a", "b"] as const) {
      const state = await stateOf(node(name), done);
      assert.equal(state.body.status, "recorded");
      assert.equal(state.body.run_id, recorded.run_id);
      assert.deepEqual(state.body.result, recorded.result);
    }
    // The run that was going lost its owner lock with the old connection: unresolved, never re-run.
    const lost = await stateOf(node("b"), hang);
    assert.equal(lost.body.status, "unresolved");
    assert.equal((await invoke(node("b"), hang, hangBody)).body.code, "unresolved");
    assert.equal(startsOf(hang), 1);
    assert.equal(startsOf(done), 1);
  });
});
