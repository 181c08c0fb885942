/**
 * scripts/run-tests.mjs, the runner `npm test` uses, on a project of its own with known outcomes:
 * a timed-out test and a test still pending when its file ends count as failures and are named
 * with why, a skipped suite counts as skipped, the exit status is 1, and the run leaves no temp
 * directory behind, also the ones its tests made and never removed.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { READY_MS } from "../support/wait.js";

const repo = resolve(dirname(fileURLToPath(import.meta.url)), "..", "..");

const OUTCOMES = `
import { describe, it, test } from "node:test";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
describe("needs a tool", { skip: "the tool is not here" }, () => { it("one", () => {}); it("two", () => {}); });
test("passes", () => {});
test("skips itself", (t) => t.skip("not today"));
test("too slow", { timeout: 100 }, () => new Promise((r) => setTimeout(r, 2000)));
test("leaves a temp dir", () => { mkdtempSync(join(tmpdir(), "warden-node-")); });
test("never ends", () => new Promise(() => {}));
`;

const FAILS = `
import { test } from "node:test";
test("breaks", () => { throw new Error("boom"); });
`;

test("the runner's summary counts cancelled tests as failures and names them, counts skipped suites, and leaves no temp dir", { timeout: READY_MS }, async (t) => {
  const project = mkdtempSync(join(tmpdir(), "warden-runner-project-"));
  const runTmp = mkdtempSync(join(tmpdir(), "warden-runner-tmp-"));
  t.after(() => {
    rmSync(project, { recursive: true, force: true });
    rmSync(runTmp, { recursive: true, force: true });
  });
  mkdirSync(join(project, "test"));
  writeFileSync(join(project, "test", "outcomes.test.ts"), OUTCOMES);
  writeFileSync(join(project, "test", "fails.test.ts"), FAILS);
  writeFileSync(join(project, "package.json"), '{ "type": "module" }');
  symlinkSync(join(repo, "node_modules"), join(project, "node_modules"));

  // NODE_TEST_CONTEXT marks this process as a test file's: node --test under it would refuse to run.
  const { NODE_TEST_CONTEXT: _context, ...env } = process.env;
  const child = spawn(process.execPath, [join(repo, "scripts", "run-tests.mjs")], {
    cwd: project,
    env: { ...env, TMPDIR: runTmp },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "";
  child.stdout.setEncoding("utf8").on("data", (s: string) => (out += s));
  child.stderr.setEncoding("utf8").on("data", (s: string) => (out += s));
  const code = await new Promise<number | null>((done) => child.once("close", done));

  const summary = out.slice(out.lastIndexOf("== summary"));
  assert.equal(code, 1, out);
  assert.match(summary, /^tests 7: passed 2, failed 1, cancelled 2, skipped 2, todo 0; \d+ s$/m);
  assert.match(summary, /^FAILED {5}test\/fails\.test\.ts › breaks: boom$/m);
  assert.match(summary, /^CANCELLED {2}test\/outcomes\.test\.ts › too slow: test timed out after 100ms$/m);
  assert.match(summary, /^CANCELLED {2}test\/outcomes\.test\.ts › never ends: Promise resolution is still pending/m);
  assert.match(summary, /^skipped {4}test\/outcomes\.test\.ts › needs a tool \(a whole suite\): the tool is not here$/m);
  assert.match(summary, /^skipped {4}test\/outcomes\.test\.ts › skips itself: not today$/m);
  assert.match(summary, /^FAIL: 3 failed or cancelled$/m);
  // tsx's compile cache stays on purpose: it is shared by every run.
  assert.deepEqual(readdirSync(runTmp).filter((name) => !name.startsWith("tsx-")), [], "the run removed its temp dir and what its tests left in it");
});

const SEES_PATH = `
import { test } from "node:test";
import { writeFileSync } from "node:fs";
test("records its PATH", () => { writeFileSync(process.env.PATH_OUT, process.env.PATH ?? ""); });
`;

test("the runner gives tests a PATH of the node, the prerequisites and the system only, not the machine's shims", { timeout: READY_MS }, async (t) => {
  const project = mkdtempSync(join(tmpdir(), "warden-runner-project-"));
  t.after(() => rmSync(project, { recursive: true, force: true }));
  mkdirSync(join(project, "test"));
  writeFileSync(join(project, "test", "path.test.ts"), SEES_PATH);
  writeFileSync(join(project, "package.json"), '{ "type": "module" }');
  symlinkSync(join(repo, "node_modules"), join(project, "node_modules"));
  // A version manager's shims first on the machine's PATH, as pyenv puts them.
  const shims = join(project, "shims");
  mkdirSync(shims);
  writeFileSync(join(shims, "python3"), "#!/bin/sh\nsleep 60\n", { mode: 0o755 });
  const seen = join(project, "path.txt");

  const { NODE_TEST_CONTEXT: _context, ...env } = process.env;
  const child = spawn(process.execPath, [join(repo, "scripts", "run-tests.mjs")], {
    cwd: project,
    env: { ...env, PATH: `${shims}:${env.PATH ?? ""}`, PATH_OUT: seen },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "";
  child.stdout.setEncoding("utf8").on("data", (s: string) => (out += s));
  child.stderr.setEncoding("utf8").on("data", (s: string) => (out += s));
  assert.equal(await new Promise<number | null>((done) => child.once("close", done)), 0, out);

  const dirs = readFileSync(seen, "utf8").split(":");
  assert.ok(!dirs.includes(shims), `the shims are not on the tests' PATH: ${dirs.join(":")}`);
  assert.ok(dirs.includes(dirname(process.execPath)), "the node running the tests is");
  assert.ok(dirs.includes("/usr/bin"), "and the system's own directories are");
});

/** A test file that appends its own name to $ORDER_OUT when it starts, then takes `ms`. */
const startsThenTakes = (name: string, ms: number): string => `
import { test } from "node:test";
import { appendFileSync } from "node:fs";
appendFileSync(process.env.ORDER_OUT, "${name}\\n");
test("${name}", () => new Promise((r) => setTimeout(r, ${ms})));
`;

test("the runner starts the slowest files first, by test/durations.json, a file with no figure before them; --record-durations writes the figures of the files that passed", { timeout: READY_MS }, async (t) => {
  const project = mkdtempSync(join(tmpdir(), "warden-runner-project-"));
  t.after(() => rmSync(project, { recursive: true, force: true }));
  mkdirSync(join(project, "test"));
  writeFileSync(join(project, "test", "a.test.ts"), startsThenTakes("a", 0));
  writeFileSync(join(project, "test", "b.test.ts"), startsThenTakes("b", 300));
  writeFileSync(join(project, "test", "c.test.ts"), startsThenTakes("c", 0));
  writeFileSync(join(project, "test", "d.test.ts"), startsThenTakes("d", 0));
  writeFileSync(join(project, "test", "e.test.ts"), `${startsThenTakes("e", 0)}test("breaks", () => { throw new Error("boom"); });\n`);
  // Figures as a recorded run left them: e the slowest, c new since, one file gone since.
  const durations = join(project, "test", "durations.json");
  writeFileSync(durations, JSON.stringify({ "test/a.test.ts": 1, "test/b.test.ts": 5, "test/d.test.ts": 3, "test/e.test.ts": 7, "test/gone.test.ts": 9 }));
  writeFileSync(join(project, "package.json"), '{ "type": "module" }');
  symlinkSync(join(repo, "node_modules"), join(project, "node_modules"));
  const order = join(project, "order.txt");

  const { NODE_TEST_CONTEXT: _context, ...env } = process.env;
  // One file at a time, so that the order they start in is the order given.
  const child = spawn(process.execPath, [join(repo, "scripts", "run-tests.mjs"), "--record-durations"], {
    cwd: project,
    env: { ...env, WARDEN_TEST_CONCURRENCY: "1", ORDER_OUT: order },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "";
  child.stdout.setEncoding("utf8").on("data", (s: string) => (out += s));
  child.stderr.setEncoding("utf8").on("data", (s: string) => (out += s));
  assert.equal(await new Promise<number | null>((done) => child.once("close", done)), 1, out);

  assert.deepEqual(readFileSync(order, "utf8").split("\n").filter((l) => l !== ""), ["c", "e", "b", "d", "a"]);
  assert.match(out, /^recorded 4 files' durations in test\/durations\.json$/m);
  const recorded = JSON.parse(readFileSync(durations, "utf8")) as Record<string, number>;
  assert.deepEqual(Object.keys(recorded), ["test/a.test.ts", "test/b.test.ts", "test/c.test.ts", "test/d.test.ts", "test/e.test.ts"], "every file that ran, and no file gone from test/");
  assert.equal(recorded["test/e.test.ts"], 7, "a file with a failure keeps its figure");
  assert.ok(recorded["test/b.test.ts"]! >= 0.3, `b's figure includes its 300 ms test: ${JSON.stringify(recorded)}`);
});
