// A node:test reporter that writes one JSON line per finished test, suite and test file, so that
// scripts/run-tests.mjs can print a summary that counts what Node's own does not: a cancelled test
// (timed out, or still pending when its file's process ended) is a failure, and a skipped suite
// counts as skipped. Used as `--test-reporter=./scripts/test-outcomes.mjs
// --test-reporter-destination=<file>` next to Node's own reporter.

/** What a failure says: the error's message, or the failure type Node gives when there is none. */
function reason(error) {
  if (error === undefined || error === null) return "failed";
  const cause = error.cause;
  if (cause !== undefined && cause !== null) {
    if (typeof cause === "string") return cause;
    if (typeof cause.message === "string" && cause.message !== "") return cause.message.split("\n")[0];
  }
  return String(error.message ?? error.failureType ?? "failed").split("\n")[0];
}

export default async function* outcomes(source) {
  // The names of the suites a test sits in, per file, by nesting level (test:start comes first).
  const path = new Map();
  // The last lines a test file's process wrote on stderr: why a file that died without a test to
  // blame failed.
  const stderr = new Map();
  for await (const event of source) {
    const data = event.data;
    if (event.type === "test:stderr") {
      const lines = [...(stderr.get(data.file) ?? []), ...String(data.message).split("\n").filter((l) => l.trim() !== "" && !/^\s+at |^Node\.js v/.test(l))];
      stderr.set(data.file, lines.slice(-3));
      continue;
    }
    if (event.type === "test:start") {
      const stack = path.get(data.file) ?? [];
      stack.length = data.nesting;
      stack.push(data.name);
      path.set(data.file, stack);
      continue;
    }
    if (event.type !== "test:pass" && event.type !== "test:fail") continue;
    const stack = path.get(data.file) ?? [];
    const outer = stack.slice(0, data.nesting);
    const error = data.details?.error;
    yield JSON.stringify({
      file: data.file,
      name: [...outer, data.name],
      suite: data.details?.type === "suite",
      passed: event.type === "test:pass",
      skip: data.skip === undefined || data.skip === false ? undefined : data.skip === true ? "skipped" : String(data.skip),
      todo: data.todo === undefined || data.todo === false ? undefined : String(data.todo),
      failureType: error?.failureType,
      reason: event.type === "test:fail" ? reason(error) : undefined,
      exitCode: error?.exitCode,
      stderr: event.type === "test:fail" && data.name === data.file ? stderr.get(data.file) : undefined,
      ms: data.details?.duration_ms,
    }) + "\n";
  }
}
