/**
 * The Overview's list of a fleet's live nodes, in a real Chromium: two `warden serve --postgres`
 * processes on one real PostgreSQL are both listed (host, pid, URL) on either node's console;
 * kill -9 of one ends its database session and with it its owner lock, and the page, still open,
 * drops it from the list (observed, not timed).
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as path from "node:path";
import type { Browser, Page } from "playwright-core";
import { httpCall, startNode, type NodeProcess } from "../support/node.js";
import { launchChromium, seriousViolations } from "../support/browser.js";
import { startTestPostgres, type TestPostgres } from "../support/postgres.js";
import { buildConsole, fixtureAgentPath, logInWithToken, UI_WAIT_MS } from "./console-support.js";
import { tempDir } from "../support/temp.js";

const TOKEN = "console-fleet-operator-token-0123456789";

interface FleetReply {
  shared: boolean;
  nodes: { node_id: string; pid: number; url?: string; self: boolean; version?: string }[];
}

describe("the Overview lists a fleet's live nodes (two nodes on one PostgreSQL, real Chromium)", () => {
  let pg: TestPostgres;
  let root: string;
  const nodes: NodeProcess[] = [];
  let browser: Browser;
  let page: Page;

  const fleetOf = async (at: NodeProcess): Promise<FleetReply> => {
    const reply = await httpCall(at.url, TOKEN, "GET", "/v1/node");
    assert.equal(reply.status, 200, reply.text);
    return reply.body.fleet as FleetReply;
  };
  const listedPids = (): Promise<number[]> =>
    page.locator("[data-testid=fleet] tbody tr").evaluateAll((rows) => rows.map((r) => Number(r.getAttribute("data-pid"))).sort((a, b) => a - b));

  before(async () => {
    buildConsole();
    pg = await startTestPostgres();
    const url = await pg.createDatabase("console_fleet");
    root = tempDir("e2e-console-fleet");
    const agents = fixtureAgentPath(root);
    const start = (name: string): Promise<NodeProcess> =>
      startNode({ home: path.join(root, name), args: ["--postgres", url, "--log-level", "warn"], env: { WARDEN_TOKEN: TOKEN, ...agents }, timeoutMs: 90_000 });
    nodes.push(...(await Promise.all([start("a"), start("b")])));
    browser = await launchChromium();
    page = await (await browser.newContext({ viewport: { width: 1280, height: 860 } })).newPage();
  });

  after(async () => {
    await browser?.close();
    for (const node of nodes) await node.kill();
    await pg?.stop();
    if (root !== undefined) fs.rmSync(root, { recursive: true, force: true });
  });

  it("lists both nodes on either node, then drops the one killed with SIGKILL", async () => {
    const [a, b] = nodes as [NodeProcess, NodeProcess];
    // Over the API first: each node lists both, itself marked, with the URL it announced.
    for (const at of [a, b]) {
      const fleet = await fleetOf(at);
      assert.equal(fleet.shared, true);
      assert.deepEqual(fleet.nodes.map((n) => n.pid).sort((x, y) => x - y), [a.child.pid!, b.child.pid!].sort((x, y) => x - y));
      assert.deepEqual(fleet.nodes.filter((n) => n.self).map((n) => n.url), [at.url]);
      assert.deepEqual(fleet.nodes.map((n) => n.url).sort(), [a.url, b.url].sort());
      assert.ok(fleet.nodes.every((n) => typeof n.version === "string"));
    }

    await logInWithToken(page, a.url, TOKEN);
    await page.getByTestId("fleet").waitFor({ timeout: UI_WAIT_MS });
    assert.deepEqual(await listedPids(), [a.child.pid!, b.child.pid!].sort((x, y) => x - y));
    const selfRow = page.locator(`[data-testid=fleet] tr[data-pid="${a.child.pid!}"]`);
    assert.match((await selfRow.textContent()) ?? "", /this node/);
    assert.match((await selfRow.textContent()) ?? "", new RegExp(a.url.replace(/[.]/g, "\\.")));
    if (process.env.WARDEN_CONSOLE_SCREENSHOTS !== undefined) await page.screenshot({ path: path.join(process.env.WARDEN_CONSOLE_SCREENSHOTS, "overview-fleet.png") });
    assert.deepEqual(await seriousViolations(page), []);

    // No shutdown at all: the node's database session ends with its process, and its lock with it.
    await page.evaluate("window.marker = 1");
    await b.kill();
    await page.locator(`[data-testid=fleet] tr[data-pid="${b.child.pid!}"]`).waitFor({ state: "detached", timeout: UI_WAIT_MS });
    assert.deepEqual(await listedPids(), [a.child.pid!]);
    assert.equal(await page.evaluate("window.marker"), 1, "the open page followed, no reload");
    assert.deepEqual((await fleetOf(a)).nodes.map((n) => n.pid), [a.child.pid!]);
  });
});
