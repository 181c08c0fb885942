/**
 * Child of full-home.test.ts, on a small tmpfs of its own (argv[2]) that holds the node's home and
 * its workspace. argv[4] "files": a run's agent (the audit fixture, argv[3], "work fill-inodes")
 * takes every inode; then a new run is asked for; then the agent's files are removed. "bytes": a
 * run's agent ("work fill-disk") fills the disk; then
 * a new run and a queued one are asked for, on the full disk and with less room than a run needs;
 * then the fill is removed. Prints one JSON object of
 * what happened at each step.
 */
import * as fs from "node:fs";
import * as path from "node:path";
import { randomUUID } from "node:crypto";
import { isWardenError } from "../../../src/core/errors.js";
import { openWarden } from "../../../src/warden/facade.js";
import { waitFor } from "../../support/wait.js";

const [disk, wrapper, mode] = process.argv.slice(2) as [string, string, "bytes" | "files"];
const MiB = 1024 * 1024;
const home = path.join(disk, "home");
const workspace = path.join(disk, "ws");
fs.mkdirSync(workspace);
const warden = await openWarden({
  home,
  limits: { runFreeBytes: 4 * MiB, runFreeFiles: 64 },
  workspaces: { main: workspace },
  providers: { kimi: { command: wrapper } },
  agentEnv: { PATH: process.env.PATH, WARDEN_FIXTURE_STARTS: path.join(disk, "starts") },
  // watched from outside (pids, a starts file beside the workspace): unconfined by explicit choice
  isolation: "none",
  killGraceMs: 300,
});
const request = (prompt: string): { provider: string; prompt: string; timeout_s: number } => ({ provider: "kimi", prompt, timeout_s: 600 });
const available = (): number => {
  const st = fs.statfsSync(home);
  return st.bavail * st.bsize;
};
const report: Record<string, unknown> = {};
const refusal = (error: unknown): Record<string, unknown> => (isWardenError(error) ? { code: error.code, status: error.status, message: error.message } : { thrown: String(error) });

if (mode === "files") {
  // The agent takes every inode; the disk keeps its bytes.
  const taking = await warden.start("full", randomUUID(), request("work fill-inodes"));
  if (taking.status !== "started") throw new Error(`not started: ${taking.status}`);
  report.filled = await taking.done.then(
    (outcome) => outcome.status,
    (error: unknown) => (isWardenError(error) ? error.code : String(error)),
  );
  report.free_files = fs.statfsSync(home).ffree;
  report.refused = await warden.start("full", randomUUID(), request("work exit-now")).then((started) => ({ started: started.status }), refusal);
  fs.rmSync(path.join(workspace, "inodes"), { recursive: true });
  const after = await warden.start("full", randomUUID(), request("work exit-now"));
  report.after = after.status === "started" ? (await after.done).status : after.status;
  await warden.close({ graceMs: 0 });
  process.stdout.write(`${JSON.stringify(report)}\n`);
  process.exit(0);
}

const fillingId = randomUUID();
const filling = await warden.start("full", fillingId, request("work fill-disk"));
if (filling.status !== "started") throw new Error(`not started: ${filling.status}`);
// Whether the fill left room to record the run's end is the disk's to say: recorded, or a
// rejection that leaves it unresolved, are both what a full disk may give.
report.filled = await filling.done.then(
  (outcome) => outcome.status,
  (error: unknown) => (isWardenError(error) ? error.code : String(error)),
);
report.filled_reads = (await warden.lookup("full", fillingId))?.status;
report.available_after_fill = available();
const verified = await warden.verifyRun(filling.run_id);
report.filled_journal = { ok: verified.ok, incomplete_tail: verified.incomplete_tail, requires_reconciliation: verified.requires_reconciliation };

const refusedId = randomUUID();
report.refused = await warden.start("full", refusedId, request("work exit-now")).then((started) => ({ started: started.status }), refusal);
report.refused_claimed = (await warden.lookup("full", refusedId)) !== undefined;
// The queue's own store refuses a submission on a disk this full.
report.submit_full = await warden.submit("full", randomUUID(), request("work exit-now")).then((s) => ({ submitted: s.status }), refusal);

// Some room again, less than a run needs: 2 MiB.
const fill = path.join(workspace, "fill");
fs.truncateSync(fill, Math.max(0, fs.statSync(fill).size - 2 * MiB));
report.available_short = available();
report.refused_short = await warden.start("full", randomUUID(), request("work exit-now")).then((started) => ({ started: started.status }), refusal);
// A submission is stored; the node takes no queued run while short. The dequeue loop ticks at a
// submission and every 250 ms: a second is several ticks.
const queuedId = randomUUID();
await warden.submit("full", queuedId, request("work exit-now"));
await new Promise((resolve) => setTimeout(resolve, 1000));
report.queued_while_short = (await warden.lookupQueued("full", queuedId))?.status ?? "not queued";
report.queued_claimed_while_short = (await warden.lookup("full", queuedId)) !== undefined;

fs.rmSync(path.join(workspace, "fill"));
report.queued_after = await waitFor("the queued run recorded once there is room", async () => {
  const outcome = await warden.lookup("full", queuedId);
  return outcome?.status === "recorded" ? outcome.status : undefined;
});
const after = await warden.start("full", randomUUID(), request("work exit-now"));
report.after = after.status === "started" ? (await after.done).status : after.status;
await warden.close({ graceMs: 0 });
process.stdout.write(`${JSON.stringify(report)}\n`);
