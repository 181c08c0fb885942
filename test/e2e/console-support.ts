/**
 * What the console's end-to-end tests share: the console built from the sources under test, the
 * fixture agents on PATH under their real names (so journals name the command `claude`, not a
 * path of this machine, and screenshots show nothing of it), and a browser session logged in by
 * pasting a token.
 */
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as path from "node:path";
import { spawnSync } from "node:child_process";
import type { Page } from "playwright-core";
import { fixtureAgents, repo } from "../support/node.js";

/** Generous: the machine may be busy; each wait names what it waited for. */
export const UI_WAIT_MS = 30_000;

export function buildConsole(): void {
  // esbuild: well under a second.
  const built = spawnSync(process.execPath, [path.join(repo, "scripts", "build-console.mjs")], { cwd: repo, encoding: "utf8" });
  assert.equal(built.status, 0, `building the console failed: ${built.stderr}`);
}

/**
 * `<root>/bin` holding `claude`, `codex` and `kimi` (links to the fixture agents): a node started
 * with the returned PATH runs them by their bare names, as it runs the real CLIs.
 */
/**
 * The node's arguments naming the fixture agents' commands by their bare names: a named command
 * is looked up on PATH alone (the default one is the pinned CLI first: command-path.ts).
 */
export const FIXTURE_PROVIDER_ARGS: readonly string[] = ["claude", "codex", "kimi"].flatMap((name) => ["--provider", `${name}=${name}`]);

export function fixtureAgentPath(root: string): { PATH: string } {
  const bin = path.join(root, "bin");
  fs.mkdirSync(bin, { recursive: true });
  for (const name of ["claude", "codex", "kimi"]) fs.symlinkSync(path.join(fixtureAgents, `${name}.mjs`), path.join(bin, name));
  return { PATH: `${bin}${path.delimiter}${process.env.PATH ?? ""}` };
}

/** Logs the page in by pasting `token` on the login form. */
export async function logInWithToken(page: Page, url: string, token: string): Promise<void> {
  await page.goto(`${url}/ui/`);
  await page.getByLabel("Token").fill(token);
  await page.getByRole("button", { name: "Log in" }).click();
  await page.getByRole("heading", { name: "Overview" }).waitFor({ timeout: UI_WAIT_MS });
}
