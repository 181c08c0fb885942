#!/usr/bin/env node
// The compiled CLI (dist/, `npm run build`) that the tests' nodes and CLI runs start, as users
// start it (bin/warden.cjs): brought up to date with src/ before any test runs, so that no test
// runs code older than the source it tests. Run by scripts/run-tests.mjs; `node
// scripts/test-build.mjs --check` only reports.
//
// Why dist and not tsx: a node started through tsx spends about twice the CPU of the compiled one
// (every module, and every worker thread's, goes through tsx's loader), and the suite starts
// hundreds of them on two cores (docs/development.md "How long the suite takes").
import { spawnSync } from "node:child_process";
import { readdirSync, statSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const repo = resolve(dirname(fileURLToPath(import.meta.url)), "..");

/** src/'s TypeScript that tsconfig.build.json compiles (the console is built apart, by build-console.mjs). */
function sources(root, dir = join(root, "src")) {
  const out = [];
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, entry.name);
    if (entry.isDirectory()) {
      if (p !== join(root, "src", "console")) out.push(...sources(root, p));
    } else if (entry.name.endsWith(".ts") && !entry.name.endsWith(".d.ts")) out.push(p);
  }
  return out;
}

function mtime(path) {
  try {
    return statSync(path).mtimeMs;
  } catch {
    return undefined;
  }
}

/** The first source (relative to `root`) whose compiled file is missing or older than it, or undefined when dist is current. */
export function staleSource(root = repo) {
  for (const source of sources(root)) {
    const compiled = join(root, "dist", relative(root, source)).replace(/\.ts$/, ".js");
    const built = mtime(compiled);
    if (built === undefined || built < mtime(source)) return relative(root, source);
  }
  return undefined;
}

/** Compiles src/ into dist/ when it is out of date; returns an error line, or undefined when dist is current. */
export function ensureBuilt({ checkOnly = false, log = (s) => process.stderr.write(s + "\n") } = {}) {
  const stale = staleSource();
  if (stale === undefined) return undefined;
  if (checkOnly) return `dist/ is older than ${stale}: run npm run build`;
  log(`test set-up: dist/ is older than ${stale}: compiling src/ (tsc -p tsconfig.build.json, as npm run build does)`);
  // The package's own tsc, run by this node: not whatever `tsc` or `npm` this machine has on PATH.
  const tsc = join(repo, "node_modules", "typescript", "bin", "tsc");
  const r = spawnSync(process.execPath, [tsc, "-p", "tsconfig.build.json"], { cwd: repo, stdio: ["ignore", "inherit", "inherit"] });
  if (r.status !== 0) return `compiling src/ into dist/ failed (exit ${r.status ?? r.signal}): run npm run build`;
  const still = staleSource();
  return still === undefined ? undefined : `dist/ is still older than ${still} after compiling: run npm run build`;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const problem = ensureBuilt({ checkOnly: process.argv.includes("--check") });
  if (problem !== undefined) {
    console.error(problem);
    process.exit(1);
  }
}
