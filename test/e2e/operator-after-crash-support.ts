/** Shared by the operator-after-crash*.test.ts files: a node with the fixture claude, and polling. */
import { join } from "node:path";
import { fixtureAgents, startNode, type NodeProcess } from "../client/harness.js";

export { waitFor } from "../support/wait.js";

/** `warden serve` on `home` with the fixture claude, operator token `token`, quiet logs. */
export function startClaudeNode(home: string, token: string, args: readonly string[] = [], env: Record<string, string> = {}): Promise<NodeProcess> {
  return startNode({
    home,
    args: ["--provider", `claude=${join(fixtureAgents, "claude.mjs")}`, "--log-level", "warn", ...args],
    env: { WARDEN_TOKEN: token, ...env },
  });
}
