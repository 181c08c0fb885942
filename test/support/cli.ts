/**
 * The real `warden` CLI entry point run in this process: the same `main` the executable calls,
 * with its output captured. A child process costs a second or more per command on a loaded
 * machine; tests that run many commands use this, and `warden()` in node.ts where the process
 * boundary itself is under test (exit codes, signals, the executable's own environment).
 */
import { main } from "../../src/cli/main.js";
import type { CliIo } from "../../src/cli/context.js";
import { repo, type CliOptions, type CliRun } from "./node.js";

export async function wardenInProcess(args: readonly string[], options: CliOptions = {}): Promise<CliRun> {
  let stdout = "";
  let stderr = "";
  const io: CliIo = { stdout: (t) => void (stdout += t), stderr: (t) => void (stderr += t), env: options.env ?? {}, cwd: options.cwd ?? repo };
  const code = await main(["node", "warden", ...args], io);
  return { code, signal: null, stdout, stderr };
}
