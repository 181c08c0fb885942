/**
 * The misbehaving fixture agent of the audit tests (children/audit-agent.cjs): a wrapper to give
 * a provider profile as its command, the pids it started (the agent first), and their cleanup.
 */
import * as fs from "node:fs";
import * as path from "node:path";
import { fileURLToPath } from "node:url";

const AGENT = fileURLToPath(new URL("./children/audit-agent.cjs", import.meta.url));

/** Writes `<root>/agent.sh`, which runs the fixture: it then needs no executable bit of its own. */
export function fixtureCommand(root: string): string {
  const wrapper = path.join(root, "agent.sh");
  fs.writeFileSync(wrapper, `#!/bin/sh\nexec "${process.execPath}" "${AGENT}" "$@"\n`, { mode: 0o700 });
  return wrapper;
}

/**
 * Every pid the fixture started under `root`, the agent first. The fixture writes them to
 * `<root>/pids`, beside the file named by WARDEN_FIXTURE_STARTS in its environment.
 */
export function fixturePids(root: string): number[] {
  const file = path.join(root, "pids");
  return fs.existsSync(file) ? fs.readFileSync(file, "utf8").split("\n").filter(Boolean).map(Number) : [];
}

/** SIGKILLs every process the fixture started under `root`, with the process group each leads. */
export function killFixture(root: string): void {
  for (const pid of fixturePids(root)) {
    for (const target of [-pid, pid]) {
      try {
        process.kill(target, "SIGKILL");
      } catch {
        // gone already
      }
    }
  }
}
