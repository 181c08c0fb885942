/**
 * The operator console with 10⁶ claims in the embedded store (seeded straight into SQLite, see
 * test/support/seed-claims.ts), served by a real `warden serve` and driven by a real Chromium:
 *
 * 1. time from navigation to the first row of Invocations, and of Unresolved (one unresolved run,
 *    sorted after every seeded row: the listing reads every row before it), beside the API's own
 *    time for the same page (the baseline, measured in the same run);
 * 2. the page's JS heap after paging forward 100 times, beside the heap after the first page.
 */
import { randomUUID } from "node:crypto";
import { existsSync, rmSync } from "node:fs";
import { join } from "node:path";
import { spawnSync } from "node:child_process";
import type { CDPSession, Page } from "playwright-core";
import { WardenClient } from "../src/client/client.js";
import { fixtureAgents, repo, startNode, type NodeProcess } from "../test/client/harness.js";
import { launchChromium } from "../test/support/browser.js";
import { seedRecordedClaims } from "../test/support/seed-claims.js";
import { waitFor } from "../test/support/wait.js";
import { benchDir, fmt, median } from "./baseline.js";

const CLAIMS = 1_000_000;
const ROUNDS = 5;
/** Unresolved is found only after a scan of every seeded row: measured once (minutes, not seconds). */
const UNRESOLVED_ROUNDS = 1;
const PAGES = 100;
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

async function consoleFirstRow(page: Page, url: string): Promise<number> {
  await page.goto("about:blank");
  const t0 = performance.now();
  await page.goto(url);
  await page.locator("table.invocations tbody tr").first().waitFor({ timeout: 600_000 });
  return performance.now() - t0;
}

async function heapBytes(cdp: CDPSession): Promise<number> {
  await cdp.send("HeapProfiler.collectGarbage");
  await cdp.send("HeapProfiler.collectGarbage");
  return (await cdp.send("Runtime.getHeapUsage")).usedSize;
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
    const scanStart = performance.now();
    await client.listInvocations({ limit: PAGE_ROWS, status: "unresolved" });
    console.log(`API: one read of the unresolved listing (it checks up to 10,000 rows per call) takes ${fmt(performance.now() - scanStart)} ms`);

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
      for (let round = 0; round < (status === undefined ? ROUNDS : UNRESOLVED_ROUNDS); round++) {
        api.push(await apiFirstRow(client, status));
        ui.push(await consoleFirstRow(page, node.url + path));
      }
      const a = median(api);
      const u = median(ui);
      console.log(
        `${label.padEnd(11)} first row: console ${fmt(u, 1)} ms (target < 500), API alone ${fmt(a, 1)} ms, console/API ${(u / a).toFixed(2)}×  (medians of ${ui.length}; console ${ui.map((v) => v.toFixed(0)).join(", ")})`,
      );
    }

    await page.goto(`${node.url}/ui/invocations`);
    await page.locator("table.invocations tbody tr").first().waitFor();
    const cdp = await context.newCDPSession(page);
    const first = await heapBytes(cdp);
    const pageJson = JSON.stringify(await client.listInvocations({ limit: PAGE_ROWS })).length;
    const t0 = performance.now();
    let half = 0;
    for (let i = 0; i < PAGES; i++) {
      if (i === PAGES / 2) half = await heapBytes(cdp);
      const before = await page.locator("table.invocations tbody td.id a").first().getAttribute("href");
      await page.getByRole("link", { name: "Next page" }).click();
      await waitFor("the next page", async () => ((await page.locator("table.invocations tbody td.id a").first().getAttribute("href")) !== before ? true : undefined), 60_000, 5);
    }
    const pagingMs = (performance.now() - t0 - 0) / PAGES;
    const last = await heapBytes(cdp);
    const rows = await page.locator("table.invocations tbody tr").count();
    console.log(
      `heap after ${PAGES} pages: ${fmt(last / 1024)} KiB vs ${fmt(first / 1024)} KiB after the first (growth ${fmt((last - first) / 1024, 1)} KiB, ` +
        `of which ${fmt((last - half) / 1024, 1)} KiB over the last ${PAGES / 2}; ` +
        `one page is ${fmt(pageJson / 1024, 1)} KiB of JSON, ${rows} rows in the document); ${fmt(pagingMs, 1)} ms per page turn`,
    );
    client.close();
  } finally {
    await browser.close();
    await node?.stop();
    if (kept === undefined) rmSync(dir, { recursive: true, force: true });
  }
}
