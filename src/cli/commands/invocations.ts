/** `warden invocations [--status S]` and `warden invocations show <scope> <id>`. */
import type { Command } from "commander";
import { InvalidArgumentError } from "commander";
import type { InvocationListQuery, InvocationSummary } from "../../client/wire.js";
import type { CliContext } from "../context.js";
import { exitCodeOfInvocation, printInvocation } from "../invocation-view.js";
import { connect, nodeOptions, type NodeFlags } from "../node.js";
import { EXIT_OK, printJson, runCommand, type OutputFlags } from "../outcome.js";
import { parsePositiveInt } from "../parse.js";

interface ListFlags extends NodeFlags, OutputFlags {
  status?: ListStatus;
  limit?: number;
  cursor?: string;
}
type ShowFlags = NodeFlags & OutputFlags;

type ListStatus = NonNullable<InvocationListQuery["status"]>;
/** Every status the API lists by, each once: the type refuses one missing or one it does not know. */
const LISTED: Readonly<Record<ListStatus, true>> = {
  in_progress: true,
  awaiting_approval: true,
  unresolved: true,
  recorded: true,
  reconciled: true,
  queued: true,
  cancelled: true,
  expired: true,
  refused: true,
};
const STATUSES = Object.keys(LISTED) as ListStatus[];

function parseStatus(value: string): ListStatus {
  if (!(STATUSES as readonly string[]).includes(value)) throw new InvalidArgumentError(`--status must be one of ${STATUSES.join(", ")}`);
  return value as ListStatus;
}

export function registerInvocationsCommands(program: Command, ctx: CliContext): void {
  const invocations = program
    .command("invocations")
    .description("invocations on the node: `invocations` lists them, `invocations show <scope> <id>` shows one")
    // The options belong to the default subcommand `list`; a user asking the group for help must still find them.
    .addHelpText("after", "\n`warden invocations [--status S] [--limit N] [--cursor C] [--json]` is `warden invocations list`: see `warden invocations list --help`.");
  nodeOptions(
    invocations
      .command("list", { isDefault: true })
      .description("list invocations in order of scope and id, as the node pages them (one page; --cursor for the next)")
      .option("--status <status>", `only this status: ${STATUSES.join(", ")}`, parseStatus)
      .option("--limit <n>", "at most this many (node default otherwise)", parsePositiveInt("--limit"))
      .option("--cursor <cursor>", "continue after a previous page")
      .option("--json", "print {items, cursor?} as JSON"),
  ).action((flags: ListFlags) => runCommand(ctx, flags, () => list(ctx, flags)));
  nodeOptions(
    invocations
      .command("show")
      .description("one invocation's status and result (exit 2 while in progress or unresolved); never creates anything")
      .argument("<scope>", "scope, e.g. api:operator")
      .argument("<id>", "idempotency id")
      .option("--json", "print the invocation as JSON"),
  ).action((scope: string, id: string, flags: ShowFlags) => runCommand(ctx, flags, () => show(ctx, scope, id, flags)));
}

function row(item: InvocationSummary): string {
  const extra = [item.expired === true ? "expired" : "", item.problem ?? ""].filter((s) => s !== "").join(", ");
  const known =
    item.run_id !== undefined
      ? `  run ${item.run_id}  ${item.agent ?? "?"}  ${item.created_at ?? "?"}`
      : item.queued_at !== undefined
        ? `  queued ${item.queued_at}  ${item.provider ?? "?"}  priority ${item.priority ?? 0}${item.error === undefined ? "" : `  ${item.error}`}`
        : "";
  return `${item.status.padEnd(17)} ${item.scope} ${item.id}${known}${extra !== "" ? `  (${extra})` : ""}\n`;
}

async function list(ctx: CliContext, flags: ListFlags): Promise<number> {
  const page = await (await connect(ctx.io, flags)).listInvocations({
    ...(flags.status !== undefined ? { status: flags.status } : {}),
    ...(flags.limit !== undefined ? { limit: flags.limit } : {}),
    ...(flags.cursor !== undefined ? { cursor: flags.cursor } : {}),
  });
  if (flags.json === true) {
    printJson(ctx, page);
    return EXIT_OK;
  }
  if (page.items.length === 0) {
    // A page may end before a match (the node reads a bounded number of rows per call): say so.
    const none = flags.status !== undefined ? `no ${flags.status} invocations` : "no invocations";
    ctx.io.stdout(page.cursor !== undefined ? `${none} in this page; there are more rows to look at\n` : `${none}\n`);
  }
  for (const item of page.items) ctx.io.stdout(row(item));
  if (page.cursor !== undefined) ctx.io.stdout(`more: --cursor ${page.cursor}\n`);
  return EXIT_OK;
}

async function show(ctx: CliContext, scope: string, id: string, flags: ShowFlags): Promise<number> {
  const view = await (await connect(ctx.io, flags)).getInvocation(scope, id);
  if (flags.json === true) printJson(ctx, view);
  else printInvocation(ctx, view);
  return exitCodeOfInvocation(view);
}
