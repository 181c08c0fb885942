/**
 * The operator console in a real Chromium against a real `warden serve` on loopback with the
 * fixture agents: login through `warden console`'s one-time link, a run watched live from running
 * to recorded, an event stream cut mid-run and resumed, paging through 1,200 invocations, the
 * Unresolved queue reconciled through the form, a tampered journal caught by the browser's own
 * verification, an observer's read-only session, retiring a bundle, axe-core on every page, and
 * every page at 390 px and in dark mode. Screenshots go to a temp dir, or to
 * $WARDEN_CONSOLE_SCREENSHOTS (how docs/console/ is refreshed).
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as net from "node:net";
import * as path from "node:path";
import { randomUUID } from "node:crypto";
import { spawnSync } from "node:child_process";
import type { Browser, BrowserContext, Page } from "playwright-core";
import { httpCall, repo, startNode, warden, type HttpCallOptions, type NodeProcess } from "../support/node.js";
import { launchChromium, seriousViolations } from "../support/browser.js";
import { seedRecordedClaims } from "../support/seed-claims.js";
import { waitFor } from "../support/wait.js";
import { FIXTURE_PROVIDER_ARGS, fixtureAgentPath } from "./console-support.js";
import { tempDir } from "../support/temp.js";

const OPERATOR_TOKEN = "console-operator-token-0123456789abcdef";
const OBSERVER_TOKEN = "console-observer-token-0123456789abcdef";
const SEEDED = 1200;
/** Generous: the machine may be busy; each names what it waited for. */
const UI_WAIT_MS = 30_000;

/** A TCP relay in front of the node whose open connections the test can cut (a dropped event stream). */
class Relay {
  readonly sockets = new Set<net.Socket>();
  readonly server: net.Server;
  port = 0;

  constructor(target: URL) {
    this.server = net.createServer((client) => {
      const upstream = net.connect(Number(target.port), target.hostname);
      for (const s of [client, upstream]) {
        this.sockets.add(s);
        s.on("close", () => this.sockets.delete(s));
        s.on("error", () => undefined);
      }
      client.pipe(upstream).pipe(client);
    });
  }

  async listen(): Promise<void> {
    await new Promise<void>((done) => this.server.listen(0, "127.0.0.1", done));
    this.port = (this.server.address() as net.AddressInfo).port;
  }

  cutAll(): number {
    const n = this.sockets.size;
    for (const s of this.sockets) s.destroy();
    return n;
  }

  close(): Promise<void> {
    this.cutAll();
    return new Promise((done) => this.server.close(() => done()));
  }
}

describe("operator console (real Chromium, real node)", () => {
  let root: string;
  let home: string;
  let gate: string;
  let shots: string;
  let node: NodeProcess;
  let browser: Browser;
  let operator: BrowserContext;
  let page: Page;
  let relay: Relay;
  let gatedRun: { id: string; runId: string } | undefined;
  let unresolvedId: string;

  const call = (method: string, route: string, options: HttpCallOptions = {}) => httpCall(node.url, OPERATOR_TOKEN, method, route, options);
  const ui = (p: string): string => `${node.url}/ui${p}`;
  const shot = async (p: Page, name: string): Promise<void> => {
    await p.screenshot({ path: path.join(shots, `${name}.png`), fullPage: false });
  };
  const invoke = async (prompt: string): Promise<{ id: string; runId: string }> => {
    const id = randomUUID();
    const reply = await call("POST", "/v1/invocations", { headers: { "idempotency-key": id }, body: { provider: "claude", prompt } });
    assert.equal(reply.status, 202, JSON.stringify(reply.body));
    return { id, runId: String(reply.body.run_id) };
  };
  const statusOf = async (id: string): Promise<string> => String((await call("GET", `/v1/invocations/api:operator/${id}`)).body.status);
  const rowSeqs = (p: Page): Promise<number[]> => p.locator("[data-testid=timeline] li").evaluateAll((els) => els.map((e) => Number(e.getAttribute("data-seq"))));

  before(async () => {
    // The console's files are built from the sources under test (esbuild: well under a second).
    const built = spawnSync(process.execPath, [path.join(repo, "scripts", "build-console.mjs")], { cwd: repo, encoding: "utf8" });
    assert.equal(built.status, 0, `building the console failed: ${built.stderr}`);
    root = tempDir("e2e-console");
    home = path.join(root, "home");
    fs.mkdirSync(home, { mode: 0o700 });
    gate = path.join(root, "gate");
    shots = process.env.WARDEN_CONSOLE_SCREENSHOTS ?? path.join(root, "screenshots");
    fs.mkdirSync(shots, { recursive: true });
    const workspace = path.join(root, "workspace");
    fs.mkdirSync(workspace);
    await seedRecordedClaims(home, SEEDED);
    node = await startNode({
      home,
      // The fixture agents on PATH by their real names: journals (and screenshots) name `claude`, no path of this machine.
      args: [...FIXTURE_PROVIDER_ARGS, "--workspace", `main=${workspace}`, "--log-level", "info"],
      env: { WARDEN_TOKEN: OPERATOR_TOKEN, WARDEN_OBSERVER_TOKEN: OBSERVER_TOKEN, WARDEN_FIXTURE_GATE: gate, ...fixtureAgentPath(root) },
      // Generous: on a busy machine a node's start (tsx compiling the sources) can take long.
      timeoutMs: 90_000,
    });
    const pushed = await warden(["push", path.join(repo, "examples", "review-bundle"), "--url", node.url], { env: { WARDEN_TOKEN: OPERATOR_TOKEN } });
    assert.equal(pushed.code, 0, pushed.stderr);
    relay = new Relay(new URL(node.url));
    await relay.listen();
    browser = await launchChromium();
    operator = await browser.newContext({ viewport: { width: 1280, height: 860 } });
    page = await operator.newPage();
  });

  after(async () => {
    fs.writeFileSync(gate, "");
    await browser?.close();
    await relay?.close();
    await node?.stop();
    fs.rmSync(root, { recursive: true, force: true });
  });

  it("logs in through `warden console`'s one-time link: an HttpOnly SameSite=Strict cookie, the secret never logged, the link spent", async () => {
    const printed = await warden(["console", "--url", node.url, "--json"], { env: { WARDEN_TOKEN: OPERATOR_TOKEN } });
    assert.equal(printed.code, 0, printed.stderr);
    const link = (JSON.parse(printed.stdout) as { url: string }).url;
    assert.match(link, /\/ui\/login#[A-Za-z0-9_-]{43}$/);
    const secret = link.split("#")[1]!;
    const response = await page.goto(link);
    assert.match(response!.headers()["content-security-policy"] ?? "", /default-src 'self'.*frame-ancestors 'none'/);
    await page.getByRole("heading", { name: "Overview" }).waitFor({ timeout: UI_WAIT_MS });
    assert.equal(new URL(page.url()).hash, "", "the secret is gone from the address bar");
    assert.equal(await page.locator(".who .role").textContent(), "operator");
    const [cookie] = await operator.cookies();
    assert.equal(cookie?.name, "warden_session");
    assert.equal(cookie?.httpOnly, true);
    assert.equal(cookie?.sameSite, "Strict");
    assert.equal(await page.evaluate("window.localStorage.length + document.cookie.length"), 0, "nothing readable by scripts");
    await shot(page, "overview");

    // Single use: the same link in a fresh browser is refused, with the node's code.
    const other = await browser.newContext();
    const again = await other.newPage();
    await again.goto(link);
    await again.getByRole("alert").waitFor({ timeout: UI_WAIT_MS });
    assert.match((await again.getByRole("alert").textContent()) ?? "", /login-link-invalid/);
    await shot(again, "login");
    assert.deepEqual(await seriousViolations(again), []);
    await other.close();
    assert.ok(!node.stderr().includes(secret) && !node.stdout().includes(secret), "the login secret never reaches the log");
    assert.ok(!node.stderr().includes(cookie!.value), "the session id never reaches the log");
  });

  it("watches a run go from running to recorded live on its page, and verifies its journal in the browser", async () => {
    fs.rmSync(gate, { force: true });
    gatedRun = await invoke("live console run #gate");
    await page.goto(ui(`/invocations/api%3Aoperator/${gatedRun.id}`));
    await page.locator(".live").waitFor({ timeout: UI_WAIT_MS });
    await page.locator("p .status-in_progress").waitFor({ timeout: UI_WAIT_MS });
    await waitFor("the timeline's first rows", async () => ((await rowSeqs(page)).length >= 3 ? true : undefined), UI_WAIT_MS);
    await page.evaluate("window.marker = 42");
    await shot(page, "run-live");
    fs.writeFileSync(gate, "");
    await page.locator("p .status-recorded").waitFor({ timeout: UI_WAIT_MS });
    await page.locator("[data-testid=timeline] li.ev-run-terminated").waitFor({ timeout: UI_WAIT_MS });
    assert.equal(await page.evaluate("window.marker"), 42, "no full-page reload");
    const badge = page.getByTestId("verify-badge");
    await waitFor("the browser's verification of the finished run", async () => (/verified in this browser/.test((await badge.textContent()) ?? "") ? true : undefined), UI_WAIT_MS);
    const verification = await call("GET", `/v1/runs/${gatedRun.runId}/verification`);
    assert.deepEqual(await rowSeqs(page), Array.from({ length: Number(verification.body.entries) }, (_, i) => i));
    assert.match((await badge.textContent()) ?? "", new RegExp(`${String(verification.body.entries)} entries`));
    await shot(page, "run");
    assert.deepEqual(await seriousViolations(page), []);
  });

  it("resumes a dropped event stream with Last-Event-ID: no timeline row lost or duplicated", async () => {
    fs.rmSync(gate, { force: true });
    const run = await invoke("dropped stream #gate");
    // Through the relay (another port of the same host: the session cookie goes along).
    const viaRelay = await operator.newPage();
    await viaRelay.goto(`http://127.0.0.1:${relay.port}/ui/invocations/api%3Aoperator/${run.id}`);
    await waitFor("rows before the drop", async () => ((await rowSeqs(viaRelay)).length >= 3 ? true : undefined), UI_WAIT_MS);
    const before = (await rowSeqs(viaRelay)).length;
    assert.ok(relay.cutAll() > 0, "the relay had connections to cut");
    // The run goes on while the page is disconnected: these entries must come with the resumed stream.
    fs.writeFileSync(gate, "");
    await waitFor("the run to be recorded", async () => ((await statusOf(run.id)) === "recorded" ? true : undefined), UI_WAIT_MS);
    await viaRelay.locator("[data-testid=timeline] li.ev-run-terminated").waitFor({ timeout: UI_WAIT_MS });
    const entries = Number((await call("GET", `/v1/runs/${run.runId}/verification`)).body.entries);
    assert.ok(entries > before, "entries were appended while the stream was down");
    assert.deepEqual(await rowSeqs(viaRelay), Array.from({ length: entries }, (_, i) => i));
    assert.match((await viaRelay.locator("main").textContent()) ?? "", /Reconnected 1×/);
    await viaRelay.close();
  });

  it("pages through 1,200+ invocations by cursor, a page at a time", async () => {
    await page.goto(ui("/invocations"));
    const seen = new Set<string>();
    let pages = 0;
    for (;;) {
      await page.locator("table.invocations tbody tr").first().waitFor({ timeout: UI_WAIT_MS });
      const ids = await page.locator("table.invocations tbody td.id a").evaluateAll((els) => els.map((e) => e.getAttribute("href")!));
      assert.ok(ids.length <= 50, "never more than one page in the document");
      for (const id of ids) {
        assert.ok(!seen.has(id), `row ${id} shown twice`);
        seen.add(id);
      }
      pages++;
      if (pages === 1) await shot(page, "invocations");
      const next = page.getByRole("link", { name: "Next page" });
      if ((await next.count()) === 0) break;
      const first = ids[0]!;
      await next.click();
      await waitFor("the next page", async () => ((await page.locator("table.invocations tbody td.id a").first().getAttribute("href")) !== first ? true : undefined), UI_WAIT_MS);
    }
    assert.ok(seen.size >= SEEDED + 2, `saw ${seen.size} invocations`);
    assert.ok(pages >= 25);
  });

  it("filters unresolved, refuses a bad review with its code, reconciles through the form, and the API answers reconciled", async () => {
    const run = await invoke("die mid-run #kill");
    unresolvedId = run.id;
    await waitFor("the killed run to read unresolved", async () => ((await statusOf(run.id)) === "unresolved" ? true : undefined), UI_WAIT_MS);
    await page.goto(ui("/invocations?status=unresolved"));
    await page.getByTestId("unresolved-badge").waitFor({ timeout: UI_WAIT_MS });
    await waitFor("the badge count", async () => ((await page.getByTestId("unresolved-badge").textContent()) === "1" ? true : undefined), UI_WAIT_MS);
    const rows = page.locator("table.invocations tbody tr");
    await rows.first().waitFor({ timeout: UI_WAIT_MS });
    assert.equal(await rows.count(), 1);
    await shot(page, "unresolved");
    assert.deepEqual(await seriousViolations(page), []);
    await rows.first().getByRole("link").click();
    await page.getByRole("link", { name: "Review and reconcile" }).click();
    await page.getByRole("heading", { name: "Your review" }).waitFor({ timeout: UI_WAIT_MS });

    // The template's rationale is refused by the node, and the form says so with the code.
    await page.getByLabel("failed: it did not do what it was asked").check();
    await page.getByLabel("Rationale").fill("what was checked, and why this outcome is right");
    await page.getByLabel(/I checked that the run's effects have stopped/).check();
    await page.getByLabel(/Evidence files/).setInputFiles({ name: "agent-ps.txt", mimeType: "text/plain", buffer: Buffer.from("no such process\n") });
    await page.getByText("sha256:").first().waitFor({ timeout: UI_WAIT_MS });
    const evidenceDigest = "sha256:" + (await import("node:crypto")).createHash("sha256").update("no such process\n").digest("hex");
    assert.match((await page.locator("ul.evidence").textContent()) ?? "", new RegExp(evidenceDigest), "the browser hashed the file itself");
    await page.getByRole("button", { name: "Sign and close" }).click();
    await page.getByRole("alert").waitFor({ timeout: UI_WAIT_MS });
    assert.match((await page.getByRole("alert").textContent()) ?? "", /review-invalid-rationale/);
    // No evidence: refused with its own code.
    await page.getByRole("button", { name: "Remove agent-ps.txt" }).click();
    await page.getByLabel("Rationale").fill("agent killed itself mid-run; checked its pid is gone and the workspace unchanged");
    await page.getByRole("button", { name: "Sign and close" }).click();
    await waitFor("the missing-evidence refusal", async () => (/review-(missing-field|field-invalid|invalid)/.test((await page.getByRole("alert").textContent()) ?? "") ? true : undefined), UI_WAIT_MS);
    await shot(page, "reconcile");
    assert.deepEqual(await seriousViolations(page), []);
    await page.getByLabel(/Evidence files/).setInputFiles({ name: "agent-ps.txt", mimeType: "text/plain", buffer: Buffer.from("no such process\n") });
    await page.getByText(evidenceDigest).waitFor({ timeout: UI_WAIT_MS });
    await page.getByRole("button", { name: "Sign and close" }).click();
    await page.getByTestId("receipt").waitFor({ timeout: UI_WAIT_MS });
    const receipt = JSON.parse((await page.getByTestId("receipt").textContent())!) as { review: { evidence: { sha256: string }[]; outcome: string }; sig: string };
    assert.equal(receipt.review.outcome, "failed");
    assert.equal(receipt.review.evidence[0]?.sha256, evidenceDigest);
    await shot(page, "receipt");
    const api = await call("GET", `/v1/invocations/api:operator/${run.id}`);
    assert.equal(api.body.status, "reconciled");
    assert.equal((api.body.receipt as { sig: string }).sig, receipt.sig);
  });

  it("shows a tampered journal as failed at the edited line, by the browser's own check", async () => {
    assert.ok(gatedRun !== undefined);
    const file = path.join(home, "journals", `${gatedRun.runId}.ndjson`);
    const lines = fs.readFileSync(file, "utf8").split("\n");
    // Line 3: one character of its timestamp, still valid canonical JSON; only its signature can tell.
    lines[2] = lines[2]!.replace(/"ts":"(\d)/, (_m, d: string) => `"ts":"${d === "2" ? "3" : "2"}`);
    fs.writeFileSync(file, lines.join("\n"));
    await page.goto(ui(`/invocations/api%3Aoperator/${gatedRun.id}`));
    const badge = page.getByTestId("verify-badge");
    await badge.waitFor({ timeout: UI_WAIT_MS });
    assert.match((await badge.textContent()) ?? "", /failed at line 3: the signature does not verify/);
    await shot(page, "run-tampered");
  });

  it("gives an observer a read-only console, and the node refuses a forged POST with its cookie", async () => {
    const context = await browser.newContext({ viewport: { width: 1280, height: 860 } });
    const observer = await context.newPage();
    await observer.goto(ui("/"));
    await observer.getByLabel("Token").fill(OBSERVER_TOKEN);
    await observer.getByRole("button", { name: "Log in" }).click();
    await observer.getByRole("heading", { name: "Overview" }).waitFor({ timeout: UI_WAIT_MS });
    assert.equal(await observer.locator(".who .role").textContent(), "observer");
    await observer.goto(ui("/bundles"));
    await observer.getByRole("heading", { name: "review-bundle" }).waitFor({ timeout: UI_WAIT_MS });
    assert.equal(await observer.getByRole("button", { name: /Retire/ }).count(), 0, "no retire control");
    const { id } = await invoke("another to leave unresolved #kill");
    await waitFor("it to read unresolved", async () => ((await statusOf(id)) === "unresolved" ? true : undefined), UI_WAIT_MS);
    await observer.goto(ui(`/invocations/api%3Aoperator/${id}`));
    await observer.locator("p .status-unresolved").waitFor({ timeout: UI_WAIT_MS });
    assert.equal(await observer.getByRole("link", { name: "Review and reconcile" }).count(), 0, "no reconcile control");
    // Forged: the observer's own session, its CSRF token and all, straight at the API.
    const forged = await observer.evaluate(async () => {
      const session = (await (await fetch("/ui/session")).json()) as { csrf: string };
      const reply = await fetch("/v1/bundles/review-bundle/" + "r1/retirement", { method: "POST", headers: { "x-warden-csrf": session.csrf } });
      return { status: reply.status, body: (await reply.json()) as { code: string } };
    });
    assert.deepEqual(forged, { status: 403, body: forged.body });
    assert.equal(forged.body.code, "forbidden");
    // An operator's cookie without the CSRF header, and with another Origin, is refused too.
    const noCsrf = await operator.request.post(`${node.url}/v1/bundles/review-bundle/r1/retirement`);
    assert.equal(noCsrf.status(), 403);
    assert.equal(((await noCsrf.json()) as { code: string }).code, "csrf-token-invalid");
    const csrf = ((await (await operator.request.get(`${node.url}/ui/session`)).json()) as { csrf: string }).csrf;
    const foreign = await operator.request.post(`${node.url}/v1/bundles/review-bundle/r1/retirement`, { headers: { "x-warden-csrf": csrf, origin: "http://evil.example" } });
    assert.equal(foreign.status(), 403);
    assert.equal(((await foreign.json()) as { code: string }).code, "origin-refused");
    assert.equal((await call("GET", "/v1/bundles/review-bundle")).body.revisions instanceof Array, true);
    const revisions = (await call("GET", "/v1/bundles/review-bundle")).body.revisions as { retired: boolean }[];
    assert.ok(revisions.every((r) => !r.retired), "nothing was retired by the refused requests");
    await context.close();
  });

  it("retires a bundle revision after a confirmation that says what GC frees", async () => {
    await page.goto(ui("/bundles"));
    await page.getByRole("heading", { name: "review-bundle" }).waitFor({ timeout: UI_WAIT_MS });
    await page.getByRole("button", { name: "Files" }).first().click();
    await page.locator(".manifest table tbody tr").first().waitFor({ timeout: UI_WAIT_MS });
    // What each provider gets is the node's materializer's answer, asked once the files are open.
    await page.locator(".providers li").first().waitFor({ timeout: UI_WAIT_MS });
    assert.match((await page.locator(".manifest").textContent()) ?? "", /Materializes for: claude, codex/);
    await shot(page, "bundles");
    assert.deepEqual(await seriousViolations(page), []);
    await page.getByRole("button", { name: "Retire…" }).first().click();
    const confirm = page.getByRole("alertdialog");
    assert.match((await confirm.textContent()) ?? "", /garbage collection then deletes \d+ blobs? \(/);
    const revision = (await page.locator("li.revision").first().getAttribute("data-revision"))!;
    await confirm.getByRole("button", { name: `Retire review-bundle@${revision}` }).click();
    await page.locator("li.revision .status-retired").first().waitFor({ timeout: UI_WAIT_MS });
    const api = await call("GET", "/v1/bundles/review-bundle");
    assert.equal((api.body.revisions as { revision: string; retired: boolean }[]).find((r) => r.revision === revision)?.retired, true);
  });

  it("passes axe-core on every page, fits 390 px without sideways scrolling, and follows the OS's dark mode", async () => {
    const pages: [string, string][] = [
      ["overview", "/"],
      ["invocations", "/invocations"],
      ["unresolved", "/invocations?status=unresolved"],
      ["run", `/invocations/api%3Aoperator/${gatedRun!.id}`],
      ["reconcile-form", `/invocations/api%3Aoperator/${unresolvedId}/reconcile`],
      ["bundles", "/bundles"],
      ["keys", "/keys"],
    ];
    for (const scheme of ["light", "dark"] as const) {
      await page.emulateMedia({ colorScheme: scheme });
      for (const width of [1280, 390]) {
        await page.setViewportSize({ width, height: width === 390 ? 844 : 860 });
        for (const [name, p] of pages) {
          await page.goto(ui(p));
          await page.locator("main h1").first().waitFor({ timeout: UI_WAIT_MS });
          await page.locator(".loading").waitFor({ state: "detached", timeout: UI_WAIT_MS });
          const violations = await seriousViolations(page);
          assert.deepEqual(violations, [], `${name} at ${width} px, ${scheme}`);
          if (width === 390) {
            const overflow = Number(await page.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth"));
            assert.ok(overflow <= 0, `${name} scrolls sideways by ${overflow} px at 390 px`);
          }
          if (name === "keys" && width === 1280 && scheme === "light") await shot(page, "keys");
          if ((name === "overview" || name === "run") && (width === 390 || scheme === "dark")) await shot(page, `${name}-${width}-${scheme}`);
        }
      }
    }
    await page.emulateMedia({ colorScheme: "light" });
    await page.setViewportSize({ width: 1280, height: 860 });
  });
});
