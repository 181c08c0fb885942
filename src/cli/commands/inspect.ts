/** `warden inspect <scope> <id>`: what an operator reviews before reconciling an unresolved invocation. */
import type { Command } from "commander";
import { resolve } from "node:path";
import { ConflictError, ValidationError } from "../../core/errors.js";
import type { Inspection, Review } from "../../client/wire.js";
import type { CliContext } from "../context.js";
import { table } from "../format.js";
import { connect, nodeOptions, type NodeFlags } from "../node.js";
import { EXIT_OK, printJson, runCommand, type OutputFlags } from "../outcome.js";
import { collect } from "../parse.js";
import { explainMemoryBound, explainTermination } from "../../invocations/explain.js";
import type { MemoryBound } from "../../journal/inspect.js";
import { digestInputFile } from "../read-input.js";
import { shownText } from "../terminal-text.js";

type Evidence = Review["evidence"][number];

type InspectFlags = NodeFlags &
  OutputFlags & {
    reviewTemplate?: boolean;
    evidence: string[];
  };

export function registerInspectCommand(program: Command, ctx: CliContext): void {
  nodeOptions(
    program
      .command("inspect")
      .description("snapshot of an invocation's claim and journal, and its snapshot_hash, which a reconciliation review must name")
      .argument("<scope>", "scope, e.g. api:operator")
      .argument("<id>", "idempotency id")
      .option("--json", "print {snapshot, snapshot_hash, report} as JSON")
      .option("--review-template", "print only a review to fill in, as JSON, for `warden reconcile --review FILE`")
      .option("--evidence <file>", "with --review-template: a file the review rests on, listed with its sha256 (repeatable)", collect, []),
  ).action((scope: string, id: string, flags: InspectFlags) => runCommand(ctx, flags, () => inspect(ctx, scope, id, flags)));
}

/**
 * A review file to start from: the operator fills in the outcome and rationale, and the evidence
 * unless it was given (each file named with its sha256), and states that the run's effects have
 * stopped. Refused as printed: an unedited template can never sign an outcome.
 */
export function reviewTemplate(inspection: Inspection, rationale: string, evidence: readonly Evidence[] = []): Record<string, unknown> {
  return {
    snapshot_hash: inspection.snapshot_hash,
    // No default: a review submitted unedited must be refused, not sign "no_effects" for a run
    // whose journal shows a started process (the schema refuses anything but the three outcomes).
    outcome: "<completed|failed|no_effects>",
    rationale,
    evidence: evidence.length > 0 ? evidence : [{ reference: "where the evidence is kept", sha256: "sha256:<64 hex digits of the evidence>" }],
    // The operator's own statement, once checked: the agent may outlive its node (README).
    effects_stopped: false,
  };
}

/** Only an unresolved invocation awaits a review: a running one may still end well, a reconciled one has had its review. */
function needsReview({ report }: Inspection): string {
  if (report.status === "unresolved") return "yes";
  if (report.status === "in_progress") return "not yet: the run is still in progress";
  if (report.status === "reconciled") return "no: already reconciled";
  return report.journal.requires_reconciliation ? "yes" : "no";
}

/**
 * Whether the run's agent is known to be gone: a node that started after the run's node died
 * records the agent processes it killed, and so does a node that killed its own agents at
 * shutdown after the grace period. Without such a record nothing here says the agent
 * stopped, and the operator must check its pid on its host before stating `effects_stopped`.
 */
function agentStoppedRows({ report }: Inspection): [string, string][] {
  const stops = report.agent_stopped ?? [];
  if (stops.length > 0) {
    return stops.map((s) => {
      const killed = `killed ${s.at} (pid${s.killed.length === 1 ? "" : "s"} ${s.killed.join(", ")})`;
      if (s.reason === "shutdown") {
        return ["agent stopped", `${killed} by the node that ran it (pid ${s.by.pid} on ${s.by.host}), at its shutdown, when the agent outlived the grace period`];
      }
      return [
        "agent stopped",
        `${killed} by the node that started next on this home ` +
          `(pid ${s.by.pid} on ${s.by.host}), as the node that ran it${s.node_pid === undefined ? "" : ` (pid ${s.node_pid})`} had died`,
      ];
    });
  }
  if (report.journal.agent_process === undefined || report.status !== "unresolved") return [];
  return [["agent stopped", "no node recorded stopping it: check that the pid above is gone on its host"]];
}

/** Why the agent died, when the kernel killed it at the run's memory bound. */
function memoryBoundRows(bound: MemoryBound | undefined): [string, string][] {
  return bound === undefined ? [] : [["memory bound", explainMemoryBound(bound)]];
}

/** An unresolved run's worktree, stored as a change set as it stands: its digest is evidence a review can cite. */
function worktreeRows({ report }: Inspection): [string, string][] {
  const changes = report.changes as { base?: string; change_set?: string; files_total?: number; error?: { code: string } } | undefined;
  if (changes === undefined) return [];
  if (changes.change_set === undefined) return [["worktree", `kept; its change set could not be made (${changes.error?.code ?? "unknown"})`]];
  return [["worktree changes", `${changes.files_total ?? 0} file(s) against ${changes.base ?? "?"}, change set ${changes.change_set}`]];
}

async function inspect(ctx: CliContext, scope: string, id: string, flags: InspectFlags): Promise<number> {
  if (flags.evidence.length > 0 && flags.reviewTemplate !== true) throw new ValidationError("evidence-without-template", "--evidence goes with --review-template");
  // Evidence is hashed first: a file that cannot be read fails before anything is asked of the node.
  const evidence: Evidence[] = [];
  for (const file of flags.evidence) evidence.push({ reference: file, sha256: await digestInputFile(resolve(ctx.io.cwd, file)) });
  const inspection = await (await connect(ctx.io, flags)).inspect(scope, id);
  // The node refuses this very text as a rationale: it comes from the module that checks reviews.
  const { TEMPLATE_RATIONALE } = await import("../../invocations/reconciliation.js");
  if (flags.reviewTemplate === true) {
    const needed = needsReview(inspection);
    if (needed !== "yes") {
      throw new ConflictError("invocation-not-unresolved", `${scope} ${id} is ${inspection.report.status}; it needs no review (${needed})`);
    }
    printJson(ctx, reviewTemplate(inspection, TEMPLATE_RATIONALE, evidence));
    return EXIT_OK;
  }
  if (flags.json === true) {
    printJson(ctx, inspection);
    return EXIT_OK;
  }
  const { snapshot, report } = inspection;
  const journal = report.journal;
  const findings = journal.findings.map((f) => f.reason + (f.effect_id !== undefined ? ` (effect ${f.effect_id})` : ""));
  // Effect ids and findings come from the journal, whose tool calls the agent named.
  const shown = (text: string): string => shownText(text, ctx.io.terminal === true);
  ctx.io.stdout(
    `${report.status} ${snapshot.scope} ${snapshot.id}\n` +
      shown(table([
        ["snapshot hash", inspection.snapshot_hash],
        ["run", snapshot.audit.run_id],
        ["agent", snapshot.agent],
        ["request hash", snapshot.request_hash],
        ["journal", journal.present ? `${journal.entries} entries, ${journal.ok ? "verifies" : `FAILS: ${journal.first_error?.code ?? "?"} at line ${journal.first_error?.line ?? "?"}`}` : "missing"],
        ["termination", explainTermination(journal.termination)],
        ["effects", `${journal.effects} (${journal.open_effects.length} open${journal.open_effects.length > 0 ? `: ${journal.open_effects.join(", ")}` : ""})`],
        ["agent process", journal.agent_process === undefined ? "not noted" : `pid ${journal.agent_process.pid} on ${journal.agent_process.host}`],
        ...memoryBoundRows(journal.memory_bound),
        ...agentStoppedRows(inspection),
        ...worktreeRows(inspection),
        ["findings", findings.length > 0 ? findings.join("; ") : "none"],
        ["needs review", needsReview(inspection)],
      ])) +
      (report.status === "unresolved"
        ? `to close it, write a review (e.g. the template below; \`--review-template --evidence FILE\` prints it alone, with the evidence's digests) ` +
          `and run \`warden reconcile ${snapshot.scope} ${snapshot.id} --review FILE\`:\n` +
          JSON.stringify(reviewTemplate(inspection, TEMPLATE_RATIONALE), null, 2) +
          "\n"
        : ""),
  );
  return EXIT_OK;
}
