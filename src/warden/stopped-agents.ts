/**
 * What a node did about the agents a dead predecessor on its home left running (runner/orphans.ts
 * kills them at open), and about its own agents that outlived the grace period of its shutdown
 * (`reason: "shutdown"`): one file per run and killing node under `<home>/stopped-agents/`, so that
 * `inspect` can tell the operator who is about to sign `effects_stopped` that the run's agent is
 * gone and who stopped it — also after further restarts. The journal cannot carry it: its run's
 * writer is dead (its last line may be partial), and DESIGN's format has one writer per run.
 *
 * A record is canonical JSON, published create-new and fsynced (storage: publishNewFileSync), named
 * `<run id>.<node pid>.<node start ticks>`: a run reaped again by a later node gets a record of its
 * own. Records are node-local, like `<home>/outputs/`: in a fleet, the node that restarted on the
 * dead node's home is the one that tells.
 */
import { lstatSync, readdirSync } from "node:fs";
import { hostname } from "node:os";
import { join } from "node:path";
import { canonicalJson } from "../core/canonical.js";
import { ensurePrivateDirSync, publishNewFileSync, readPrivateFileSync } from "../storage/secure-fs.js";
import type { AgentStop } from "../invocations/types.js";
import { RUN_ID_PATTERN, isRunId } from "../journal/schema.js";
import type { ReapedRun } from "../runner/orphans.js";

export const STOPPED_AGENTS_DIR = "stopped-agents";
const RECORD_RE = new RegExp(`^(${RUN_ID_PATTERN})\\.[1-9][0-9]{0,9}\\.[0-9]{1,20}$`);
const RECORD_MAX_BYTES = 64 * 1024;

/** Records, durably, the runs whose agents this node (pid, start ticks) killed: at open, or at its shutdown. */
export function recordAgentStops(
  home: string,
  runs: readonly ReapedRun[],
  self: { pid: number; startTicks: string },
  now = new Date(),
  reason?: "shutdown",
): void {
  // The run id comes from a process's environment, which the agent could set: only a UUID names a file.
  const named = runs.filter((run) => isRunId(run.run_id));
  if (named.length === 0) return;
  const dir = join(home, STOPPED_AGENTS_DIR);
  ensurePrivateDirSync(dir, { create: true });
  for (const run of named) {
    const stop: AgentStop = {
      at: now.toISOString(),
      killed: [...run.pids].sort((a, b) => a - b),
      by: { pid: self.pid, host: hostname() },
      ...(run.node_pid === undefined ? {} : { node_pid: run.node_pid }),
      ...(reason === undefined ? {} : { reason }),
    };
    publishNewFileSync(join(dir, `${run.run_id}.${self.pid}.${self.startTicks}`), canonicalJson({ v: 1, run_id: run.run_id, ...stop }));
  }
}

/** Every stop recorded for `runId` on this home, oldest first; none when there is none. */
export function agentStopsOf(home: string, runId: string): AgentStop[] {
  const dir = join(home, STOPPED_AGENTS_DIR);
  if (lstatSync(dir, { throwIfNoEntry: false }) === undefined) return []; // no node on this home ever killed an orphan
  ensurePrivateDirSync(dir, { create: false });
  const names = readdirSync(dir);
  const stops: AgentStop[] = [];
  for (const name of names) {
    if (RECORD_RE.exec(name)?.[1] !== runId) continue;
    const stop = parseStop(readPrivateFileSync(join(dir, name), RECORD_MAX_BYTES).toString("utf8"), runId);
    if (stop !== undefined) stops.push(stop);
  }
  return stops.sort((a, b) => (a.at < b.at ? -1 : a.at > b.at ? 1 : 0));
}

function parseStop(text: string, runId: string): AgentStop | undefined {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return undefined;
  }
  if (typeof value !== "object" || value === null) return undefined;
  const r = value as { v?: unknown; run_id?: unknown; at?: unknown; killed?: unknown; by?: { pid?: unknown; host?: unknown }; node_pid?: unknown; reason?: unknown };
  const pid = (n: unknown): n is number => Number.isSafeInteger(n) && (n as number) > 0;
  if (r.v !== 1 || r.run_id !== runId || typeof r.at !== "string" || !Array.isArray(r.killed) || !r.killed.every(pid)) return undefined;
  if (typeof r.by !== "object" || r.by === null || !pid(r.by.pid) || typeof r.by.host !== "string") return undefined;
  if (r.node_pid !== undefined && !pid(r.node_pid)) return undefined;
  if (r.reason !== undefined && r.reason !== "shutdown") return undefined;
  return {
    at: r.at,
    killed: r.killed,
    by: { pid: r.by.pid, host: r.by.host },
    ...(r.node_pid === undefined ? {} : { node_pid: r.node_pid }),
    ...(r.reason === undefined ? {} : { reason: r.reason }),
  };
}
