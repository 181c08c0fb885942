/** `warden invoke --id <uuid> --provider … -- <prompt>`: run an agent exactly once under an idempotency id. */
import { setTimeout as sleep } from "node:timers/promises";
import type { Command } from "commander";
import { ValidationError } from "../../core/errors.js";
import { WardenHttpError } from "../../client/errors.js";
import type { InvokeBody, ProviderName } from "../../client/wire.js";
import { resolveBundleRef } from "../bundle-ref.js";
import type { CliContext } from "../context.js";
import { exitCodeOfInvocation, printInvocation } from "../invocation-view.js";
import { fetchRunFailure } from "../run-failure.js";
import { connect, nodeOptions, type NodeFlags } from "../node.js";
import { EXIT_FAILED, printJson, runCommand, type OutputFlags } from "../outcome.js";
import { InvalidArgumentError } from "commander";
import { PROVIDERS_TEXT, isUuid, parseNonNegativeInt, parsePositiveInt, parseProvider } from "../parse.js";

function parseInteger(flag: string): (value: string) => number {
  return (value) => {
    if (!/^-?\d{1,9}$/.test(value)) throw new InvalidArgumentError(`${flag} must be an integer`);
    return Number(value);
  };
}

function collectLabel(value: string, previous: Record<string, string> | undefined): Record<string, string> {
  const eq = value.indexOf("=");
  if (eq < 1) throw new InvalidArgumentError(`--label must be name=value, not ${JSON.stringify(value)}`);
  return { ...previous, [value.slice(0, eq)]: value.slice(eq + 1) };
}

interface InvokeFlags extends NodeFlags, OutputFlags {
  id: string;
  provider: ProviderName;
  bundle?: string;
  workspace?: string;
  base?: string;
  timeout?: number;
  wait: number;
  async?: boolean;
  priority?: number;
  deadline?: number;
  label?: Record<string, string>;
}

const DEFAULT_WAIT_S = 60;

export function registerInvokeCommand(program: Command, ctx: CliContext): void {
  const command = program
    .command("invoke")
    .description(
      "run an agent exactly once for an idempotency id: a retry with the same id and request answers the first run's result " +
        "(exit 0 done, 1 failed or refused, 2 still running or unresolved)",
    )
    .argument("<prompt...>", "the prompt (put it after `--`)")
    .requiredOption("--id <uuid>", "idempotency id of this invocation (a UUID you keep to retry it)")
    .requiredOption("--provider <name>", PROVIDERS_TEXT, parseProvider)
    .option("--bundle <bundle>", "materialize this bundle for the agent: <id> (its latest revision) or <id>@<revision>")
    .option("--workspace <id>", "workspace the agent runs in (as configured on the node)")
    .option("--base <ref>", "a git workspace's ref or commit the run starts from (default: its HEAD when the run is claimed)")
    .option("--timeout <s>", "seconds the agent may run (node default otherwise)", parsePositiveInt("--timeout"))
    .option("--wait <s>", "seconds to wait for the result before answering \"running\" (0: do not wait)", parseNonNegativeInt("--wait"), DEFAULT_WAIT_S)
    .option("--async", "submit to the node's queue and print the queued invocation at once (exit 0); a node with room runs it later")
    .option("--priority <n>", "with --async: higher runs first (−1000…1000, default 0)", parseInteger("--priority"))
    .option("--deadline <s>", "with --async: seconds it may wait queued before it expires (node default otherwise)", parsePositiveInt("--deadline"))
    .option("--label <name=value>", "with --async: a label the node that runs it must have (repeatable)", collectLabel)
    .option("--json", "print the invocation as JSON (status, run_id, result…)");
  nodeOptions(command).action((prompt: string[], flags: InvokeFlags) => runCommand(ctx, flags, () => invoke(ctx, prompt.join(" "), flags)));
}

async function invoke(ctx: CliContext, prompt: string, flags: InvokeFlags): Promise<number> {
  if (!isUuid(flags.id)) throw new ValidationError("invocation-id-invalid", `--id must be a UUID (e.g. from \`uuidgen\`), not ${JSON.stringify(flags.id)}`);
  const client = await connect(ctx.io, flags);
  const body: InvokeBody = {
    provider: flags.provider,
    prompt,
    ...(flags.bundle !== undefined ? { bundle: await resolveBundleRef(client, flags.bundle) } : {}),
    ...(flags.workspace !== undefined ? { workspace: flags.workspace } : {}),
    ...(flags.base !== undefined ? { base: flags.base } : {}),
    ...(flags.timeout !== undefined ? { timeout_s: flags.timeout } : {}),
  };
  if (flags.async !== true && (flags.priority !== undefined || flags.deadline !== undefined || flags.label !== undefined)) {
    throw new ValidationError("invoke-options-invalid", "--priority, --deadline and --label go with --async (they are the queue's)");
  }
  if (flags.async === true) {
    const submitted: InvokeBody = {
      ...body,
      ...(flags.priority !== undefined ? { priority: flags.priority } : {}),
      ...(flags.deadline !== undefined ? { deadline_s: flags.deadline } : {}),
      ...(flags.label !== undefined ? { labels: flags.label } : {}),
    };
    const reply = await client.invoke(flags.id, submitted, { async: true });
    const view = reply.invocation;
    if (flags.json === true) printJson(ctx, { ...view, replayed: reply.replayed });
    else printInvocation(ctx, view, reply.httpStatus === 202 ? ` (queued at ${view.queued_at ?? "?"}; \`warden invocations show ${view.scope} ${view.id}\` follows it)` : "");
    // Submitted (or already known): the submission itself succeeded.
    return view.status === "queued" ? 0 : exitCodeOfInvocation(view);
  }
  const reply = await invokeWaiting(() => client.invoke(flags.id, body, flags.wait > 0 ? { waitSeconds: flags.wait } : {}), flags.wait);
  const view = reply.invocation;
  const exitCode = exitCodeOfInvocation(view);
  if (flags.json === true) {
    printJson(ctx, { ...view, replayed: reply.replayed });
    return exitCode;
  }
  // A recorded failure says why: its failed tool calls and the end of the agent's stderr.
  const failure = exitCode === EXIT_FAILED && view.status === "recorded" && view.run_id !== undefined ? await fetchRunFailure(client, view.run_id) : undefined;
  printInvocation(ctx, view, reply.replayed ? " (replayed: this id already ran; nothing was executed now)" : "", failure);
  return exitCode;
}

/** How often a retry that met its run still in progress asks again within --wait, ms. */
const IN_PROGRESS_POLL_MS = 500;

/**
 * The node waits (Prefer: wait) only for a run this very call started. A retry that meets the run
 * still going (started by an earlier call, on any node of a fleet) asks again within --wait — a
 * lookup each time, never a claim — so --wait means the same for a first call and for its retry.
 */
async function invokeWaiting<T>(call: () => Promise<T>, waitS: number): Promise<T> {
  const deadline = Date.now() + waitS * 1000;
  for (;;) {
    try {
      return await call();
    } catch (error) {
      const left = deadline - Date.now();
      if (!(error instanceof WardenHttpError && error.code === "in-progress") || left <= 0) throw error;
      await sleep(Math.min(IN_PROGRESS_POLL_MS, left));
    }
  }
}
