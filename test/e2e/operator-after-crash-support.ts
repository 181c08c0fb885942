/** Shared by the operator-after-*.test.ts files: a node with the fixture claude, the CLI on its home, and polling. */
import { existsSync, mkdirSync, readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import { fixtureAgents, startNode, type CliRun, type NodeProcess } from "../support/node.js";
import { killIfStillRecorded } from "../support/processes.js";
import { tempDir } from "../support/temp.js";
import { wardenInProcess } from "../support/cli.js";

export { waitFor } from "../support/wait.js";

/** `warden serve` on `home` with the fixture claude, operator token `token`, quiet logs. */
export function startClaudeNode(home: string, token: string, args: readonly string[] = [], env: Record<string, string> = {}): Promise<NodeProcess> {
  return startNode({
    home,
    args: ["--provider", `claude=${join(fixtureAgents, "claude.mjs")}`, "--log-level", "warn", ...args],
    env: { WARDEN_TOKEN: token, ...env },
  });
}

/**
 * An operator's scene on one home: a node with the fixture claude and a workspace `main`, the
 * agents' start log (pids by kind: `claude`, `grandchild`), and the CLI run in-process on it.
 */
export interface OperatorScene {
  readonly root: string;
  readonly home: string;
  start(): Promise<NodeProcess>;
  warden(args: readonly string[]): Promise<CliRun>;
  startedPids(kind: string): number[];
  /** kills what the agents started, whatever a failed test left running, and removes the scene */
  remove(): void;
}

export function operatorScene(area: string, token: string): OperatorScene {
  const root = tempDir(area);
  const home = join(root, "home");
  const workspace = join(root, "workspace");
  const starts = join(root, "starts.log");
  mkdirSync(home, { mode: 0o700 });
  mkdirSync(workspace);
  const started = (kind: string): { provider: string; pid: number; startTicks?: string }[] =>
    (existsSync(starts) ? readFileSync(starts, "utf8") : "")
      .split("\n")
      .filter(Boolean)
      .map((l) => JSON.parse(l) as { provider: string; pid: number; startTicks?: string })
      .filter((s) => s.provider === kind);
  const startedPids = (kind: string): number[] => started(kind).map((s) => s.pid);
  return {
    root,
    home,
    start: () => startClaudeNode(home, token, ["--workspace", `main=${workspace}`], { WARDEN_FIXTURE_STARTS: starts }),
    warden: (args) => wardenInProcess(args, { env: { WARDEN_HOME: home, WARDEN_TOKEN: token }, cwd: root }),
    startedPids,
    remove: () => {
      // Gone, as they should be; their pids may be another test's by now.
      for (const s of [...started("claude"), ...started("grandchild")]) killIfStillRecorded(s);
      rmSync(root, { recursive: true, force: true });
    },
  };
}
