/**
 * A real Chromium for the console's tests: Debian's package (scripts/test-prereqs.mjs installs it
 * when missing), driven by playwright-core, headless with a fresh profile and no network beyond
 * loopback. axe-core checks pages for accessibility from inside them.
 */
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { chromium, type Browser, type Page } from "playwright-core";

export const CHROMIUM = "/usr/bin/chromium";
const ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"];

export function launchChromium(): Promise<Browser> {
  return chromium.launch({ executablePath: CHROMIUM, args: ARGS, headless: true });
}

const axeSource = readFileSync(createRequire(import.meta.url).resolve("axe-core/axe.min.js"), "utf8");

export interface AxeViolation {
  readonly id: string;
  readonly impact: string | null;
  readonly help: string;
  readonly nodes: number;
}

/** axe-core's serious and critical violations on the page as it stands (evaluated through DevTools, so the page's CSP does not apply to it). */
export async function seriousViolations(page: Page): Promise<AxeViolation[]> {
  const violations = await page.evaluate(`(async () => {
    if (typeof window.axe === "undefined") { ${axeSource}\n }
    const result = await window.axe.run(document, { resultTypes: ["violations"] });
    return result.violations.map((v) => ({ id: v.id, impact: v.impact, help: v.help, nodes: v.nodes.length }));
  })()`);
  return (violations as AxeViolation[]).filter((v) => v.impact === "serious" || v.impact === "critical");
}
