/**
 * `warden invoke` of a run that failed prints why (issue 27: it printed `recorded … exit code 2`
 * and nothing else): the tool calls that failed, from the run's journal, and the end of the
 * agent's stderr, from the node. The fixture agents fail a tool call (`#fail-tool`), then print a
 * fatal error on stderr and exit 3 (`#crash`).
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync, rmSync } from "node:fs";
import { randomUUID } from "node:crypto";
import { join } from "node:path";
import { fixtureAgents, removeHome, startNode, warden, type NodeProcess } from "../support/node.js";
import { tempDir } from "../support/temp.js";

const TOKEN = "invoke-failure-operator-token-0123456789abcdef";

describe("warden invoke of a failed run", () => {
  let dir: string;
  let node: NodeProcess;

  before(async () => {
    dir = tempDir("invoke-failure");
    mkdirSync(join(dir, "ws"));
    node = await startNode({
      args: [
        "--provider", `claude=${join(fixtureAgents, "claude.mjs")}`,
        "--provider", `codex=${join(fixtureAgents, "codex.mjs")}`,
        "--workspace", `main=${join(dir, "ws")}`,
        "--log-level", "warn",
      ],
      env: { WARDEN_TOKEN: TOKEN },
    });
  });
  after(async () => {
    await node?.stop();
    removeHome(node);
    rmSync(dir, { recursive: true, force: true });
  });

  const invoke = (id: string, provider: string) =>
    warden(["invoke", "--id", id, "--provider", provider, "--wait", "60", "--", "fix it #fail-tool #crash"], { env: { WARDEN_URL: node.url, WARDEN_TOKEN: TOKEN } });

  for (const [provider, failed] of [["claude", "Bash: reported an error"], ["codex", "command_execution: exit 2"]] as const) {
    it(`${provider}: the failed tool call and the end of stderr, also on a replay`, async () => {
      const id = randomUUID();
      for (const replay of [false, true]) {
        const run = await invoke(id, provider);
        assert.equal(run.code, 1, run.stdout + run.stderr);
        assert.match(run.stdout, replay ? /^recorded api:operator \S+ \(replayed/ : /^recorded api:operator /);
        assert.match(run.stdout, /exit code +3\n/);
        assert.match(run.stdout, new RegExp(`\\n  failed +${failed.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}\n`), run.stdout);
        assert.match(run.stdout, /\n {2}stderr \(last lines; all of it: GET \/v1\/runs\/[0-9a-f-]+\/output\/stderr\):\n {4}fatal: fixture crash\n/, run.stdout);
      }
    });
  }

  it("a run that succeeded prints neither", async () => {
    const run = await warden(["invoke", "--id", randomUUID(), "--provider", "claude", "--wait", "60", "--", "fix it #noisy"], { env: { WARDEN_URL: node.url, WARDEN_TOKEN: TOKEN } });
    assert.equal(run.code, 0, run.stdout + run.stderr);
    assert.doesNotMatch(run.stdout, /stderr \(last lines|\n {2}failed /);
  });
});
