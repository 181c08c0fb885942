/**
 * The operator console with 10⁶ claims in the embedded store (seeded straight into SQLite, see
 * test/support/seed-claims.ts), served by a real `warden serve` and driven by a real Chromium:
 *
 * 1. time from navigation to the first row of Invocations, and of Unresolved (one unresolved run,
 *    sorted after every seeded row: a queue that scanned the rows would read 10⁶ of them first; it
 *    is read from indexes), beside the API's own time for the same page (the baseline, measured in
 *    the same run). Two console figures: the wall clock Playwright sees (navigation to the row
 *    found), and the page's own (navigation start to its rows-in-document mark);
 * 2. the page's JS heap (garbage collected before each reading) after paging forward 100 times,
 *    once warmed up by WARM_PAGES turns (the first turns grow the heap by compiled code and
 *    caches, a bounded cost), beside one page's worth of JSON; and the cold figure, from the first page;
 *    then the growth over the next 100 turns (a leak grows as much again, buffers that fill grow less)
 *    and the document's DOM nodes and event listeners after each window (a leak in the console's
 *    own code grows them).
 */
import { randomUUID } from "node:crypto";
import { existsSync, rmSync } from "node:fs";
import { join } from "node:path";
import { spawnSync } from "node:child_process";
import type { CDPSession, Page } from "playwright-core";
import { WardenClient } from "../src/client/client.js";
import { fixtureAgents, repo, startNode, type NodeProcess } from "../test/support/node.js";
import { launchChromium } from "../test/support/browser.js";
import { seedRecordedClaims } from "../test/support/seed-claims.js";
import { waitFor } from "../test/support/wait.js";
import { benchDir, fmt, median } from "./baseline.js";

const CLAIMS = 1_000_000;
const ROUNDS = 5;
const PAGES = 100;
const WARM_PAGES = 100;
const PAGE_ROWS = 50;
const TOKEN = "bench-console-operator-token-0123456789";

/** The API's time to the first item of a listing: following cursors, as the console does. */
async function apiFirstRow(client: WardenClient, status: "unresolved" | undefined): Promise<number> {
  const t0 = performance.now();
  let cursor: string | undefined;
  for (;;) {
    const page = await client.listInvocations({ limit: PAGE_ROWS, ...(status === undefined ? {} : { status }), ...(cursor === undefined ? {} : { cursor }) });
    if (page.items.length > 0) return performance.now() - t0;
    if (page.cursor === undefined) throw new Error("the listing has no row");
    cursor = page.cursor;
  }
}

/** Playwright's wall clock (navigation to the row found) and the page's own (navigation start to its rows mark). */
async function consoleFirstRow(page: Page, url: string): Promise<{ wall: number; page: number }> {
  await page.goto("about:blank");
  const t0 = performance.now();
  await page.goto(url);
  await page.locator("table.invocations tbody tr").first().waitFor({ timeout: 600_000 });
  const wall = performance.now() - t0;
  const mark = await page.evaluate(() => performance.getEntriesByName("warden:invocations-rows")[0]?.startTime);
  if (mark === undefined) throw new Error("the page did not mark its rows");
  return { wall, page: mark };
}

async function heapBytes(cdp: CDPSession): Promise<number> {
  await cdp.send("HeapProfiler.collectGarbage");
  await cdp.send("HeapProfiler.collectGarbage");
  return (await cdp.send("Runtime.getHeapUsage")).usedSize;
}

/** Documents, DOM nodes and JS event listeners alive in the page: what a leak in the console's own code would grow. */
async function domCounters(cdp: CDPSession): Promise<string> {
  const c = await cdp.send("Memory.getDOMCounters");
  return `${c.nodes} nodes, ${c.jsEventListeners} listeners, ${c.documents} documents`;
}

export default async function consoleBench(): Promise<void> {
  const built = spawnSync(process.execPath, [join(repo, "scripts", "build-console.mjs")], { cwd: repo, encoding: "utf8" });
  if (built.status !== 0) throw new Error(`building the console failed: ${built.stderr}`);
  // Seeding 10⁶ claims takes minutes: $WARDEN_BENCH_CONSOLE_HOME keeps a seeded home between runs (made on first use, never removed).
  const kept = process.env.WARDEN_BENCH_CONSOLE_HOME;
  const dir = kept ?? benchDir("console");
  const home = kept ?? join(dir, "home");
  let node: NodeProcess | undefined;
  const browser = await launchChromium();
  try {
    if (!existsSync(join(home, "claims.sqlite"))) {
      const seedStart = performance.now();
      // "api:bench" sorts before "api:operator": the unresolved run below comes after every seeded row.
      await seedRecordedClaims(home, CLAIMS, "api:bench");
      console.log(`seeded ${fmt(CLAIMS)} recorded claims in ${((performance.now() - seedStart) / 1000).toFixed(1)} s`);
    } else console.log(`reusing the seeded home in $WARDEN_BENCH_CONSOLE_HOME`);
    node = await startNode({ home, args: ["--provider", `claude=${join(fixtureAgents, "claude.mjs")}`, "--log-level", "warn"], env: { WARDEN_TOKEN: TOKEN }, timeoutMs: 120_000 });
    const client = new WardenClient({ url: node.url, token: TOKEN });
    const counts = (await client.node()).counts;
    if (counts.unresolved === 0) {
      const id = randomUUID();
      await client.invoke(id, { provider: "claude", prompt: "bench #kill" });
      await waitFor("the killed run to read unresolved", async () => ((await client.getInvocation("api:operator", id)).status === "unresolved" ? true : undefined), 60_000);
    }
    console.log(`store: ${fmt(counts.total)} claims`);

    const context = await browser.newContext({ viewport: { width: 1280, height: 860 } });
    const page = await context.newPage();
    const login = await client.consoleLogin();
    await page.goto(node.url + login.path);
    await page.getByRole("heading", { name: "Overview" }).waitFor({ timeout: 120_000 });

    for (const [label, status, path] of [
      ["Invocations", undefined, "/ui/invocations"],
      ["Unresolved", "unresolved", "/ui/invocations?status=unresolved"],
    ] as const) {
      const api: number[] = [];
      const ui: number[] = [];
      const inPage: number[] = [];
      for (let round = 0; round < ROUNDS; round++) {
        api.push(await apiFirstRow(client, status));
        const shown = await consoleFirstRow(page, node.url + path);
        ui.push(shown.wall);
        inPage.push(shown.page);
      }
      const a = median(api);
      const u = median(ui);
      console.log(
        `${label.padEnd(11)} first row: console ${fmt(u, 1)} ms (target < 500; in the page ${fmt(median(inPage), 1)} ms), API alone ${fmt(a, 1)} ms, ` +
          `console/API ${(u / a).toFixed(2)}×  (medians of ${ui.length}; console ${ui.map((v) => v.toFixed(0)).join(", ")})`,
      );
    }

    await page.goto(`${node.url}/ui/invocations`);
    await page.locator("table.invocations tbody tr").first().waitFor();
    const cdp = await context.newCDPSession(page);
    const pageJson = JSON.stringify(await client.listInvocations({ limit: PAGE_ROWS })).length;
    const nextPage = async (): Promise<void> => {
      const before = await page.locator("table.invocations tbody td.id a").first().getAttribute("href");
      await page.getByRole("link", { name: "Next page" }).click();
      await waitFor("the next page", async () => ((await page.locator("table.invocations tbody td.id a").first().getAttribute("href")) !== before ? true : undefined), 60_000, 5);
    };
    const cold = await heapBytes(cdp);
    for (let i = 0; i < WARM_PAGES; i++) await nextPage();
    const warm = await heapBytes(cdp);
    const warmDom = await domCounters(cdp);
    const t0 = performance.now();
    for (let i = 0; i < PAGES; i++) await nextPage();
    const pagingMs = (performance.now() - t0) / PAGES;
    const last = await heapBytes(cdp);
    const lastDom = await domCounters(cdp);
    // A second window of as many turns: growth that is Chromium filling its own capped buffers
    // (compiled code, timing entries) shrinks from one window to the next; a leak does not.
    for (let i = 0; i < PAGES; i++) await nextPage();
    const later = await heapBytes(cdp);
    const rows = await page.locator("table.invocations tbody tr").count();
    const growth = last - warm;
    console.log(
      `heap over ${PAGES} page turns (after ${WARM_PAGES} to warm up; garbage collected before each reading): ${fmt(warm / 1024)} → ${fmt(last / 1024)} KiB, ` +
        `growth ${fmt(growth / 1024, 1)} KiB = ${(growth / pageJson).toFixed(2)}× one page (${fmt(pageJson / 1024, 1)} KiB of JSON, ${rows} rows in the document; target ≤ 1×); ` +
        `cold, from the first page: ${fmt(cold / 1024)} → ${fmt(last / 1024)} KiB over ${WARM_PAGES + PAGES} turns; ${fmt(pagingMs, 1)} ms per page turn`,
    );
    console.log(`the next ${PAGES} turns: growth ${fmt((later - last) / 1024, 1)} KiB = ${((later - last) / pageJson).toFixed(2)}× one page (the window before: ${(growth / pageJson).toFixed(2)}×)`);
    console.log(`in the document after ${WARM_PAGES} turns: ${warmDom}; after ${WARM_PAGES + PAGES}: ${lastDom}`);
    client.close();
  } finally {
    await browser.close();
    await node?.stop();
    if (kept === undefined) rmSync(dir, { recursive: true, force: true });
  }
}
