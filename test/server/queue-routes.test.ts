/**
 * Queued invocations on one embedded node over HTTP (DESIGN.md "Queued invocations"): submit with
 * `Prefer: respond-async` → 202 queued → run → result; the node's slots bound how many agents run
 * at once (the fixture agent logs its start and end in a file outside the node); a retry of a
 * queued id; a deadline passing while queued; cancel of a queued and of a running invocation.
 */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as path from "node:path";
import { randomUUID } from "node:crypto";
import { OBSERVER, OPERATOR, json, openTestNode, type TestNode } from "../support/app-node.js";
import { tempDir } from "../support/temp.js";
import { waitFor } from "../support/wait.js";

type Reply = Awaited<ReturnType<TestNode["app"]["inject"]>>;

interface QueueNode {
  readonly node: TestNode;
  readonly gate: string;
  readonly spans: string;
  submit(key: string, body: Record<string, unknown>): Promise<Reply>;
  view(key: string): Promise<Record<string, unknown>>;
  until(key: string, status: string): Promise<Record<string, unknown>>;
  cancel(key: string): Promise<Reply>;
}

async function openQueueNode(t: { after(fn: () => unknown): void }, slots: number): Promise<QueueNode> {
  const root = tempDir("queue-routes");
  const gate = path.join(root, "gate");
  const spans = path.join(root, "spans.ndjson");
  const node = await openTestNode(root, {
    warden: {
      queue: { slots },
      agentEnv: { PATH: process.env.PATH, WARDEN_FIXTURE_STARTS: path.join(root, "starts.log"), WARDEN_FIXTURE_GATE: gate, WARDEN_FIXTURE_SPANS: spans },
    },
  });
  t.after(async () => {
    fs.writeFileSync(gate, "");
    await node.close();
    fs.rmSync(root, { recursive: true, force: true });
  });
  const view = async (key: string): Promise<Record<string, unknown>> => json((await node.app.inject({ url: `/v1/invocations/api:alice/${key}`, headers: OBSERVER })).payload);
  return {
    node,
    gate,
    spans,
    submit: (key, body) =>
      node.app.inject({ method: "POST", url: "/v1/invocations", headers: { ...OPERATOR, "idempotency-key": key, prefer: "respond-async" }, payload: body }),
    view,
    until: (key, status) =>
      waitFor(`invocation ${key} to become ${status}`, async () => {
        const v = await view(key);
        return v.status === status ? v : undefined;
      }),
    cancel: (key) => node.app.inject({ method: "POST", url: `/v1/invocations/api:alice/${key}/cancellation`, headers: OPERATOR }),
  };
}

interface Span {
  readonly event: "start" | "end";
  readonly pid: number;
  readonly at: number;
  readonly prompt: string;
}

function spansOf(file: string): Span[] {
  if (!fs.existsSync(file)) return [];
  return fs
    .readFileSync(file, "utf8")
    .split("\n")
    .filter((l) => l !== "")
    .map((l) => JSON.parse(l) as Span);
}

/** The most agents the spans show running at once (an end before a start at the same ms). */
function maxConcurrent(spans: readonly Span[]): number {
  let running = 0;
  let most = 0;
  for (const s of [...spans].sort((a, b) => a.at - b.at || (a.event === "end" ? -1 : 1))) {
    running += s.event === "start" ? 1 : -1;
    most = Math.max(most, running);
  }
  return most;
}

describe("queued invocations over HTTP (embedded, one node)", () => {
  it("submits with respond-async (202 queued), runs each once within the node's slots, and answers a retry of a queued id", async (t) => {
    const q = await openQueueNode(t, 2);
    const keys = Array.from({ length: 6 }, () => randomUUID());
    const bodyOf = (i: number): Record<string, unknown> => ({ provider: "claude", prompt: `job ${i} #gate` });
    for (const [i, key] of keys.entries()) {
      const reply = await q.submit(key, bodyOf(i));
      assert.equal(reply.statusCode, 202, reply.payload);
      const view = json(reply.payload);
      assert.deepEqual(Object.keys(view).sort(), ["id", "queued_at", "scope", "status"]);
      assert.equal(view.status, "queued");
      assert.equal(reply.headers.location, `/v1/invocations/api%3Aalice/${key}`);
    }
    // Two start (the slots); the rest wait, held by the gate.
    await waitFor("two agents to start", () => (spansOf(q.spans).filter((s) => s.event === "start").length >= 2 ? true : undefined));
    const waiting = keys.slice(2);
    const queuedNow = json((await q.node.app.inject({ url: "/v1/invocations?status=queued", headers: OBSERVER })).payload).items as { id: string }[];
    assert.ok(queuedNow.length >= 3, `at least three still queued: ${JSON.stringify(queuedNow)}`);
    const stillQueued = waiting.find((k) => queuedNow.some((item) => item.id === k));
    assert.ok(stillQueued !== undefined);
    // A retry of a queued id with the same request: the same 202 view; another request: refused.
    const index = keys.indexOf(stillQueued);
    const retry = await q.submit(stillQueued, { ...bodyOf(index), priority: 7 });
    assert.equal(retry.statusCode, 202, retry.payload);
    assert.equal(json(retry.payload).status, "queued");
    const conflict = await q.submit(stillQueued, { provider: "claude", prompt: "another request #gate" });
    assert.equal(conflict.statusCode, 422);
    assert.equal(json(conflict.payload).code, "idempotency-conflict");
    const queuedView = await q.view(stillQueued);
    assert.equal(queuedView.status, "queued");
    assert.equal(queuedView.priority, 0, "the stored row, not the retry's priority");
    fs.writeFileSync(q.gate, "");
    for (const key of keys) {
      const recorded = await q.until(key, "recorded");
      assert.equal((recorded.result as { exit_code: number }).exit_code, 0);
    }
    const spans = spansOf(q.spans);
    const starts = spans.filter((s) => s.event === "start");
    assert.equal(starts.length, 6, "each ran exactly once");
    assert.equal(new Set(starts.map((s) => s.prompt)).size, 6);
    assert.equal(spans.filter((s) => s.event === "end").length, 6);
    assert.ok(maxConcurrent(spans) <= 2, `at most 2 agents at once, saw ${maxConcurrent(spans)}`);
    // A run's end is marked on its row just after its result is recorded.
    const view = await waitFor("the queue to count no run going", async () => {
      const v = await q.node.warden.queueView();
      return v.running === 0 ? v : undefined;
    });
    assert.equal(view.depth, 0);
    assert.equal(view.slots, 2);
  });

  it("a deadline passing while queued: expired, a known outcome, never run", async (t) => {
    const q = await openQueueNode(t, 1);
    const busy = randomUUID();
    assert.equal((await q.submit(busy, { provider: "claude", prompt: "busy #gate" })).statusCode, 202);
    await waitFor("the busy agent to start", () => (spansOf(q.spans).length >= 1 ? true : undefined));
    const late = randomUUID();
    assert.equal((await q.submit(late, { provider: "claude", prompt: "too late", deadline_s: 1 })).statusCode, 202);
    const expired = await q.until(late, "expired");
    assert.ok(typeof expired.deadline_at === "string");
    // A retry answers the outcome; the id never runs.
    const retry = await q.submit(late, { provider: "claude", prompt: "too late", deadline_s: 1 });
    assert.equal(retry.statusCode, 200);
    assert.equal(json(retry.payload).status, "expired");
    fs.writeFileSync(q.gate, "");
    await q.until(busy, "recorded");
    assert.equal((await q.view(late)).status, "expired");
    assert.equal(spansOf(q.spans).filter((s) => s.prompt === "too late").length, 0, "never run");
    const listed = json((await q.node.app.inject({ url: "/v1/invocations?status=expired", headers: OBSERVER })).payload).items as { id: string }[];
    assert.deepEqual(listed.map((i) => i.id), [late]);
  });

  it("cancel of a queued invocation: cancelled, never run; again: the same; a finished one: 409; an unknown one: 404", async (t) => {
    const q = await openQueueNode(t, 1);
    const busy = randomUUID();
    await q.submit(busy, { provider: "claude", prompt: "busy #gate" });
    await waitFor("the busy agent to start", () => (spansOf(q.spans).length >= 1 ? true : undefined));
    const waiting = randomUUID();
    assert.equal((await q.submit(waiting, { provider: "claude", prompt: "waiting" })).statusCode, 202);
    const cancelled = await q.cancel(waiting);
    assert.equal(cancelled.statusCode, 200, cancelled.payload);
    assert.equal(json(cancelled.payload).status, "cancelled");
    assert.equal(json(cancelled.payload).cancelled_by, "api:alice");
    assert.equal((await q.cancel(waiting)).statusCode, 200, "cancelling again answers the same");
    const observer = await q.node.app.inject({ method: "POST", url: `/v1/invocations/api:alice/${waiting}/cancellation`, headers: OBSERVER });
    assert.equal(observer.statusCode, 403, "observers cannot cancel");
    fs.writeFileSync(q.gate, "");
    await q.until(busy, "recorded");
    assert.equal((await q.view(waiting)).status, "cancelled");
    assert.equal(spansOf(q.spans).filter((s) => s.prompt === "waiting").length, 0, "never run");
    const finished = await q.cancel(busy);
    assert.equal(finished.statusCode, 409);
    assert.equal(json(finished.payload).code, "invocation-finished");
    const unknown = await q.cancel(randomUUID());
    assert.equal(unknown.statusCode, 404);
    assert.equal(json(unknown.payload).code, "invocation-not-found");
  });

  it("cancel of a running invocation: its agent is stopped, the journal says by whom, the outcome follows the rule", async (t) => {
    const q = await openQueueNode(t, 1);
    const key = randomUUID();
    assert.equal((await q.submit(key, { provider: "claude", prompt: "forever #hang" })).statusCode, 202);
    await waitFor("the agent to start", () => (spansOf(q.spans).length >= 1 ? true : undefined));
    const running = await q.until(key, "in_progress");
    assert.ok(typeof running.run_id === "string");
    const reply = await q.cancel(key);
    assert.equal(reply.statusCode, 200, reply.payload);
    assert.equal(json(reply.payload).status, "in_progress");
    // Stopped between tool calls (none was open): a known outcome, recorded as stopped.
    const recorded = await q.until(key, "recorded");
    const result = recorded.result as { exit_code: number | null; stopped?: unknown };
    assert.deepEqual(result.stopped, { reason: "cancelled", by: "api:alice" });
    assert.equal(result.exit_code, null);
    const journal = (await q.node.app.inject({ url: `/v1/runs/${String(running.run_id)}/journal`, headers: OBSERVER })).payload;
    const events = journal
      .split("\n")
      .filter((l) => l !== "")
      .map((l) => (JSON.parse(l) as { entry: { event: Record<string, unknown> } }).entry.event);
    const note = events.find((e) => e.type === "note" && "cancelled" in e);
    assert.ok(note !== undefined, "a journal entry says it was cancelled");
    assert.equal((note.cancelled as { by: string }).by, "api:alice");
    assert.equal(events.at(-1)?.type, "run.terminated");
    assert.equal(events.at(-1)?.reason, "stopped");
    const verification = json((await q.node.app.inject({ url: `/v1/runs/${String(running.run_id)}/verification`, headers: OBSERVER })).payload);
    assert.equal(verification.ok, true);
    assert.equal(verification.requires_reconciliation, false);
  });
});
