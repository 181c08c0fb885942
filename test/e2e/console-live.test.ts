/**
 * The console's live views of work in flight, in a real Chromium against a real `warden serve`:
 * the tail of an agent's stderr on its run page while the run runs (the fixture agent writes
 * known lines, then waits at a gate), and an upload driven chunk by chunk through the client API
 * shown with its progress on Bundles and counted on the Overview until it commits. Plus the
 * output route's bounds over HTTP: whole lines, the window's limits, no path out of the node's
 * output directory.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as path from "node:path";
import { randomBytes, randomUUID } from "node:crypto";
import type { Browser, Page } from "playwright-core";
import { WardenClient } from "../../src/client/client.js";
import { buildManifest } from "../delivery/manifest-fixtures.js";
import { fullBundleFiles } from "../providers/helpers.js";
import { httpCall, startNode, type HttpCallOptions, type NodeProcess } from "../support/node.js";
import { launchChromium, seriousViolations } from "../support/browser.js";
import { waitFor } from "../support/wait.js";
import { buildConsole, FIXTURE_PROVIDER_ARGS, fixtureAgentPath, logInWithToken, UI_WAIT_MS } from "./console-support.js";
import { tempDir } from "../support/temp.js";

const OPERATOR_TOKEN = "console-live-operator-token-0123456789";
const OBSERVER_TOKEN = "console-live-observer-token-0123456789";

describe("the console's live views: agent output and uploads in progress (real Chromium, real node)", () => {
  let root: string;
  let gate: string;
  let shots: string | undefined;
  let node: NodeProcess;
  let browser: Browser;
  let page: Page;

  const call = (method: string, route: string, options: HttpCallOptions = {}) => httpCall(node.url, OPERATOR_TOKEN, method, route, options);
  const ui = (p: string): string => `${node.url}/ui${p}`;

  before(async () => {
    buildConsole();
    root = tempDir("e2e-console-live");
    gate = path.join(root, "gate");
    shots = process.env.WARDEN_CONSOLE_SCREENSHOTS;
    const workspace = path.join(root, "workspace");
    fs.mkdirSync(workspace);
    node = await startNode({
      home: path.join(root, "home"),
      args: [...FIXTURE_PROVIDER_ARGS, "--workspace", `main=${workspace}`, "--log-level", "warn"],
      env: { WARDEN_TOKEN: OPERATOR_TOKEN, WARDEN_OBSERVER_TOKEN: OBSERVER_TOKEN, WARDEN_FIXTURE_GATE: gate, ...fixtureAgentPath(root) },
      timeoutMs: 90_000,
    });
    browser = await launchChromium();
    page = await (await browser.newContext({ viewport: { width: 1280, height: 860 } })).newPage();
    await logInWithToken(page, node.url, OPERATOR_TOKEN);
  });

  after(async () => {
    if (gate !== undefined) fs.writeFileSync(gate, "");
    await browser?.close();
    await node?.stop();
    if (root !== undefined) fs.rmSync(root, { recursive: true, force: true });
  });

  it("says on the Overview that an embedded node is a single node", async () => {
    const fleet = (await call("GET", "/v1/node")).body.fleet as { shared: boolean; nodes: { pid: number; url: string; self: boolean }[] };
    assert.equal(fleet.shared, false);
    assert.deepEqual(fleet.nodes.map((n) => [n.pid, n.url, n.self]), [[node.child.pid, node.url, true]]);
    await page.goto(ui("/"));
    assert.match((await page.getByTestId("single-node").textContent()) ?? "", /A single node/);
  });

  it("shows the last lines of the agent's stderr on the run page while it runs, and after", async () => {
    const id = randomUUID();
    const reply = await call("POST", "/v1/invocations", { headers: { "idempotency-key": id }, body: { provider: "claude", prompt: "diagnose #noisy #gate" } });
    assert.equal(reply.status, 202, JSON.stringify(reply.body));
    const runId = String(reply.body.run_id);
    await page.goto(ui(`/invocations/api%3Aoperator/${id}`));
    const stderr = page.getByTestId("stderr");
    await waitFor("the agent's stderr on the page", async () => (/fixture diagnostic line 2/.test((await stderr.textContent().catch(() => "")) ?? "") ? true : undefined), UI_WAIT_MS);
    // Held at the gate: what the page shows was read while the run runs.
    assert.equal((await call("GET", `/v1/invocations/api:operator/${id}`)).body.status, "in_progress");
    assert.ok(await page.locator("p .status-in_progress").isVisible());
    assert.equal(await stderr.textContent(), "fixture diagnostic line 0\nfixture diagnostic line 1\nfixture diagnostic line 2\n");
    fs.writeFileSync(gate, "");
    await page.locator("p .status-recorded").waitFor({ timeout: UI_WAIT_MS });
    // (before stdout is unfolded: the fixture's stdout names its working directory, a path of this machine)
    if (shots !== undefined) {
      // Centred, not just in view: the timeline above it grew taller once its notes became words.
      await page.evaluate(`document.getElementById("output-title").scrollIntoView({ block: "center" })`);
      await page.screenshot({ path: path.join(shots, "run-output.png") });
    }
    await page.getByText("stdout (the event stream the timeline shows)").click();
    await waitFor("stdout's last line, the result", async () => (/"type":"result"/.test((await page.getByTestId("stdout").textContent()) ?? "") ? true : undefined), UI_WAIT_MS);
    assert.deepEqual(await seriousViolations(page), []);

    // The route: a window of the end, cut to whole lines; readable by an observer.
    const full = await call("GET", `/v1/runs/${runId}/output/stderr`);
    assert.equal(full.status, 200, full.text);
    assert.deepEqual(full.body, { stream: "stderr", size: 78, offset: 0, text: "fixture diagnostic line 0\nfixture diagnostic line 1\nfixture diagnostic line 2\n" });
    const window = await httpCall(node.url, OBSERVER_TOKEN, "GET", `/v1/runs/${runId}/output/stderr?tail=30`);
    assert.equal(window.status, 200, window.text);
    assert.deepEqual(window.body, { stream: "stderr", size: 78, offset: 52, text: "fixture diagnostic line 2\n" });
    for (const [route, code] of [
      [`/v1/runs/${runId}/output/stderr?tail=0`, 400],
      [`/v1/runs/${runId}/output/stderr?tail=65537`, 400],
      [`/v1/runs/${runId}/output/journal`, 400],
      [`/v1/runs/..%2F..%2Fwarden.json/output/stdout`, 400],
      [`/v1/runs/${randomUUID()}/output/stdout`, 404],
    ] as const) {
      const refused = await call("GET", route);
      assert.equal(refused.status, code, `${route}: ${refused.text}`);
      assert.equal(typeof refused.body.code, "string");
    }
    assert.equal((await call("GET", `/v1/runs/${randomUUID()}/output/stdout`)).body.code, "run-output-not-found");
  });

  it("shows an upload held mid-way with its progress on Bundles and the Overview, live, until it commits", async () => {
    const client = new WardenClient({ url: node.url, token: OPERATOR_TOKEN });
    const data = randomBytes(300_000);
    data[0] = 0; // no executable's magic bytes, which the commit below would refuse
    const { manifest, blobs } = buildManifest([...fullBundleFiles(), { path: "data/model.bin", content: data }], "upload-demo", "r1");
    const begun = await client.beginStage(manifest);
    assert.ok(!("committed" in begun && begun.committed));
    const stageId = begun.stage_id;
    const declared = begun.missing.reduce((n, m) => n + m.byte_len, 0);
    const big = begun.missing.find((m) => m.byte_len === data.byteLength)!;
    await client.uploadChunk(stageId, big.digest, 0, data.subarray(0, 100_000));

    await page.goto(ui("/"));
    await waitFor("the upload counted on the Overview", async () => ((await page.getByTestId("upload-count").textContent()) === "1" ? true : undefined), UI_WAIT_MS);
    await page.goto(ui("/bundles"));
    const row = page.locator(`li[data-stage="${stageId}"]`);
    const progress = row.locator("progress");
    await progress.waitFor({ timeout: UI_WAIT_MS });
    assert.equal(await progress.getAttribute("max"), String(declared));
    assert.equal(await progress.getAttribute("value"), "100000");
    assert.match((await row.textContent()) ?? "", /upload-demo@r1/);
    assert.deepEqual(await seriousViolations(page), []);

    // More bytes arrive while the page stays open: it follows without a reload.
    await page.evaluate("window.marker = 7");
    await client.uploadChunk(stageId, big.digest, 100_000, data.subarray(100_000, 180_000));
    await waitFor("the page to show 180,000 bytes", async () => ((await progress.getAttribute("value")) === "180000" ? true : undefined), UI_WAIT_MS);
    if (shots !== undefined) await page.screenshot({ path: path.join(shots, "uploads.png") });

    await client.uploadChunk(stageId, big.digest, 180_000, data.subarray(180_000));
    for (const m of begun.missing.filter((m) => m.digest !== big.digest)) await client.uploadChunk(stageId, m.digest, 0, blobs.get(m.digest as `sha256:${string}`)!);
    await client.commitStage(stageId);
    await row.waitFor({ state: "detached", timeout: UI_WAIT_MS });
    await page.getByRole("heading", { name: "upload-demo" }).waitFor({ timeout: UI_WAIT_MS });
    assert.equal(await page.evaluate("window.marker"), 7, "no full-page reload");
    assert.deepEqual(await client.listStages(), []);
    client.close();
  });
});
