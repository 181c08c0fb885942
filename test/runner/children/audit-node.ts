/**
 * A node for the audit tests of shutdown and kill -9 (audit-node.test.ts): opens a Warden on
 * argv[2] whose kimi command is argv[3], starts one run of the prompt argv[4], and prints
 * `{"run_id", "agent"}` once the agent is launched and its journal says so. On SIGTERM it closes
 * the way `warden serve` does (grace argv[5] ms), prints "closed", and then only exits when nothing
 * holds it any more.
 */
import * as path from "node:path";
import { randomUUID } from "node:crypto";
import { openWarden } from "../../../src/warden/facade.js";

const [home, command, prompt, graceMs] = process.argv.slice(2) as [string, string, string, string];
let launched!: (pid: number) => void;
const agentPid = new Promise<number>((resolve) => (launched = resolve));
const warden = await openWarden({
  home,
  providers: { kimi: { command } },
  agentEnv: { PATH: process.env.PATH, WARDEN_FIXTURE_STARTS: path.join(path.dirname(home), "starts") },
  // watched from outside (pids, a starts file beside the workspace): unconfined by explicit choice
  isolation: "none",
  killGraceMs: 300,
  runnerHooks: { afterLaunch: (pid) => launched(pid) },
});
process.once("SIGTERM", () => {
  void warden.close({ graceMs: Number(graceMs) }).then(() => process.stdout.write("closed\n"));
});
const id = randomUUID();
const started = await warden.start("audit", id, { provider: "kimi", prompt, timeout_s: 600 });
if (started.status !== "started") throw new Error(`not started: ${started.status}`);
const agent = await agentPid;
// The runner journals where the agent runs (pid, host) right after the launch, without waiting for
// the write: the test may kill this node as soon as it reads the line, so the line waits for it.
while ((await warden.invocations.inspect("audit", id)).report.journal.agent_process === undefined) await new Promise((r) => setTimeout(r, 20));
process.stdout.write(`${JSON.stringify({ run_id: started.run_id, agent })}\n`);
