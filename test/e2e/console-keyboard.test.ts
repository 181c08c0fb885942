/**
 * The console by keyboard alone, in a real Chromium against a real node: log in, go from the
 * Overview to an unresolved run and reconcile it through the form using only Tab, Shift+Tab,
 * Enter, Space and the arrow keys. Every control reached shows a visible focus ring, and focus
 * lands where the next key expects it: at the start of the new page's content after a link is
 * followed, on the receipt once the review is signed.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as path from "node:path";
import { randomUUID } from "node:crypto";
import type { Browser, Page } from "playwright-core";
import { httpCall, startNode, type NodeProcess } from "../support/node.js";
import { launchChromium } from "../support/browser.js";
import { waitFor } from "../support/wait.js";
import { buildConsole, FIXTURE_PROVIDER_ARGS, fixtureAgentPath, UI_WAIT_MS } from "./console-support.js";
import { tempDir } from "../support/temp.js";

const TOKEN = "console-keyboard-operator-token-0123456789";
/** More Tab presses than any page here has stops: reaching it means the target is not reachable. */
const MAX_TABS = 80;

interface Focused {
  readonly tag: string;
  readonly name: string;
  readonly type: string | null;
  /** a ring the user can see: :focus-visible matched and an outline drawn */
  readonly ring: boolean;
}

function focused(page: Page): Promise<Focused> {
  // (a string: evaluated in the page, where the DOM's types are not this file's)
  return page.evaluate(`(() => {
    const el = document.activeElement;
    if (el === null || el === document.body) return { tag: "BODY", name: "", type: null, ring: false };
    const style = getComputedStyle(el);
    const labelled = el.id === "" ? null : document.querySelector('label[for="' + el.id + '"]');
    const text = el.getAttribute("aria-label") ?? (labelled ? labelled.textContent : null) ?? (el.closest("label") ? el.closest("label").textContent : el.textContent) ?? "";
    return {
      tag: el.tagName,
      name: text.replace(/\\s+/g, " ").trim(),
      type: el.getAttribute("type"),
      ring: el.matches(":focus-visible") && style.outlineStyle !== "none" && parseFloat(style.outlineWidth) >= 2,
    };
  })()`);
}

/** Presses `key` until the focused element matches, checking each stop shows its focus ring. */
async function pressTo(page: Page, key: "Tab" | "Shift+Tab", what: string, match: (f: Focused) => boolean): Promise<Focused> {
  const stops: string[] = [];
  for (let i = 0; i < MAX_TABS; i++) {
    await page.keyboard.press(key);
    const now = await focused(page);
    stops.push(`${now.tag}:${now.name.slice(0, 40)}`);
    assert.ok(now.tag !== "BODY", `focus fell to the document after ${stops.join(" → ")}`);
    assert.ok(now.ring, `no visible focus ring on ${now.tag} "${now.name}"`);
    if (match(now)) return now;
  }
  throw new Error(`${what} not reached by ${key}: ${stops.join(" → ")}`);
}

/** Where focus is right after a link was followed: the new page's main region (the next Tab enters its content). */
async function assertFocusOnMain(page: Page, what: string): Promise<void> {
  const id = await page.evaluate(`document.activeElement ? document.activeElement.id : ""`);
  assert.equal(id, "main", `after ${what}, focus is on the page's main region`);
}

describe("the console by keyboard alone (real Chromium, real node)", () => {
  let root: string;
  let node: NodeProcess;
  let browser: Browser;

  before(async () => {
    buildConsole();
    root = tempDir("e2e-console-keyboard");
    const workspace = path.join(root, "workspace");
    fs.mkdirSync(workspace);
    node = await startNode({
      home: path.join(root, "home"),
      args: [...FIXTURE_PROVIDER_ARGS, "--workspace", `main=${workspace}`, "--log-level", "warn"],
      env: { WARDEN_TOKEN: TOKEN, ...fixtureAgentPath(root) },
      timeoutMs: 90_000,
    });
    browser = await launchChromium();
  });

  after(async () => {
    await browser?.close();
    await node?.stop();
    if (root !== undefined) fs.rmSync(root, { recursive: true, force: true });
  });

  it("goes from the Overview to an unresolved run and reconciles it, by keyboard only", async () => {
    const id = randomUUID();
    const invoked = await httpCall(node.url, TOKEN, "POST", "/v1/invocations", { headers: { "idempotency-key": id }, body: { provider: "claude", prompt: "die mid-run #kill" } });
    assert.equal(invoked.status, 202, invoked.text);
    const statusOf = async (): Promise<string> => String((await httpCall(node.url, TOKEN, "GET", `/v1/invocations/api:operator/${id}`)).body.status);
    await waitFor("the killed run to read unresolved", async () => ((await statusOf()) === "unresolved" ? true : undefined), UI_WAIT_MS);

    const page = await (await browser.newContext({ viewport: { width: 1280, height: 860 } })).newPage();
    await page.goto(`${node.url}/ui/`);
    await page.getByLabel("Token").waitFor({ timeout: UI_WAIT_MS });
    await pressTo(page, "Tab", "the token field", (f) => f.tag === "INPUT" && f.type === "password");
    await page.keyboard.type(TOKEN);
    await page.keyboard.press("Enter");
    await page.getByRole("heading", { name: "Overview" }).waitFor({ timeout: UI_WAIT_MS });

    // The first stop of a page is the skip link; it leads to the content.
    const skip = await pressTo(page, "Tab", "the skip link", () => true);
    assert.equal(skip.name, "Skip to content");
    assert.ok(await page.locator(".skip").evaluate((el) => el.getBoundingClientRect().left >= 0), "the skip link shows when focused");
    await pressTo(page, "Tab", "the unresolved count", (f) => f.tag === "A" && /^1 unresolved$/.test(f.name));
    await page.keyboard.press("Enter");
    await page.waitForURL(/\/ui\/invocations\?status=unresolved$/, { timeout: UI_WAIT_MS });
    await assertFocusOnMain(page, "following the count's link");

    await page.locator(`a[href$="/${id}"]`).waitFor({ timeout: UI_WAIT_MS });
    await pressTo(page, "Tab", "the unresolved run's row", (f) => f.tag === "A" && f.name.includes(id));
    await page.keyboard.press("Enter");
    await page.getByRole("heading", { name: /Invocation/ }).waitFor({ timeout: UI_WAIT_MS });
    await assertFocusOnMain(page, "following the row's link");

    await pressTo(page, "Tab", "Review and reconcile", (f) => f.tag === "A" && f.name === "Review and reconcile");
    await page.keyboard.press("Enter");
    await page.getByRole("heading", { name: "Your review" }).waitFor({ timeout: UI_WAIT_MS });
    await assertFocusOnMain(page, "following Review and reconcile");

    // The outcome: Tab enters the radio group, the arrows choose in it.
    await pressTo(page, "Tab", "the outcome group", (f) => f.type === "radio");
    await page.keyboard.press("ArrowDown");
    assert.equal(await page.locator("input[name=outcome]:checked").getAttribute("value"), "failed");
    await pressTo(page, "Tab", "the rationale", (f) => f.tag === "TEXTAREA");
    await page.keyboard.type("agent killed itself mid-run; its pid is gone and the workspace unchanged");
    // Back one stop: still the chosen outcome, ringed; then forward past the rationale.
    const back = await pressTo(page, "Shift+Tab", "the chosen outcome", (f) => f.type === "radio");
    assert.match(back.name, /^failed/);
    await pressTo(page, "Tab", "the rationale again", (f) => f.tag === "TEXTAREA");

    // Evidence: Space on the file field opens the chooser (the browser's own dialog, answered here).
    // Listening for the chooser is what asks Chromium to hand it over instead of showing it (which
    // headless does by cancelling it), and Playwright sends that request without waiting for it:
    // started together with the key press, it raced the press and lost on a busy machine. Started
    // before the Tab presses below (each awaited, a round trip to the page), it is in effect well before Space.
    const chooserOpened = page.waitForEvent("filechooser", { timeout: UI_WAIT_MS });
    await pressTo(page, "Tab", "the evidence field", (f) => f.type === "file");
    await page.keyboard.press("Space");
    const chooser = await chooserOpened;
    await chooser.setFiles({ name: "agent-ps.txt", mimeType: "text/plain", buffer: Buffer.from("no such process\n") });
    await page.locator("ul.evidence li").waitFor({ timeout: UI_WAIT_MS });

    await pressTo(page, "Tab", "the effects-stopped checkbox", (f) => f.type === "checkbox");
    await page.keyboard.press("Space");
    assert.equal(await page.locator("input[type=checkbox]").isChecked(), true);
    await pressTo(page, "Tab", "Sign and close", (f) => f.tag === "BUTTON" && f.name === "Sign and close");
    await page.keyboard.press("Enter");
    await page.getByTestId("receipt").waitFor({ timeout: UI_WAIT_MS });
    const landed = await focused(page);
    assert.equal(landed.tag, "H1", "after signing, focus is on the result's heading");
    assert.equal(landed.name, "Reconciled");
    assert.equal(await statusOf(), "reconciled");
  });
});
