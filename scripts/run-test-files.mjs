#!/usr/bin/env node
// Runs the test files given, in the order given, through node:test's run(), `concurrency` files at
// a time, each in its own process, and writes two reports: Node's own (tap, or spec on a terminal)
// on stdout and scripts/test-outcomes.mjs's to `outcomesFile`. scripts/run-tests.mjs starts it
// (with tsx as the loader, which run() passes on to the test files' processes); on its own:
//
//   node --import tsx scripts/run-test-files.mjs <concurrency> <tap|spec> <outcomesFile> <file>…
//
// Why not `node --test <file>…`: Node 20's CLI sorts the files by path before it starts any, so
// the order scripts/run-tests.mjs chose (the slowest first) would be lost; run() keeps it.
import { createWriteStream } from "node:fs";
import { resolve } from "node:path";
import { once, setMaxListeners } from "node:events";
import { PassThrough } from "node:stream";
import { run } from "node:test";
import { spec, tap } from "node:test/reporters";
import outcomes from "./test-outcomes.mjs";

const [concurrency, reporter, outcomesFile, ...files] = process.argv.slice(2);
if (!/^[1-9][0-9]*$/.test(concurrency ?? "") || !["tap", "spec"].includes(reporter) || outcomesFile === undefined || files.length === 0) {
  console.error("usage: node --import tsx scripts/run-test-files.mjs <concurrency> <tap|spec> <outcomesFile> <file>…");
  process.exit(2);
}

// A signal ends the run as Ctrl-C ends `node --test`: the test files' processes are killed
// (run() kills them on abort) and the reports say what ran.
const abort = new AbortController();
// run() adds a listener per test file's process: hundreds, not a leak.
setMaxListeners(0, abort.signal);
for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"]) process.on(signal, () => abort.abort());

// Absolute paths, as `node --test` gives them: the reports name files by them.
const stream = run({ files: files.map((f) => resolve(f)), concurrency: Number(concurrency), signal: abort.signal });
const own = new PassThrough({ objectMode: true });
const ours = new PassThrough({ objectMode: true });
stream.on("data", (event) => {
  // Exit status 1 when a test failed, as `node --test`'s (a failing todo test fails nothing).
  if (event.type === "test:fail" && !event.data.todo) process.exitCode = 1;
  own.write(event);
  ours.write(event);
});
stream.on("end", () => {
  own.end();
  ours.end();
});
// Node's report must not end stdout: it is shared with scripts/run-tests.mjs, which prints its
// summary after (ending a socketpair shuts it down for every process that holds it).
async function report(chunks, out, end) {
  for await (const chunk of chunks) if (!out.write(chunk)) await once(out, "drain");
  if (end) await new Promise((done) => out.end(done));
}
await Promise.all([
  report(reporter === "spec" ? own.pipe(new spec()) : tap(own), process.stdout, false),
  report(outcomes(ours), createWriteStream(outcomesFile), true),
]).catch((error) => {
  console.error(`a test reporter failed: ${error.message}`);
  process.exitCode = 1;
});
