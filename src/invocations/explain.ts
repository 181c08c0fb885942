/**
 * The words for why a run needs an operator, shared by the CLI (`invocations show`, `inspect`) and
 * the console's run and review pages, so that both say the same thing. Pure: no Node module, so
 * the console's bundle can carry it.
 */
import type { MemoryBound } from "../journal/inspect.js";
import type { TerminationReason } from "../journal/types.js";
import type { UnresolvedReason } from "./types.js";

const UNRESOLVED: Readonly<Record<UnresolvedReason, string>> = {
  "owner-gone": "the node that ran it died before it recorded a result",
  released: "the node ended the run without recording a result (its termination says how it ended)",
  "journal-changed": "its journal no longer matches the seal stored with its result",
  "journal-not-clean": "it ended, but its journal shows effects whose outcome is unknown",
  "journal-write-failed": "writing its journal failed, so what it did is not fully known",
};

const TERMINATION: Readonly<Record<TerminationReason, string>> = {
  completed: "the agent exited 0",
  failed: "the agent exited with an error",
  stopped: "the node stopped the agent between tool calls (its budget was spent)",
  cancelled: "the run was cancelled",
  timeout: "the agent ran past its time limit and was killed",
  crashed: "the agent was killed or died before it finished",
};

/** `reason: what it means`, for each reason a claim reads `unresolved` (an unknown one as it is). */
export function explainUnresolved(reasons: readonly string[]): string {
  return reasons.map((r) => (r in UNRESOLVED ? `${r}: ${UNRESOLVED[r as UnresolvedReason]}` : r)).join("; ");
}

/** `reason: what it means` for the journal's `run.terminated` reason. */
export function explainTermination(termination: string | undefined): string {
  if (termination === undefined) return "none: the journal never recorded the run's end";
  return termination in TERMINATION ? `${termination}: ${TERMINATION[termination as TerminationReason]}` : termination;
}

/** Why the agent died, when the kernel killed processes of the run at its memory bound. */
export function explainMemoryBound(bound: MemoryBound): string {
  const bytes = bound.bytes === null ? "" : ` (${(bound.bytes / 1024 / 1024).toFixed(0)} MiB)`;
  return `the kernel killed ${bound.processes_killed} process${bound.processes_killed === 1 ? "" : "es"} of the run at its memory bound${bytes}`;
}
