#!/usr/bin/env node
// Thin launcher: the compiled CLI lives in dist/ (built by `npm run build`, run by `prepare`).
//
// CommonJS on purpose: it runs before any module is loaded the asynchronous way, which would start
// libuv's I/O thread pool at its default size of four. libuv reads UV_THREADPOOL_SIZE once, when
// its first job starts the pool; every fdatasync holds a thread for as long as the disk takes, and
// a node has many at once (a synced journal line for each concurrent run, a partial for each blob
// a commit publishes): with four, a fifth run's sync waits for another run's disk. The pool is
// started here (one stat) and the variable taken back out of the environment, so the agents the
// node launches (often Node programs themselves) do not inherit it. A size the user set stays.
// Only `serve` runs a node: a client command answers before four threads would ever be busy, and
// starting sixty-four would only delay its answer.
"use strict";
const IO_THREADS = "64";
if (process.argv[2] === "serve" && process.env.UV_THREADPOOL_SIZE === undefined) {
  process.env.UV_THREADPOOL_SIZE = IO_THREADS;
  require("node:fs").stat(".", () => undefined);
  delete process.env.UV_THREADPOOL_SIZE;
}
enablePrivateCompileCache();
import("../dist/src/cli/run.js");

/**
 * On Node >= 22.1, keeps V8's compiled code of the CLI's modules between runs (most of a client
 * command's start is compiling them). Not in Node's default place, os.tmpdir()/node-compile-cache:
 * any local user can create that directory first and fill it, and code read from a cache another
 * user writes would run as this one. The cache is an optimisation: any doubt, and there is none.
 */
function enablePrivateCompileCache() {
  const mod = require("node:module");
  if (typeof mod.enableCompileCache !== "function" || process.env.NODE_DISABLE_COMPILE_CACHE !== undefined) return;
  const fs = require("node:fs");
  const path = require("node:path");
  const os = require("node:os");
  try {
    const base = process.env.XDG_CACHE_HOME || path.join(os.homedir(), ".cache");
    const dir = path.join(base, "warden", "compile-cache");
    fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
    // The directory and every one above it up to the cache base must be this user's alone.
    const uid = typeof process.getuid === "function" ? process.getuid() : undefined;
    for (let at = dir; ; at = path.dirname(at)) {
      const st = fs.lstatSync(at);
      if (!st.isDirectory() || (uid !== undefined && st.uid !== uid) || (st.mode & 0o022) !== 0) return;
      if (at === base) break;
    }
    if ((fs.lstatSync(dir).mode & 0o077) !== 0) return;
    mod.enableCompileCache(dir);
  } catch {
    // no cache: the CLI only starts slower
  }
}
