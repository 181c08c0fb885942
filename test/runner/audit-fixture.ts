/**
 * The misbehaving fixture agent of the audit tests (children/audit-agent.cjs): a wrapper to give
 * a provider profile as its command, the pids it started (the agent first), and their cleanup.
 */
import * as fs from "node:fs";
import * as path from "node:path";
import { fileURLToPath } from "node:url";
import { killGroupIfStillRecorded, killIfStillRecorded, type RecordedProcess } from "../support/processes.js";

const AGENT = fileURLToPath(new URL("./children/audit-agent.cjs", import.meta.url));

/** Writes `<root>/agent.sh`, which runs the fixture: it then needs no executable bit of its own. */
export function fixtureCommand(root: string): string {
  const wrapper = path.join(root, "agent.sh");
  fs.writeFileSync(wrapper, `#!/bin/sh\nexec "${process.execPath}" "${AGENT}" "$@"\n`, { mode: 0o700 });
  return wrapper;
}

/**
 * Every process the fixture started under `root`, the agent first, with the start time each had
 * (proc-start.cjs). The fixture writes them to `<root>/pids`, beside the file named by
 * WARDEN_FIXTURE_STARTS in its environment.
 */
export function fixtureProcesses(root: string): RecordedProcess[] {
  const file = path.join(root, "pids");
  if (!fs.existsSync(file)) return [];
  return fs
    .readFileSync(file, "utf8")
    .split("\n")
    .filter(Boolean)
    .map((line) => {
      const [pid, startTicks] = line.split(" ");
      return { pid: Number(pid), ...(startTicks === undefined || startTicks === "-" ? {} : { startTicks }) };
    });
}

/** The pids of fixtureProcesses. */
export function fixturePids(root: string): number[] {
  return fixtureProcesses(root).map((p) => p.pid);
}

/**
 * SIGKILLs what still runs of the processes the fixture started under `root`, with the process
 * group each leads; not a process that got one of their pids since, nor its group.
 */
export function killFixture(root: string): void {
  for (const recorded of fixtureProcesses(root)) {
    killGroupIfStillRecorded(recorded);
    killIfStillRecorded(recorded);
  }
}
