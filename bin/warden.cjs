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
"use strict";
const IO_THREADS = "64";
if (process.env.UV_THREADPOOL_SIZE === undefined) {
  process.env.UV_THREADPOOL_SIZE = IO_THREADS;
  require("node:fs").stat(".", () => undefined);
  delete process.env.UV_THREADPOOL_SIZE;
}
import("../dist/src/cli/run.js");
