/** `warden approve|deny <scope> <id> [--reason TEXT]`: answer a run awaiting approval (DESIGN.md "Governed tool calls"). */
import type { Command } from "commander";
import type { CliContext } from "../context.js";
import { printInvocation } from "../invocation-view.js";
import { connect, nodeOptions, type NodeFlags } from "../node.js";
import { EXIT_OK, printJson, runCommand, type OutputFlags } from "../outcome.js";

interface ApproveFlags extends NodeFlags, OutputFlags {
  reason?: string;
}

export function registerApproveCommand(program: Command, ctx: CliContext): void {
  register(program, ctx, "approve", "allow", "let the call run: the node resumes the same CLI session in the same run");
}

export function registerDenyCommand(program: Command, ctx: CliContext): void {
  register(program, ctx, "deny", "deny", "refuse the call: the run ends with it refused (a recorded failure, approval-denied)");
}

function register(program: Command, ctx: CliContext, name: "approve" | "deny", decision: "allow" | "deny", what: string): void {
  {
    nodeOptions(
      program
        .command(name)
        .description(`answer a run awaiting approval of a tool call its policy decided ask: ${what}`)
        .argument("<scope>", "scope, e.g. api:operator")
        .argument("<id>", "idempotency id")
        .option("--reason <text>", "why, journaled with the answer")
        .option("--json", "print the invocation as JSON"),
    ).action((scope: string, id: string, flags: ApproveFlags) =>
      runCommand(ctx, flags, async () => {
        const answered = await (await connect(ctx.io, flags)).approve(scope, id, { decision, ...(flags.reason === undefined ? {} : { reason: flags.reason }) });
        if (flags.json === true) printJson(ctx, answered.view);
        else printInvocation(ctx, answered.view, answered.replayed ? ` (${decision === "allow" ? "approved" : "denied"} already)` : ` (${decision === "allow" ? "approved" : "denied"})`);
        return EXIT_OK;
      }),
    );
  }
}
