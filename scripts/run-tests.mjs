#!/usr/bin/env node
// Runs every test/**/*.test.ts through Node's own test runner with tsx as the TypeScript loader,
// the slowest files first (test/durations.json; run-test-files.mjs keeps that order, `node --test`
// would not). Extra arguments filter by path; --record-durations writes each file's figure.
// What only Debian ships (a browser, Go, OpenSSH) is installed first by test-prereqs.mjs, and
// dist/ is compiled again by test-build.mjs when src/ is newer (the nodes the tests start run it).
//
// Every test process gets a private TMPDIR, removed when the run ends however it ends (a
// cancelled test, a test process killed, Ctrl-C), so no run leaves temp dirs behind, and a PATH of
// what tests need only (testPath in test-prereqs.mjs), so that no test goes through a tool this
// machine happens to have on its PATH. The summary
// at the end is this script's, from scripts/test-outcomes.mjs: Node's own counts a timed-out or
// cancelled test apart from failures (`fail 0 … cancelled 15`) and a skipped suite not at all.
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir, userInfo } from "node:os";
import { join, relative } from "node:path";
import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import { ensurePrerequisites, testPath } from "./test-prereqs.mjs";
import { ensureBuilt } from "./test-build.mjs";

function walk(dir) {
  const out = [];
  for (const name of readdirSync(dir).sort()) {
    const p = join(dir, name);
    if (name === "fixtures" || name === "node_modules") continue;
    if (statSync(p).isDirectory()) out.push(...walk(p));
    else if (name.endsWith(".test.ts")) out.push(p);
  }
  return out;
}

const RECORD = "--record-durations";
const args = process.argv.slice(2);
const record = args.includes(RECORD);
const filters = args.filter((a) => a !== RECORD);
const matched = walk("test").filter((f) => filters.length === 0 || filters.some((x) => f.includes(x)));
if (matched.length === 0) {
  console.error("no test files matched");
  process.exit(1);
}

// run-test-files.mjs starts the files in the order given, N at a time: a long file started last is the
// run's tail, with the other slots idle. So the slowest go first, by the seconds each took on a
// recorded run (DURATIONS, written by --record-durations); a file with no figure yet goes before
// them all, as it may be long. Ties keep the path order.
const DURATIONS = "test/durations.json";
function readDurations() {
  try {
    return JSON.parse(readFileSync(DURATIONS, "utf8"));
  } catch {
    return {};
  }
}
const known = readDurations();
const seconds = (f) => (typeof known[f] === "number" ? known[f] : Infinity);
const files = [...matched].sort((a, b) => (seconds(a) === seconds(b) ? 0 : seconds(a) < seconds(b) ? 1 : -1));
// The tests' nodes and CLI runs start the compiled CLI (bin/warden.cjs): dist/ must be src/'s.
const problem = ensurePrerequisites() ?? ensureBuilt();
if (problem !== undefined) {
  console.error(problem);
  process.exit(1);
}

// 0711: PostgreSQL's clusters live in here too, and as root they run as another user, who must be
// able to enter (not list) it.
const runTmp = mkdtempSync(join(tmpdir(), "warden-test-run-"));
chmodSync(runTmp, 0o711);
// tsx keeps its compile cache in $TMPDIR/tsx-<euid>: link the machine's, or every run would compile
// every module again (rmSync removes the link, not the cache).
const tsxCache = `tsx-${process.geteuid?.() ?? userInfo().username}`;
mkdirSync(join(tmpdir(), tsxCache), { recursive: true, mode: 0o700 });
symlinkSync(join(tmpdir(), tsxCache), join(runTmp, tsxCache));
const outcomesFile = join(runTmp, "outcomes.jsonl");
// Two files at a time on two cores: more did not finish sooner on a quiet machine, where the suite
// is bound by CPU (docs/development.md "How long the suite takes").
const concurrency = process.env.WARDEN_TEST_CONCURRENCY ?? "2";
const started = Date.now();
const ownReporter = process.stdout.isTTY ? "spec" : "tap";
const child = spawn(
  process.execPath,
  [
    "--import",
    "tsx",
    fileURLToPath(new URL("./run-test-files.mjs", import.meta.url)),
    concurrency,
    ownReporter,
    outcomesFile,
    ...files,
  ],
  // WARDEN_TEST_CLI=dist: dist/ is current (ensureBuilt), so the tests start bin/warden.cjs (test/support/node.ts).
  { stdio: "inherit", env: { ...process.env, TMPDIR: runTmp, PATH: testPath(), WARDEN_TEST_CLI: "dist" } },
);
let interrupted;
for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"]) {
  process.on(signal, () => {
    interrupted = signal;
    // Ctrl-C reaches the whole process group already; a signal sent to this process alone is passed on.
    child.kill(signal);
  });
}
const [code, signal] = await new Promise((done) => child.once("exit", (c, s) => done([c, s])));
const elapsed = (Date.now() - started) / 1000;

let records = [];
try {
  records = readFileSync(outcomesFile, "utf8")
    .split("\n")
    .filter((l) => l !== "")
    .map((l) => JSON.parse(l));
} catch {
  // no test reported anything (the runner itself failed): the exit status says so below
}
rmSync(runTmp, { recursive: true, force: true });

const CANCELLED = new Set(["testTimeoutFailure", "cancelledByParent"]);
const where = (r) => [relative(process.cwd(), r.file ?? ""), ...r.name.filter((n) => n !== r.file)].join(" › ");
const passed = [];
const failed = [];
const cancelled = [];
const skipped = [];
const todo = [];
for (const r of records) {
  const fileLevel = r.name.length === 1 && r.name[0] === r.file;
  if (r.passed) {
    if (r.skip !== undefined) skipped.push(`${where(r)}${r.suite ? " (a whole suite)" : ""}: ${r.skip}`);
    else if (r.todo !== undefined) todo.push(`${where(r)}: ${r.todo}`);
    else if (!r.suite) passed.push(r);
    continue;
  }
  if (fileLevel) {
    const said = r.stderr?.length ? `; it printed: ${r.stderr.join(" | ")}` : "";
    failed.push(`${where(r)}: the test file's process failed (exit code ${r.exitCode ?? "?"}) with no test to blame${said}`);
  } else if (CANCELLED.has(r.failureType)) {
    // A suite cancelled along with its tests adds nothing: its tests are listed.
    if (!r.suite) cancelled.push(`${where(r)}: ${r.reason}`);
  } else if (!r.suite || r.failureType !== "subtestsFailed") {
    failed.push(`${where(r)}: ${r.reason}`);
  }
}

const total = passed.length + failed.length + cancelled.length + skipped.length + todo.length;
const ok = code === 0 && failed.length === 0 && cancelled.length === 0;
const out = [];
out.push("", `== summary of ${files.length} test files (scripts/run-tests.mjs): a cancelled test is a failure, a skipped suite counts as skipped`);
for (const line of failed) out.push(`FAILED     ${line}`);
for (const line of cancelled) out.push(`CANCELLED  ${line}`);
for (const line of skipped) out.push(`skipped    ${line}`);
for (const line of todo) out.push(`todo       ${line}`);
out.push(
  `tests ${total}: passed ${passed.length}, failed ${failed.length}, cancelled ${cancelled.length}, skipped ${skipped.length}, todo ${todo.length}; ${elapsed.toFixed(0)} s`,
);
if (interrupted !== undefined) out.push(`interrupted by ${interrupted}: the run is incomplete`);
else if (code !== 0 && failed.length === 0 && cancelled.length === 0) {
  out.push(`the test runner exited with ${signal ?? code} though no test failed: see its output above`);
}
if (record && interrupted === undefined) {
  // A file's figure: the sum of its top-level tests' and suites' durations (hooks included), which
  // is what orders it; its process's start-up is about the same for every file. A file with a
  // failure keeps the figure it had: it may have stopped early, or hung until a timeout.
  const failing = new Set(records.filter((r) => !r.passed).map((r) => r.file));
  const measured = {};
  for (const r of records) {
    if (r.name.length !== 1 || r.name[0] === r.file || typeof r.ms !== "number" || failing.has(r.file)) continue;
    const file = relative(process.cwd(), r.file);
    measured[file] = (measured[file] ?? 0) + r.ms / 1000;
  }
  const merged = { ...readDurations() };
  for (const [file, s] of Object.entries(measured)) merged[file] = Math.round(s * 10) / 10;
  // Files gone from test/ lose their figure.
  const all = new Set(walk("test"));
  const sorted = Object.fromEntries(Object.keys(merged).filter((f) => all.has(f)).sort().map((f) => [f, merged[f]]));
  writeFileSync(DURATIONS, `${JSON.stringify(sorted, null, 2)}\n`);
  out.push(`recorded ${Object.keys(measured).length} files' durations in ${DURATIONS}`);
}
const bad = failed.length + cancelled.length;
out.push(ok ? "PASS" : bad > 0 ? `FAIL: ${bad} failed or cancelled` : "FAIL");
console.log(out.join("\n"));
process.exit(ok ? 0 : 1);
