/**
 * The console's Queue page (submitted invocations waiting for a node with room; not the
 * Invocations page's Unresolved tab) in a real Chromium against a real `warden serve`, and the
 * queue's figures in `GET /v1/node` and `/metrics`. Invocations that require a label the node does
 * not have stay queued (none is eligible here), so what the page shows does not race the node's
 * dequeue: they appear while the page is open (it polls), the Cancel button cancels one (the
 * invocation then reads `cancelled`, and it never runs), an observer sees no button. One
 * invocation the node can run is started from the queue, and its wait is counted.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as path from "node:path";
import { randomUUID } from "node:crypto";
import type { Browser, Page } from "playwright-core";
import { fixtureAgents, httpCall, metricSum, startNode, type HttpReply, type NodeProcess } from "../support/node.js";
import { launchChromium, seriousViolations } from "../support/browser.js";
import { readQueueLog } from "../support/queue-log.js";
import { waitFor } from "../support/wait.js";
import { buildConsole, logInWithToken, UI_WAIT_MS } from "./console-support.js";
import { tempDir } from "../support/temp.js";

const OPERATOR_TOKEN = "console-queue-page-operator-token-0123456789";
const OBSERVER_TOKEN = "console-queue-page-observer-token-0123456789";
/** A label no node here has: an invocation requiring it waits until cancelled. */
const UNMET = { labels: { pool: "nowhere" } };

describe("the console's Queue page and the queue's figures (real Chromium, real node)", () => {
  let root: string;
  let log: string;
  let node: NodeProcess;
  let browser: Browser;
  let page: Page;

  const call = (method: string, route: string, body?: unknown, headers: Record<string, string> = {}): Promise<HttpReply> =>
    httpCall(node.url, OPERATOR_TOKEN, method, route, { headers, ...(body === undefined ? {} : { body }) });
  const submit = (id: string, extra: Record<string, unknown> = {}): Promise<HttpReply> =>
    call("POST", "/v1/invocations", { provider: "claude", prompt: `job=${id} queued for the page`, ...extra }, { "idempotency-key": id, prefer: "respond-async" });
  const row = (id: string) => page.locator(`[data-testid="queued-row"][data-key="api:operator/${id}"]`);

  before(async () => {
    buildConsole();
    root = tempDir("e2e-console-queue-page");
    log = path.join(root, "agents.log");
    const workspace = path.join(root, "workspace");
    fs.mkdirSync(workspace);
    node = await startNode({
      home: path.join(root, "home"),
      args: ["--provider", `claude=${path.join(fixtureAgents, "queue-agent.mjs")}`, "--workspace", `main=${workspace}`, "--log-level", "warn"],
      env: { WARDEN_TOKEN: OPERATOR_TOKEN, WARDEN_OBSERVER_TOKEN: OBSERVER_TOKEN, WARDEN_FIXTURE_QUEUE_LOG: log },
      config: { queue: { slots: 2 } },
      timeoutMs: 90_000,
    });
    browser = await launchChromium();
    page = await (await browser.newContext({ viewport: { width: 1280, height: 860 } })).newPage();
    await logInWithToken(page, node.url, OPERATOR_TOKEN);
  });

  after(async () => {
    await browser?.close();
    await node?.stop();
    if (root !== undefined) fs.rmSync(root, { recursive: true, force: true });
  });

  it("lists waiting invocations as they are submitted, and cancels one with its button", async () => {
    const [first, second, third] = [randomUUID(), randomUUID(), randomUUID()];
    for (const id of [first, second]) assert.equal((await submit(id, UNMET)).status, 202);
    await page.getByRole("link", { name: "Queue" }).click();
    await page.getByRole("heading", { name: "Queue", level: 1 }).waitFor({ timeout: UI_WAIT_MS });
    await row(first).waitFor({ timeout: UI_WAIT_MS });
    await row(second).waitFor({ timeout: UI_WAIT_MS });
    // Live: one submitted while the page is open shows up without a reload.
    assert.equal((await submit(third, UNMET)).status, 202);
    await row(third).waitFor({ timeout: UI_WAIT_MS });
    await waitFor("the depth of 3 on the page", async () => ((await page.getByTestId("queue-depth").textContent()) === "3" ? true : undefined), UI_WAIT_MS);
    assert.equal(await page.getByTestId("queue-slots").textContent(), "2");
    assert.deepEqual(await seriousViolations(page), []);

    await row(second).getByRole("button", { name: `Cancel api:operator/${second}` }).click();
    await page.getByTestId("cancelled").waitFor({ timeout: UI_WAIT_MS });
    await row(second).waitFor({ state: "detached", timeout: UI_WAIT_MS });
    const state = await call("GET", `/v1/invocations/api:operator/${second}`);
    assert.equal(state.body.status, "cancelled", state.text);
    assert.equal(await row(first).count(), 1, "the others still wait");
    assert.equal(await row(third).count(), 1);
    assert.ok(!readQueueLog(log).some((l) => l.job === second), "the cancelled invocation never ran");
  });

  it("GET /v1/node and /metrics count the queue per principal, and the wait of a run this node started from it", async () => {
    const ran = randomUUID();
    assert.equal((await submit(ran)).status, 202);
    await waitFor("the queued run to be recorded", async () => ((await call("GET", `/v1/invocations/api:operator/${ran}`)).body.status === "recorded" ? true : undefined));
    assert.equal(readQueueLog(log).filter((l) => l.ev === "start" && l.job === ran).length, 1);

    type Summary = {
      slots: number;
      depth: number;
      running: number;
      principals: { principal: string; queued: number; running: number; oldest_queued_at?: string }[];
      waits: { count: number; sum_s: number; max_s: number };
    };
    // The queue row is marked ended just after the result is recorded: wait until it no longer counts as running.
    const summary = await waitFor("the queue to count no run going", async () => {
      const queue = (await call("GET", "/v1/node")).body.queue as Summary;
      return queue.running === 0 ? queue : undefined;
    });
    // Two of the first test's three still wait (the third was cancelled), none runs.
    assert.equal(summary.slots, 2);
    assert.equal(summary.depth, 2);
    assert.equal(summary.running, 0);
    assert.equal(summary.principals.length, 1);
    assert.equal(summary.principals[0]!.principal, "api:operator");
    assert.equal(summary.principals[0]!.queued, 2);
    assert.ok(summary.principals[0]!.oldest_queued_at !== undefined);
    assert.equal(summary.waits.count, 1);
    assert.ok(summary.waits.max_s >= 0 && summary.waits.sum_s === summary.waits.max_s, JSON.stringify(summary.waits));

    const metrics = (await call("GET", "/metrics")).text;
    assert.match(metrics, /^warden_queue_depth\{principal="api:operator"\} 2$/m);
    assert.match(metrics, /^warden_queue_slots 2$/m);
    assert.match(metrics, /^# TYPE warden_queue_wait_seconds histogram$/m);
    assert.match(metrics, /^warden_queue_wait_seconds_bucket\{principal="api:operator",le="\+Inf"\} 1$/m);
    assert.equal(metricSum(metrics, "warden_queue_wait_seconds_count"), 1);
    assert.ok(metrics.includes('warden_queue_oldest_wait_seconds{principal="api:operator"}'), metrics);
  });

  it("shows an observer the queue without a Cancel button", async () => {
    const context = await browser.newContext({ viewport: { width: 1280, height: 860 } });
    try {
      const observer = await context.newPage();
      await logInWithToken(observer, node.url, OBSERVER_TOKEN);
      await observer.goto(`${node.url}/ui/queue`);
      await observer.getByTestId("queued-row").first().waitFor({ timeout: UI_WAIT_MS });
      assert.equal(await observer.getByRole("button", { name: /^Cancel / }).count(), 0);
    } finally {
      await context.close();
    }
  });
});
