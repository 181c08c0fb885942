/**
 * A fresh `node` running a module, for tests of what keeps a process alive (a worker thread, a
 * handle): the module prints one line when it has done what it came to do, and from then on it has
 * nothing left to do but exit. Whether it exits by itself is the test; the bound on that wait is
 * only there to fail with a reason (and kill the process) instead of hanging the run.
 */
import { spawn } from "node:child_process";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { READY_MS } from "./wait.js";

/** How long a process that printed its line may take to exit before it is taken as held open. */
export const EXIT_MS = 30_000;

export interface RunToExit {
  /** the process's first stdout line, parsed as JSON; undefined when it exited without printing one */
  readonly line: unknown;
  readonly code: number | null;
  readonly stderr: string;
}

let counter = 0;

/**
 * Runs `source` as an ES module written into `dir` (imports by absolute file URL) and waits for
 * its first stdout line, or its exit, then for its exit. `what` names what would hold the process
 * open, for the error when it does not exit. A file, not `--eval`: `--input-type` would pass on to
 * the process's worker threads and stop them loading their entry.
 */
export async function runToExit(dir: string, source: string, what: string): Promise<RunToExit> {
  const entry = join(dir, `run-to-exit-${process.pid}-${++counter}.mjs`);
  writeFileSync(entry, source);
  const child = spawn(process.execPath, [entry], { stdio: ["ignore", "pipe", "pipe"] });
  let stdout = "";
  let stderr = "";
  child.stderr.setEncoding("utf8").on("data", (s: string) => (stderr += s));
  const exited = new Promise<number | null>((done) => child.once("close", (code) => done(code)));
  const printed = new Promise<void>((done) =>
    child.stdout.setEncoding("utf8").on("data", (s: string) => {
      stdout += s;
      if (stdout.includes("\n")) done();
    }),
  );
  const bounded = async <T>(wait: Promise<T>, ms: number, failure: () => string): Promise<T> => {
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<never>((_, fail) => {
      timer = setTimeout(() => {
        child.kill("SIGKILL");
        fail(new Error(failure()));
      }, ms);
    });
    return Promise.race([wait, late]).finally(() => clearTimeout(timer));
  };
  await bounded(Promise.race([printed, exited]), READY_MS, () => `the process neither printed a line nor exited in ${READY_MS / 1000} s (${stderr})`);
  const code = await bounded(
    exited,
    EXIT_MS,
    () => `the process printed ${JSON.stringify(stdout)} but had not exited ${EXIT_MS / 1000} s later: ${what} kept it alive (${stderr})`,
  );
  const first = stdout.split("\n")[0]!;
  return { line: first === "" ? undefined : (JSON.parse(first) as unknown), code, stderr };
}
