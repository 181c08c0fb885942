/**
 * A node for the reaping tests: launches one agent for the home in argv[2] the way the runner does
 * (AgentProcess: its own session, tagged, a launch record written at the fork), then waits to be
 * killed. The agent (clean-env-agent.cjs) starts a child with an EMPTY environment (no tag); the
 * node prints one JSON line { node, leader, child, record }. With argv[3] = "leader-exits" the
 * agent exits as soon as its node is gone, leaving only the clean-environment child in its session.
 */
import { fileURLToPath } from "node:url";
import { AgentProcess } from "../../../src/runner/agent-process.js";
import { LaunchRecords } from "../../../src/runner/launch-records.js";
import { AGENT_TAG_VAR, agentTagOf } from "../../../src/runner/orphans.js";

const CLEAN_ENV_AGENT = fileURLToPath(new URL("./clean-env-agent.cjs", import.meta.url));

const [home, mode] = process.argv.slice(2) as [string, string | undefined];
const records = LaunchRecords.open(home)!;
let record: string | undefined;
const agent = await AgentProcess.start({
  command: process.execPath,
  args: [CLEAN_ENV_AGENT, ...(mode === undefined ? [] : [mode])],
  cwd: home,
  env: { [AGENT_TAG_VAR]: agentTagOf(home)! },
  timeoutMs: 600_000,
  killGraceMs: 100,
  onSpawn: (pid) => {
    record = records.add(pid);
  },
});
agent.child.stdout!.once("data", (data: Buffer) => {
  process.stdout.write(`${JSON.stringify({ node: process.pid, leader: agent.pid, child: Number(String(data).trim()), record })}\n`);
});
await agent.exited();
