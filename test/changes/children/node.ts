/**
 * A node for the crash test: opens the home with a git workspace and the editing agent, starts one
 * run, prints its run id and invocation id once the agent is launched, then waits to be killed.
 * argv: home repo agent prompt
 */
import { randomUUID } from "node:crypto";
import { openWarden } from "../../../src/warden/facade.js";

const [home, repo, agent, prompt] = process.argv.slice(2) as [string, string, string, string];
const id = randomUUID();
const warden = await openWarden({
  home,
  workspaces: { repo },
  providers: { claude: { command: agent } },
  agentEnv: { PATH: process.env.PATH },
  runnerHooks: { afterLaunch: (_pid, runId) => void process.stdout.write(`${runId} ${id}\n`) },
});
const started = await warden.start("crash", id, { provider: "claude", prompt, timeout_s: 600 });
if (started.status !== "started") throw new Error(`not started: ${started.status}`);
await started.done;
