/** How the CLI shows an invocation and which exit code its status means. */
import type { InvocationView } from "../client/wire.js";
import { explainUnresolved } from "../invocations/explain.js";
import type { CliContext } from "./context.js";
import { table } from "./format.js";
import { shownText } from "./terminal-text.js";
import { EXIT_FAILED, EXIT_OK, exitCodeOfStatus } from "./outcome.js";
import type { RunFailure } from "./run-failure.js";

/**
 * A recorded run ended well only if its agent exited 0; a recorded failure is still a failure. A
 * reconciled run is 1 whatever the review's outcome: it has no recorded result, and never will (a
 * retry of its id is refused `reconciled`, also exit 1); the review's outcome is printed, and is
 * in `--json`, for a script that needs it.
 */
export function exitCodeOfInvocation(view: InvocationView): number {
  if (view.status === "reconciled") return EXIT_FAILED;
  if (view.status !== "recorded") return exitCodeOfStatus(view.status);
  if (view.expired === true || view.result === undefined) return EXIT_OK;
  const result = view.result;
  const exit = typeof result === "object" && result !== null && "exit_code" in result ? (result as { exit_code: unknown }).exit_code : 0;
  // An agent that exited 0 after its CLI reported an error (a dropped model connection) failed.
  const reported = typeof result === "object" && result !== null && "error" in result;
  return exit === 0 && !reported ? EXIT_OK : EXIT_FAILED;
}

/** Result members shown on their own, not as rows: the answer, the stream's tail, usage, refusals. */
const OWN_ROWS = new Set(["output_tail", "answer", "usage", "refused", "error"]);

function resultRows(result: unknown): [string, string][] {
  if (typeof result !== "object" || result === null || Array.isArray(result)) return [["result", JSON.stringify(result)]];
  const rows: [string, string][] = [];
  for (const [key, value] of Object.entries(result)) {
    if (OWN_ROWS.has(key)) continue;
    rows.push([key.replace(/_/g, " "), typeof value === "string" ? value : JSON.stringify(value)]);
  }
  const r = result as { usage?: unknown; refused?: unknown; error?: unknown };
  if (typeof r.usage === "object" && r.usage !== null) {
    rows.push(["usage", Object.entries(r.usage).map(([k, v]) => `${k.replace(/_/g, " ")} ${String(v)}`).join(", ")]);
  }
  if (Array.isArray(r.refused)) {
    for (const call of r.refused as { tool?: unknown; reason?: unknown }[]) rows.push(["refused", `${String(call.tool)}: ${String(call.reason)}`]);
  }
  if (typeof r.error === "object" && r.error !== null) {
    const e = r.error as { code?: unknown; message?: unknown };
    rows.push(["error", `${String(e.message)} (${String(e.code)})`]);
  }
  return rows;
}

/** `failure`: what a failed run's journal and stderr say (run-failure.ts), printed with its result. */
export function printInvocation(ctx: CliContext, view: InvocationView, note = "", failure?: RunFailure): void {
  ctx.io.stdout(`${view.status} ${view.scope} ${view.id}${note}\n`);
  const rows: [string, string][] = [];
  if (view.run_id !== undefined) rows.push(["run", view.run_id]);
  if (view.agent !== undefined) rows.push(["agent", view.agent]);
  if (view.queued_at !== undefined) rows.push(["queued", `${view.queued_at}${view.priority === undefined || view.priority === 0 ? "" : ` priority ${view.priority}`}${view.deadline_at === undefined ? "" : `, expires ${view.deadline_at} unless started`}`]);
  if (view.cancelled_by !== undefined) rows.push(["cancelled by", view.cancelled_by]);
  if (view.error !== undefined && view.status === "refused") rows.push(["refused", view.error]);
  if (view.reasons !== undefined && view.reasons.length > 0) rows.push(["reasons", explainUnresolved(view.reasons)]);
  for (const f of view.findings ?? []) rows.push(["finding", f.reason + (f.effect_id !== undefined ? ` (effect ${f.effect_id})` : "")]);
  if (view.expired === true) rows.push(["result", "expired (pruned by retention; the outcome is kept)"]);
  if (view.result !== undefined) rows.push(...resultRows(view.result));
  for (const call of failure?.failedTools ?? []) rows.push(["failed", call]);
  if (view.parked !== undefined) {
    rows.push(["waits for", `an operator's approval of ${view.parked.tool} (call ${view.parked.call_id}; policies ${view.parked.policies.join(", ")})`]);
    rows.push(["deadline", `${view.parked.deadline} (then denied); answer with \`warden approve|deny ${view.scope} ${view.id}\``]);
  }
  if (view.receipt !== undefined) rows.push(["reconciled", `${view.receipt.review.outcome} by ${view.receipt.operator} at ${view.receipt.recorded_at}`]);
  // What the agent wrote (its result's strings, answer, output) reaches the terminal made visible.
  const shown = (text: string): string => shownText(text, ctx.io.terminal === true);
  ctx.io.stdout(shown(table(rows)));
  const result = typeof view.result === "object" && view.result !== null ? (view.result as { output_tail?: unknown; answer?: unknown }) : {};
  if (typeof result.answer === "string") {
    // The agent's own final answer, whole: what the caller asked for (the raw stream: --json).
    ctx.io.stdout(`answer:\n${shown(result.answer.endsWith("\n") ? result.answer : `${result.answer}\n`)}`);
  } else if (typeof result.output_tail === "string" && result.output_tail.trim() !== "") {
    ctx.io.stdout(`  output (last lines; --json for the whole result):\n${shown(lastLines(result.output_tail))}`);
  }
  if (failure !== undefined && failure.stderr.trim() !== "" && view.run_id !== undefined) {
    ctx.io.stdout(`  stderr (last lines; all of it: GET /v1/runs/${view.run_id}/output/stderr):\n${shown(lastLines(failure.stderr, STDERR_LINES))}`);
  }
  if (view.status === "unresolved") ctx.io.stdout(`  needs an operator: \`warden inspect ${view.scope} ${view.id}\`, then \`warden reconcile\`\n`);
}

const TAIL_LINES = 3;
/** An error's message and the first frames of its trace. */
const STDERR_LINES = 12;
const LINE_CHARS = 160;

function lastLines(text: string, lines = TAIL_LINES): string {
  return text
    .trimEnd()
    .split("\n")
    .slice(-lines)
    .map((line) => `    ${line.length > LINE_CHARS ? `${line.slice(0, LINE_CHARS)}…` : line}\n`)
    .join("");
}
