/**
 * Invocations over HTTP (inject, real stores, fixture agents): the Idempotency-Key semantics
 * (400, 202, 200 + Idempotency-Replayed, 422, 409 in-progress / unresolved / reconciled), scope
 * from the token, Cache-Control on every reply, lookup without claims, listing, inspection and
 * reconciliation, journals, verification, SSE and keys.
 */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import * as fs from "node:fs";
import { randomUUID } from "node:crypto";
import * as http from "node:http";
import type { AddressInfo } from "node:net";
import { verifyJournal } from "../../src/journal/verify.js";
import { OBSERVER, OPERATOR, json, logSink, openTestNode, starts, useTestNode, type TestNode } from "../support/app-node.js";
import { tempDir } from "../support/temp.js";
import { READY_MS, waitFor } from "../support/wait.js";

type Reply = Awaited<ReturnType<TestNode["app"]["inject"]>>;

describe("invocation routes", () => {
  const node = useTestNode("server-invocations");

  const post = (key: string | undefined, body: unknown, extra: Record<string, string> = {}): Promise<Reply> =>
    node.app.inject({
      method: "POST",
      url: "/v1/invocations",
      headers: { ...OPERATOR, ...(key === undefined ? {} : { "idempotency-key": key }), ...extra },
      payload: body as Record<string, unknown>,
    });
  const get = (url: string, headers: Record<string, string> = OBSERVER): Promise<Reply> => node.app.inject({ url, headers });

  async function until(key: string, status: string): Promise<Record<string, unknown>> {
    return waitFor(`${key} to become ${status}`, async () => {
      const view = json((await get(`/v1/invocations/api:alice/${key}`)).payload);
      return view.status === status ? view : undefined;
    });
  }

  it("runs once, then replays the recorded result with Idempotency-Replayed: true", async () => {
    const key = randomUUID();
    const body = { provider: "claude", prompt: "replay me" };
    const startsBefore = starts(node.startsFile);
    const fresh = await post(key, body);
    assert.equal(fresh.statusCode, 202, fresh.payload);
    assert.equal(fresh.headers["cache-control"], "no-store");
    const started = json(fresh.payload);
    assert.deepEqual(Object.keys(started).sort(), ["id", "run_id", "scope", "status"]);
    assert.equal(started.status, "running");
    assert.equal(started.scope, "api:alice");
    assert.equal(started.id, key);
    assert.equal(fresh.headers.location, `/v1/invocations/api%3Aalice/${key}`);

    const recorded = await until(key, "recorded");
    assert.equal(recorded.run_id, started.run_id);
    const replay = await post(key.toUpperCase(), body);
    assert.equal(replay.statusCode, 200);
    assert.equal(replay.headers["idempotency-replayed"], "true");
    assert.equal(replay.headers["cache-control"], "no-store");
    const view = json(replay.payload);
    assert.equal(view.status, "recorded");
    assert.equal(view.run_id, started.run_id);
    assert.deepEqual(view.result, recorded.result);
    assert.equal((view.result as { exit_code: number }).exit_code, 0);
    // A quoted key (RFC 8941 sf-string) is the same key.
    const quoted = await post(`"${key}"`, body);
    assert.equal(quoted.statusCode, 200);
    assert.equal(starts(node.startsFile), startsBefore + 1, "the agent ran exactly once");

    const conflict = await post(key, { ...body, prompt: "something else" });
    assert.equal(conflict.statusCode, 422);
    assert.equal(json(conflict.payload).code, "idempotency-conflict");
    assert.equal(conflict.headers["cache-control"], "no-store");
  });

  it("answers the finished result within Prefer: wait, without the replay mark", async () => {
    const key = randomUUID();
    const res = await post(key, { provider: "kimi", prompt: "quick" }, { prefer: "respond-async, wait=20" });
    assert.equal(res.statusCode, 200, res.payload);
    assert.equal(res.headers["idempotency-replayed"], undefined);
    const view = json(res.payload);
    assert.equal(view.status, "recorded");
    assert.equal(view.agent, "kimi");
  });

  it("409 in-progress while running, 409 unresolved once cut, 409 reconciled after review", async () => {
    const key = randomUUID();
    const body = { provider: "claude", prompt: "#hang", timeout_s: 1 };
    const fresh = await post(key, body);
    assert.equal(fresh.statusCode, 202);
    const runId = json(fresh.payload).run_id as string;
    const busy = await post(key, body);
    assert.equal(busy.statusCode, 409);
    assert.equal(busy.headers["cache-control"], "no-store");
    const busyProblem = json(busy.payload);
    assert.equal(busyProblem.code, "in-progress");
    assert.equal(busyProblem.run_id, runId);
    const running = json((await get(`/v1/invocations/api:alice/${key}`)).payload);
    assert.equal(running.status, "in_progress");

    // Live events of the run end when it terminates (timeout).
    const events = await get(`/v1/runs/${runId}/events`);
    assert.equal(events.statusCode, 200);
    assert.match(String(events.headers["content-type"]), /^text\/event-stream/);
    const messages = events.payload.split("\n\n").filter((m) => m.includes("data: "));
    const entries = messages.filter((m) => m.startsWith("id: ")).map((m) => JSON.parse(m.split("data: ")[1]!) as { entry: { seq: number; event: { type: string } } });
    assert.deepEqual(entries.map((e) => e.entry.seq), entries.map((_, i) => i));
    assert.equal(entries[0]?.entry.event.type, "run.started");
    assert.equal(entries.at(-1)?.entry.event.type, "run.terminated");
    assert.match(messages.at(-1)!, /^event: end\ndata: \{"reason":"terminated"\}/);

    const unresolved = await until(key, "unresolved");
    assert.equal(unresolved.run_id, runId);
    const refused = await post(key, body);
    assert.equal(refused.statusCode, 409);
    assert.equal(json(refused.payload).code, "unresolved");
    // The problem names why, as the same list the invocation's own view gives.
    assert.deepEqual(json(refused.payload).reasons, unresolved.reasons);
    assert.ok(Array.isArray(unresolved.reasons) && unresolved.reasons.length > 0);

    const verification = json((await get(`/v1/runs/${runId}/verification`)).payload);
    assert.equal(verification.ok, true);
    assert.equal(verification.requires_reconciliation, true);

    const inspection = await get(`/v1/invocations/api:alice/${key}/inspection`);
    assert.equal(inspection.statusCode, 200);
    assert.equal(inspection.headers["cache-control"], "no-store");
    const snapshotHash = json(inspection.payload).snapshot_hash as string;
    const review = {
      snapshot_hash: snapshotHash,
      outcome: "no_effects",
      rationale: "the agent hung before any tool call; its process group is gone",
      evidence: [{ reference: "journal", sha256: "sha256:452b7b642e325cb2b5b20ac28536ada8b0ad312217a98ab7ff23330603b63126" }],
      effects_stopped: true,
    };
    const stale = await node.app.inject({
      method: "POST",
      url: `/v1/invocations/api:alice/${key}/reconciliation`,
      headers: OPERATOR,
      payload: { ...review, snapshot_hash: `sha256:${"2".repeat(64)}` },
    });
    assert.equal(stale.statusCode, 409);
    assert.equal(json(stale.payload).code, "snapshot-stale");
    // A review with several broken rules: one problem document lists every one of them.
    const broken = await node.app.inject({
      method: "POST",
      url: `/v1/invocations/api:alice/${key}/reconciliation`,
      headers: OPERATOR,
      payload: { ...review, outcome: "done", evidence: [{ reference: "journal", sha256: `sha256:${"0".repeat(64)}` }], effects_stopped: false },
    });
    assert.equal(broken.statusCode, 400);
    const problem = json(broken.payload);
    assert.equal(problem.code, "review-invalid");
    assert.deepEqual(
      (problem.problems as { field: string; code: string }[]).map((p) => `${p.field} ${p.code}`),
      ["outcome review-invalid-outcome", "evidence[0].sha256 review-evidence-placeholder", "effects_stopped review-effects-not-stopped"],
    );
    const observerTry = await node.app.inject({ method: "POST", url: `/v1/invocations/api:alice/${key}/reconciliation`, headers: OBSERVER, payload: review });
    assert.equal(observerTry.statusCode, 403);
    const signed = await node.app.inject({ method: "POST", url: `/v1/invocations/api:alice/${key}/reconciliation`, headers: OPERATOR, payload: review });
    assert.equal(signed.statusCode, 201, signed.payload);
    const receipt = json(signed.payload).receipt as Record<string, unknown>;
    assert.equal(receipt.operator, "alice");
    const same = await node.app.inject({ method: "POST", url: `/v1/invocations/api:alice/${key}/reconciliation`, headers: OPERATOR, payload: review });
    assert.equal(same.statusCode, 200);
    assert.deepEqual(json(same.payload).receipt, receipt);
    const different = await node.app.inject({
      method: "POST",
      url: `/v1/invocations/api:alice/${key}/reconciliation`,
      headers: OPERATOR,
      payload: { ...review, outcome: "failed" },
    });
    assert.equal(different.statusCode, 409);
    assert.equal(json(different.payload).code, "reconciliation-conflict");

    const closed = await post(key, body);
    assert.equal(closed.statusCode, 409);
    assert.equal(json(closed.payload).code, "reconciled");
    const view = json((await get(`/v1/invocations/api:alice/${key}`)).payload);
    assert.equal(view.status, "reconciled");
    assert.deepEqual(view.receipt, receipt);
  });

  it("looks up without creating a claim, lists with a status filter and a cursor", async () => {
    const unknown = randomUUID();
    const missing = await get(`/v1/invocations/api:alice/${unknown}`);
    assert.equal(missing.statusCode, 404);
    assert.equal(json(missing.payload).code, "invocation-not-found");
    assert.equal(missing.headers["cache-control"], "no-store");
    const again = await get(`/v1/invocations/api:alice/${unknown}`);
    assert.equal(again.statusCode, 404, "a lookup never creates a claim");
    // An observer cannot start runs, and its scope would be its own.
    const observerPost = await node.app.inject({
      method: "POST",
      url: "/v1/invocations",
      headers: { ...OBSERVER, "idempotency-key": unknown },
      payload: { provider: "claude", prompt: "x" },
    });
    assert.equal(observerPost.statusCode, 403);
    assert.equal(json(observerPost.payload).code, "forbidden");
    assert.equal(observerPost.headers["cache-control"], "no-store");
    const anonymous = await node.app.inject({ url: `/v1/invocations/api:alice/${unknown}` });
    assert.equal(anonymous.statusCode, 401);
    assert.equal(anonymous.headers["cache-control"], "no-store");
    const bundles = await get("/v1/bundles");
    assert.equal(bundles.headers["cache-control"], undefined, "only invocation replies are marked no-store");

    const all = json((await get("/v1/invocations")).payload).items as { id: string; status: string }[];
    assert.ok(all.length >= 3);
    assert.ok(!all.some((i) => i.id === unknown));
    const recorded = json((await get("/v1/invocations?status=recorded")).payload).items as { status: string }[];
    assert.ok(recorded.length >= 2 && recorded.every((i) => i.status === "recorded"));
    const seen: string[] = [];
    let cursor: string | undefined;
    do {
      const page = json((await get(`/v1/invocations?limit=1${cursor === undefined ? "" : `&cursor=${encodeURIComponent(cursor)}`}`)).payload);
      const items = page.items as { id: string }[];
      assert.ok(items.length <= 1);
      seen.push(...items.map((i) => i.id));
      cursor = page.cursor as string | undefined;
    } while (cursor !== undefined);
    assert.deepEqual(seen, all.map((i) => i.id));
  });

  it("serves journals as ndjson that verifies with the published keys", async () => {
    const key = randomUUID();
    const done = json((await post(key, { provider: "claude", prompt: "journal" }, { prefer: "wait=20" })).payload);
    const runId = done.run_id as string;
    const journal = await get(`/v1/runs/${runId}/journal`);
    assert.equal(journal.statusCode, 200);
    assert.match(String(journal.headers["content-type"]), /^application\/x-ndjson/);
    const keys = json((await get("/v1/keys")).payload).keys as { key_id: string; public_key: string }[];
    assert.equal(keys.length, 1);
    const report = verifyJournal(journal.rawPayload, keys, { runId });
    assert.equal(report.ok, true);
    const verification = json((await get(`/v1/runs/${runId}/verification`)).payload);
    assert.deepEqual(
      { ok: verification.ok, entries: verification.entries, requires_reconciliation: verification.requires_reconciliation },
      { ok: true, entries: report.entries, requires_reconciliation: false },
    );
    // Events of a finished run: every entry, then the end.
    const events = await get(`/v1/runs/${runId}/events`, { ...OBSERVER, "last-event-id": "2" });
    const ids = [...events.payload.matchAll(/^id: (\d+)$/gm)].map((m) => Number(m[1]));
    assert.deepEqual(ids, Array.from({ length: report.entries - 3 }, (_, i) => i + 3));
    // A run's replies change while it runs: none may be cached, a problem about a run included.
    const unknown = await get(`/v1/runs/${randomUUID()}/journal`);
    assert.equal(unknown.statusCode, 404);
    for (const reply of [journal, events, unknown, await get(`/v1/runs/${runId}/verification`)]) {
      assert.equal(reply.headers["cache-control"], "no-store");
    }
  });

  it("counts requests, invocations and journal appends in /metrics", async () => {
    const text = (await get("/metrics")).payload;
    assert.match(text, /^warden_http_requests_total\{method="POST",route="\/v1\/invocations",status="202"\} \d+$/m);
    assert.match(text, /^warden_invocations_total\{outcome="replayed"\} [1-9]\d*$/m);
    assert.match(text, /^warden_invocations_total\{outcome="started"\} [1-9]\d*$/m);
    const appends = Number(/^warden_journal_appends_total (\d+)$/m.exec(text)?.[1]);
    assert.ok(appends >= 10);
    assert.match(text, /^# TYPE warden_runs_active gauge$/m);
    // The home's room, read at the scrape: what a new run is refused below (507 capacity-exhausted).
    assert.match(text, /^# TYPE warden_home_available_bytes gauge$/m);
    assert.ok(Number(/^warden_home_available_bytes (\d+)$/m.exec(text)?.[1]) > 0, text);
    assert.ok(Number(/^warden_home_free_files (\d+)$/m.exec(text)?.[1]) > 0, text);
    assert.match(text, /^warden_runs_total\{outcome="recorded"\} [1-9]\d*$/m);
    assert.match(text, /^warden_runs_total\{outcome="unresolved"\} 1$/m);
  });
});

describe("a run that ends without a recorded result", () => {
  it("says so in the node's log, naming the invocation and its run: its caller may be long gone", async () => {
    const root = tempDir("server-invocations-log");
    const log = logSink();
    const sink = log.stream;
    const node = await openTestNode(root, { settings: { logLevel: "warn" }, server: { logStream: sink } });
    try {
      const key = randomUUID();
      const res = await node.app.inject({
        method: "POST",
        url: "/v1/invocations",
        headers: { ...OPERATOR, "idempotency-key": key, prefer: "wait=20" },
        payload: { provider: "claude", prompt: "die #kill" },
      });
      assert.equal(json(res.payload).code, "unresolved", res.payload);
      const runId = json(res.payload).run_id as string;
      const line = log.text().split("\n").find((l) => l.includes("run ended without a recorded result"));
      assert.ok(line !== undefined, `no warning among: ${log.text()}`);
      const entry = JSON.parse(line) as Record<string, unknown>;
      assert.deepEqual([entry.level, entry.scope, entry.id, entry.run_id, entry.status], [40, "api:alice", key, runId, "unresolved"]);
    } finally {
      await node.close();
      fs.rmSync(root, { recursive: true, force: true });
    }
  });
});

describe("a node at its limit of active runs", () => {
  it("refuses a new id with 429 run-capacity-exhausted and claims nothing; replays still answer; a run ending frees a place", async () => {
    const root = tempDir("server-invocations-capacity");
    const node = await openTestNode(root, { warden: { limits: { activeRuns: 2 } } });
    const post = (key: string, prompt: string, extra: Record<string, unknown> = {}) =>
      node.app.inject({ method: "POST", url: "/v1/invocations", headers: { ...OPERATOR, "idempotency-key": key }, payload: { provider: "claude", prompt, ...extra } });
    try {
      const recorded = randomUUID();
      assert.equal((await post(recorded, "done", {})).statusCode, 202);
      await waitFor(`run ${recorded} to be recorded`, async () =>
        json((await node.app.inject({ url: `/v1/invocations/api:alice/${recorded}`, headers: OPERATOR })).payload).status === "recorded" ? true : undefined,
      );
      // Its place is free once its run has cleaned up after the record (materialization, run home).
      await waitFor("the recorded run to leave the active runs", () => (node.warden.activeRuns === 0 ? true : undefined), READY_MS);
      // Two runs that hang until their 2 s timeout: the node's two places.
      const hanging = [randomUUID(), randomUUID()];
      for (const key of hanging) assert.equal((await post(key, "wait #hang", { timeout_s: 2 })).statusCode, 202);
      const refusedKey = randomUUID();
      const refused = await post(refusedKey, "one too many");
      assert.equal(refused.statusCode, 429, refused.payload);
      assert.equal(json(refused.payload).code, "run-capacity-exhausted");
      const lookup = await node.app.inject({ url: `/v1/invocations/api:alice/${refusedKey}`, headers: OPERATOR });
      assert.equal(lookup.statusCode, 404, "the refused id was not claimed");
      const replay = await post(recorded, "done", {});
      assert.equal(replay.statusCode, 200, "a replay is an answer, not a run: it needs no place");
      assert.equal(replay.headers["idempotency-replayed"], "true");
      // Once the hanging runs are cut at their timeout, the refused id runs.
      const retried = await waitFor("a place for the refused id once the hanging runs timed out", async () => {
        const answer = await post(refusedKey, "one too many");
        return answer.statusCode === 429 ? undefined : answer;
      });
      assert.equal(retried.statusCode, 202, retried.payload);
    } finally {
      await node.close();
      fs.rmSync(root, { recursive: true, force: true });
    }
  });
});

describe("a node at its limit of event streams", () => {
  it("refuses one more with 429 event-streams-exhausted, and takes it once a stream closes", async () => {
    const root = tempDir("server-invocations-streams");
    const node = await openTestNode(root, { warden: { limits: { eventStreams: 2 } } });
    const opened: http.ClientRequest[] = [];
    try {
      await node.app.listen({ host: "127.0.0.1", port: 0 });
      const base = `http://127.0.0.1:${(node.app.server.address() as AddressInfo).port}`;
      const started = await node.app.inject({
        method: "POST",
        url: "/v1/invocations",
        headers: { ...OPERATOR, "idempotency-key": randomUUID() },
        payload: { provider: "claude", prompt: "watch me #hang", timeout_s: 20 },
      });
      const runId = json(started.payload).run_id as string;
      // Resolves with the status once the answer's head arrives; the stream stays open.
      const open = (): Promise<{ status: number; body: Promise<string> }> =>
        new Promise((resolve, reject) => {
          const request = http.get(`${base}/v1/runs/${runId}/events`, { headers: OPERATOR, agent: false }, (response) => {
            let text = "";
            response.setEncoding("utf8").on("data", (s: string) => (text += s));
            resolve({ status: response.statusCode ?? 0, body: new Promise((done) => response.on("end", () => done(text))) });
          });
          request.on("error", reject);
          opened.push(request);
        });
      assert.equal((await open()).status, 200);
      assert.equal((await open()).status, 200);
      const third = await open();
      assert.equal(third.status, 429);
      assert.equal(json(await third.body).code, "event-streams-exhausted");
      opened[0]!.destroy();
      const again = await waitFor("the closed stream's place to be given back", async () => {
        const answer = await open();
        return answer.status === 429 ? undefined : answer;
      });
      assert.equal(again.status, 200, "a stream that closed gave its place back");
    } finally {
      for (const request of opened) request.destroy();
      await node.close();
      fs.rmSync(root, { recursive: true, force: true });
    }
  });
});

describe("a request refused while the node cannot take it", () => {
  it("is logged once as a warning with its code, not as an error with a stack", async () => {
    const root = tempDir("server-invocations-503");
    const log = logSink();
    const node = await openTestNode(root, { settings: { logLevel: "info" }, server: { logStream: log.stream } });
    try {
      await node.warden.close();
      const refused = await node.app.inject({
        method: "POST",
        url: "/v1/invocations",
        headers: { ...OPERATOR, "idempotency-key": randomUUID() },
        payload: { provider: "claude", prompt: "too late" },
      });
      assert.equal(refused.statusCode, 503, refused.payload);
      const code = json(refused.payload).code as string;
      const lines = log.text().split("\n").filter((l) => l !== "").map((l) => JSON.parse(l) as { level: number; msg: string; code?: string; err?: unknown });
      const line = lines.find((l) => l.code === code);
      assert.equal(line?.level, 40, log.text());
      assert.equal(line?.err, undefined, "no stack trace");
      assert.deepEqual(lines.filter((l) => l.level >= 50), []);
    } finally {
      await node.close();
      fs.rmSync(root, { recursive: true, force: true });
    }
  });
});
