/**
 * Tests that need a file system in a given state (full, small, read-only) make one where nothing
 * outside them sees it and no privilege is needed: a tmpfs mounted in a user and mount namespace
 * of their own (`unshare -rm`), by the shell script they run there.
 */
import { spawn, spawnSync } from "node:child_process";

/** Whether this machine lets a process make user and mount namespaces (else such tests skip). */
export const ownMountsAvailable = spawnSync("unshare", ["-rm", "true"]).status === 0;

export interface ScriptRun {
  readonly status: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

/** Runs the bash `script` (named `name`, with `args` as $1…) in namespaces of its own, to its exit. */
export async function runWithOwnMounts(name: string, script: string, args: readonly string[]): Promise<ScriptRun> {
  const child = spawn("unshare", ["-rm", "bash", "-c", script, name, ...args], { stdio: ["ignore", "pipe", "pipe"] });
  let stdout = "";
  let stderr = "";
  child.stdout.setEncoding("utf8").on("data", (d: string) => (stdout += d));
  child.stderr.setEncoding("utf8").on("data", (d: string) => (stderr += d));
  const status = await new Promise<number | null>((done) => child.once("exit", done));
  return { status, stdout, stderr };
}
