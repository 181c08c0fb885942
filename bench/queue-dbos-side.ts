/**
 * The DBOS Transact comparator of the queue bench (queue.bench.ts), one worker process of a fleet:
 * `node --import tsx bench/queue-dbos-side.ts <database url> <executor id> <slots>`. It registers
 * one workflow (one step: start the queue bench's agent, the same fixture warden's nodes run,
 * and wait for it to exit) and one queue of `slots` workers per process (DBOS's
 * `workerConcurrency`), launches DBOS, and prints `ready` as its first stdout line. The bench
 * enqueues with a DBOSClient; every worker process on the database dequeues (`FOR UPDATE SKIP
 * LOCKED`, DBOS's own). SIGTERM shuts DBOS down and exits.
 *
 * The agent's log ($WARDEN_FIXTURE_QUEUE_LOG) and its sleep come in through the environment and
 * the prompt, as on warden's side; WARDEN_FIXTURE_NODE is the executor id.
 */
import { spawn } from "node:child_process";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { DBOS } from "@dbos-inc/dbos-sdk";

export const DBOS_APP = "warden-queue-bench";
export const DBOS_VERSION = "queue-bench";
export const DBOS_QUEUE = "agents";
export const DBOS_WORKFLOW = "agentWorkflow";
/** DBOS polls its queues every second by default; warden's nodes look every 250 ms (and at each run's end). */
export const DBOS_POLL_MS = 250;

const agentPath = join(dirname(fileURLToPath(import.meta.url)), "..", "test", "fixtures", "agents", "queue-agent.sh");

/** Runs the agent as a node runs it (claude's print mode, stream-json) and waits for its exit. */
function runAgent(prompt: string, executor: string): Promise<number> {
  const child = spawn(agentPath, ["-p", "--output-format", "stream-json", "--verbose", "--", prompt], {
    env: { PATH: process.env.PATH ?? "", WARDEN_FIXTURE_QUEUE_LOG: process.env.WARDEN_FIXTURE_QUEUE_LOG ?? "", WARDEN_FIXTURE_NODE: executor },
    stdio: ["ignore", "pipe", "ignore"],
  });
  child.stdout!.resume();
  return new Promise((resolve, reject) => {
    child.once("error", reject);
    child.once("exit", (code) => resolve(code ?? -1));
  });
}

async function main(): Promise<void> {
  const [url, executor, slotsArg] = process.argv.slice(2);
  const slots = Number(slotsArg);
  if (url === undefined || executor === undefined || !Number.isSafeInteger(slots) || slots < 1) {
    throw new Error("usage: queue-dbos-side.ts <database url> <executor id> <slots>");
  }
  // As in fleet-side.ts: the session setting in the startup options, not a query DBOS queues
  // ahead of the borrower's own.
  const configured = new URL(url);
  configured.searchParams.set("options", "-c idle_in_transaction_session_timeout=60000");
  DBOS.setConfig({
    name: DBOS_APP,
    systemDatabaseUrl: configured.href,
    logLevel: "error",
    executorID: executor,
    applicationVersion: DBOS_VERSION,
  });
  DBOS.registerWorkflow(
    async (prompt: string): Promise<number> => {
      const code = await DBOS.runStep(() => runAgent(prompt, executor), { name: "agent" });
      if (code !== 0) throw new Error(`the agent exited ${code}`);
      return code;
    },
    { name: DBOS_WORKFLOW },
  );
  await DBOS.launch();
  await DBOS.registerQueue(DBOS_QUEUE, { workerConcurrency: slots, minPollingIntervalMs: DBOS_POLL_MS, onConflict: "always_update" });
  process.once("SIGTERM", () => {
    void DBOS.shutdown().finally(() => process.exit(0));
  });
  console.log("ready");
}

// Imported by queue.bench.ts for the names above: only a process started on this file is a worker.
if (process.argv[1] === fileURLToPath(import.meta.url)) await main();
