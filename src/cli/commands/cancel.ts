/** `warden cancel <scope> <id>`: cancel a queued invocation, or stop a running one (DESIGN.md "Queued invocations"). */
import type { Command } from "commander";
import type { CliContext } from "../context.js";
import { exitCodeOfInvocation, printInvocation } from "../invocation-view.js";
import { connect, nodeOptions, type NodeFlags } from "../node.js";
import { EXIT_OK, printJson, runCommand, type OutputFlags } from "../outcome.js";

type CancelFlags = NodeFlags & OutputFlags;

export function registerCancelCommand(program: Command, ctx: CliContext): void {
  nodeOptions(
    program
      .command("cancel")
      .description("cancel an invocation: a queued one never runs (cancelled); a running one's agent is stopped and its outcome follows the usual rule (exit 1 if it had already finished)")
      .argument("<scope>", "scope, e.g. api:operator")
      .argument("<id>", "idempotency id")
      .option("--json", "print the invocation as JSON"),
  ).action((scope: string, id: string, flags: CancelFlags) => runCommand(ctx, flags, () => cancel(ctx, scope, id, flags)));
}

async function cancel(ctx: CliContext, scope: string, id: string, flags: CancelFlags): Promise<number> {
  const view = await (await connect(ctx.io, flags)).cancel(scope, id);
  if (flags.json === true) printJson(ctx, view);
  else printInvocation(ctx, view, view.status === "in_progress" ? " (its agent is being stopped)" : "");
  // The cancel was done: a cancelled or a stopping invocation is this command's success.
  return view.status === "cancelled" || view.status === "in_progress" ? EXIT_OK : exitCodeOfInvocation(view);
}
