/**
 * Classifies a verified run (DESIGN.md "requires reconciliation", G6): clean — its result may be
 * recorded — or requiring an operator's reconciliation, with every reason found.
 */
import type { Digest } from "../core/digest.js";
import { RunLifecycle } from "./lifecycle.js";
import type { TerminationReason } from "./types.js";
import type { VerifyReport } from "./verify.js";

export type ReconciliationReason =
  | "no-run-started"
  | "not-terminated"
  | "incomplete-last-line"
  | "effect-not-finished"
  | "effect-outcome-unknown"
  | "terminated-with-open-effect"
  | "verification-failed";

export interface ReconciliationFinding {
  readonly reason: ReconciliationReason;
  readonly effect_id?: string;
  readonly seq?: number;
}

export interface RunInspection {
  /** verified and no reconciliation needed */
  clean: boolean;
  requires_reconciliation: boolean;
  reasons: readonly ReconciliationFinding[];
  termination?: TerminationReason;
  result_hash?: Digest;
  open_effects: readonly string[];
  effects: number;
  /**
   * The agent's process as the node noted it once started (pid and host): where to check that it
   * is gone before an operator states `effects_stopped`.
   */
  agent_process?: AgentProcess;
  /** the kernel killed processes of the run at its memory bound (the runner's `memory_bound` note) */
  memory_bound?: MemoryBound;
}

export interface MemoryBound {
  /** the run's bound, bytes (null: not known to the node that noted it) */
  readonly bytes: number | null;
  readonly processes_killed: number;
}

/** The runner's note that the kernel killed processes of the run at its memory bound. */
function memoryBoundOf(report: VerifyReport): MemoryBound | undefined {
  for (const entry of report.valid) {
    const event = entry.event;
    const bound = event.type === "note" ? event.memory_bound : undefined;
    if (typeof bound !== "object" || bound === null || Array.isArray(bound)) continue;
    const { bytes, processes_killed } = bound as { bytes?: unknown; processes_killed?: unknown };
    if (Number.isSafeInteger(processes_killed) && (bytes === null || Number.isSafeInteger(bytes))) return { bytes: bytes as number | null, processes_killed: processes_killed as number };
  }
  return undefined;
}

export interface AgentProcess {
  readonly pid: number;
  readonly host: string;
}

/** The first `note` naming the agent's process (the runner writes it right after the launch). */
function agentProcessOf(report: VerifyReport): AgentProcess | undefined {
  for (const entry of report.valid) {
    const event = entry.event;
    if (event.type !== "note") continue;
    const process = event.process;
    if (typeof process !== "object" || process === null || Array.isArray(process)) continue;
    const { pid, host } = process as { pid?: unknown; host?: unknown };
    if (Number.isSafeInteger(pid) && typeof host === "string") return { pid: pid as number, host };
  }
  return undefined;
}

/** Terminations that stop a run from outside: an effect still open then may have happened or not. */
const ABRUPT: ReadonlySet<TerminationReason> = new Set(["stopped", "cancelled", "timeout", "crashed"]);

export function inspectRun(report: VerifyReport): RunInspection {
  const reasons: ReconciliationFinding[] = [];
  const failure = report.first_error;
  // A partial last line is what a crash mid-append leaves: the prefix is still trustworthy, so it
  // is judged on its own rules below. Any other failure means the journal cannot be trusted.
  if (failure !== undefined && !(report.incomplete_tail && failure.code === "journal-incomplete-line")) {
    reasons.push({ reason: "verification-failed", ...(failure.seq !== null ? { seq: failure.seq } : {}) });
  }

  const lifecycle = new RunLifecycle();
  for (const entry of report.valid) lifecycle.apply(entry.event, entry.seq);

  if (!lifecycle.started) reasons.push({ reason: "no-run-started", seq: 0 });
  const termination = lifecycle.termination;
  if (termination === undefined) reasons.push({ reason: "not-terminated" });
  if (report.incomplete_tail) reasons.push({ reason: "incomplete-last-line", seq: report.entries });

  const open: string[] = [];
  let effects = 0;
  for (const effect of lifecycle.effects()) {
    effects++;
    if (effect.outcome === undefined) {
      open.push(effect.effect_id);
      reasons.push({ reason: "effect-not-finished", effect_id: effect.effect_id, seq: effect.started_seq });
    } else if (effect.outcome === "unknown") {
      reasons.push({ reason: "effect-outcome-unknown", effect_id: effect.effect_id, seq: effect.finished_seq ?? effect.started_seq });
    }
  }
  if (termination !== undefined && ABRUPT.has(termination.reason) && open.length > 0) {
    reasons.push({ reason: "terminated-with-open-effect", seq: termination.seq });
  }

  const requires = reasons.length > 0;
  const agentProcess = agentProcessOf(report);
  const memoryBound = memoryBoundOf(report);
  return {
    clean: report.ok && !requires,
    requires_reconciliation: requires,
    reasons,
    ...(termination !== undefined ? { termination: termination.reason } : {}),
    ...(termination?.result_hash !== undefined ? { result_hash: termination.result_hash } : {}),
    open_effects: open,
    effects,
    ...(agentProcess !== undefined ? { agent_process: agentProcess } : {}),
    ...(memoryBound !== undefined ? { memory_bound: memoryBound } : {}),
  };
}
