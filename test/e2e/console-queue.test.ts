/**
 * The console's work queue in a real Chromium against a real `warden serve`: a recorded run whose
 * journal was edited in the home shows in the Unresolved tab with its problem and in the badge's
 * count once a lookup found it (the queue is read from indexes, not by checking every row), and
 * the Invocations page's first listing request is the one its document preloads (fetched beside
 * the script, not after it).
 */
import { after, before, describe, it, test } from "node:test";
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as path from "node:path";
import { randomUUID } from "node:crypto";
import { spawnSync } from "node:child_process";
import type { Browser, Page } from "playwright-core";
import { fixtureAgents, httpCall, repo, startNode, type NodeProcess } from "../support/node.js";
import { launchChromium, seriousViolations } from "../support/browser.js";
import { seedRecordedClaims } from "../support/seed-claims.js";
import { waitFor } from "../support/wait.js";
import { firstRequestOf } from "../../src/server/console/preload.js";
import { tempDir } from "../support/temp.js";

const TOKEN = "console-queue-operator-token-0123456789ab";
/** Generous: the machine may be busy; each names what it waited for. */
const UI_WAIT_MS = 30_000;

/** Flips one byte in the middle of a file, keeping its length (a bad disk, an edit). */
function flipMiddleByte(file: string): void {
  const bytes = fs.readFileSync(file);
  const at = Math.floor(bytes.length / 2);
  bytes[at] = bytes[at] === 0x41 ? 0x42 : 0x41;
  fs.writeFileSync(file, bytes);
}

describe("the console's Unresolved queue (real Chromium, real node)", () => {
  let root: string;
  let home: string;
  let node: NodeProcess;
  let browser: Browser;
  let page: Page;
  const call = (method: string, route: string, body?: unknown, headers: Record<string, string> = {}) =>
    httpCall(node.url, TOKEN, method, route, { headers, ...(body === undefined ? {} : { body }) });
  const statusOf = async (id: string): Promise<string> => String((await call("GET", `/v1/invocations/api:operator/${id}`)).body.status);

  before(async () => {
    const built = spawnSync(process.execPath, [path.join(repo, "scripts", "build-console.mjs")], { cwd: repo, encoding: "utf8" });
    assert.equal(built.status, 0, `building the console failed: ${built.stderr}`);
    root = tempDir("e2e-console-queue");
    home = path.join(root, "home");
    fs.mkdirSync(home, { mode: 0o700 });
    await seedRecordedClaims(home, 300);
    node = await startNode({ home, args: ["--provider", `claude=${path.join(fixtureAgents, "claude.mjs")}`, "--log-level", "warn"], env: { WARDEN_TOKEN: TOKEN }, timeoutMs: 90_000 });
    browser = await launchChromium();
    page = await (await browser.newContext({ viewport: { width: 1280, height: 860 } })).newPage();
    const login = await call("POST", "/v1/console/logins");
    assert.equal(login.status, 201, JSON.stringify(login.body));
    await page.goto(node.url + String(login.body.path));
    await page.getByRole("heading", { name: "Overview" }).waitFor({ timeout: UI_WAIT_MS });
  });

  after(async () => {
    await browser?.close();
    await node?.stop();
    fs.rmSync(root, { recursive: true, force: true });
  });

  it("shows a run whose journal was edited after its seal in the Unresolved tab, with its problem, counted by the badge", async () => {
    const id = randomUUID();
    const started = await call("POST", "/v1/invocations", { provider: "claude", prompt: "review the change" }, { "idempotency-key": id });
    assert.ok(started.status === 200 || started.status === 202, JSON.stringify(started.body));
    await waitFor("the run to be recorded", async () => ((await statusOf(id)) === "recorded" ? true : undefined), UI_WAIT_MS);
    const journals = path.join(home, "journals");
    const journal = fs.readdirSync(journals).find((name) => name.includes(String(started.body.run_id)));
    assert.ok(journal !== undefined, "the run's journal is in the home");
    flipMiddleByte(path.join(journals, journal));
    // The lookup checks the journal against its seal (G2), answers unresolved and queues the run.
    assert.equal(await statusOf(id), "unresolved");

    await page.goto(`${node.url}/ui/invocations?status=unresolved`);
    const row = page.locator("table.invocations tbody tr", { hasText: id });
    await row.waitFor({ timeout: UI_WAIT_MS });
    assert.match((await row.textContent()) ?? "", /unresolved\s*journal-changed/);
    assert.equal(await page.locator("table.invocations tbody tr").count(), 1, "only the edited run: the 300 intact ones stay out");
    await waitFor("the badge to count it", async () => ((await page.getByTestId("unresolved-badge").textContent()) === "1" ? true : undefined), UI_WAIT_MS);
    assert.deepEqual(await seriousViolations(page), []);
  });

  it("fetches the first page of rows through the document's preload, beside the script, not after it", async () => {
    for (const url of ["/ui/invocations", "/ui/invocations?status=unresolved"]) {
      await page.goto("about:blank");
      await page.goto(node.url + url);
      await page.locator("table.invocations tbody tr").first().waitFor({ timeout: UI_WAIT_MS });
      const requests = await page.evaluate(() =>
        (performance.getEntriesByType("resource") as unknown as { name: string; initiatorType: string }[])
          .map((entry) => ({ by: entry.initiatorType, url: new URL(entry.name) }))
          .filter((entry) => entry.url.pathname === "/v1/invocations")
          .map((entry) => ({ by: entry.by, path: entry.url.pathname + entry.url.search })),
      );
      assert.deepEqual(requests, [{ by: "link", path: firstRequestOf(url) }], `one listing request for ${url}, made by the preload`);
    }
  });
});

test("the preloaded request is rebuilt from a known status and a base64url cursor, never copied from the address", () => {
  assert.equal(firstRequestOf("/ui/invocations"), "/v1/invocations?limit=50");
  assert.equal(firstRequestOf("/ui/invocations?cursor=WyJhIiwiYiJd&status=unresolved"), "/v1/invocations?limit=50&status=unresolved&cursor=WyJhIiwiYiJd");
  assert.equal(firstRequestOf("/ui/invocations?status=%22%3E%3Cscript%3E"), "/v1/invocations?limit=50", "an unknown status is no filter, as the page reads it");
  assert.equal(firstRequestOf("/ui/invocations?cursor=%22%3E%3Cscript%3E"), undefined, "a cursor no listing wrote: no preload");
  assert.equal(firstRequestOf("/ui/bundles"), undefined);
  assert.equal(firstRequestOf("/ui/invocations/api%3Aoperator/x"), undefined);
});
