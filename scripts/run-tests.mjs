#!/usr/bin/env node
// Runs every test/**/*.test.ts through Node's own test runner with tsx as the TypeScript loader.
// Node 20's --test takes no globs, so the files are listed here. Extra arguments filter by path.
// What only Debian ships (a browser, Go, OpenSSH) is installed first by test-prereqs.mjs.
import { readdirSync, statSync } from "node:fs";
import { join } from "node:path";
import { spawnSync } from "node:child_process";
import { ensurePrerequisites } from "./test-prereqs.mjs";

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

const filters = process.argv.slice(2);
const files = walk("test").filter((f) => filters.length === 0 || filters.some((x) => f.includes(x)));
if (files.length === 0) {
  console.error("no test files matched");
  process.exit(1);
}
const problem = ensurePrerequisites();
if (problem !== undefined) {
  console.error(problem);
  process.exit(1);
}
const concurrency = process.env.WARDEN_TEST_CONCURRENCY ?? "2";
const r = spawnSync(
  process.execPath,
  ["--import", "tsx", "--test", `--test-concurrency=${concurrency}`, ...files],
  { stdio: "inherit" },
);
process.exit(r.status ?? 1);
