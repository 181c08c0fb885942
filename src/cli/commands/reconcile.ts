/** `warden reconcile <scope> <id> --review FILE`: close an unresolved invocation with a signed receipt. */
import { resolve } from "node:path";
import type { Command } from "commander";
import { ValidationError } from "../../core/errors.js";
import type { Review } from "../../client/wire.js";
import type { CliContext } from "../context.js";
import { table } from "../format.js";
import { connect, nodeOptions, type NodeFlags } from "../node.js";
import { EXIT_OK, printJson, runCommand, type OutputFlags } from "../outcome.js";
import { readInputFile } from "../read-input.js";

interface ReconcileFlags extends NodeFlags, OutputFlags {
  review: string;
}

/** A review is at most 8 KiB of rationale and 32 evidence entries: far below this. */
const REVIEW_MAX_BYTES = 64 * 1024;

export function registerReconcileCommand(program: Command, ctx: CliContext): void {
  nodeOptions(
    program
      .command("reconcile")
      .description(
        "close an unresolved invocation: submit an operator review {snapshot_hash, outcome, rationale, evidence, effects_stopped} " +
          "(see `warden inspect`); the node signs a receipt and the id stays closed forever",
      )
      .argument("<scope>", "scope, e.g. api:operator")
      .argument("<id>", "idempotency id")
      .requiredOption("--review <file>", "JSON file holding the review")
      .option("--json", "print {receipt, created} as JSON"),
  ).action((scope: string, id: string, flags: ReconcileFlags) => runCommand(ctx, flags, () => reconcile(ctx, scope, id, flags)));
}

async function readReview(ctx: CliContext, file: string): Promise<Review> {
  const path = resolve(ctx.io.cwd, file);
  const bytes = await readInputFile(path, REVIEW_MAX_BYTES + 1);
  if (bytes.byteLength > REVIEW_MAX_BYTES) throw new ValidationError("review-too-large", `${path} is over ${REVIEW_MAX_BYTES} bytes`);
  try {
    // The node validates every field; the CLI only needs JSON to send.
    return JSON.parse(bytes.toString("utf8")) as Review;
  } catch {
    throw new ValidationError("review-json-invalid", `${path} is not valid JSON`);
  }
}

async function reconcile(ctx: CliContext, scope: string, id: string, flags: ReconcileFlags): Promise<number> {
  const review = await readReview(ctx, flags.review);
  const { receipt, created } = await (await connect(ctx.io, flags)).reconcile(scope, id, review);
  if (flags.json === true) {
    printJson(ctx, { receipt, created });
    return EXIT_OK;
  }
  ctx.io.stdout(
    `reconciled ${receipt.snapshot.scope} ${receipt.snapshot.id}${created ? "" : " (this review was already recorded; same receipt)"}\n` +
      table([
        ["outcome", receipt.review.outcome],
        ["operator", receipt.operator],
        ["recorded at", receipt.recorded_at],
        ["snapshot", receipt.review.snapshot_hash],
        ["signed by key", receipt.key_id],
        ["signature", receipt.sig],
      ]),
  );
  return EXIT_OK;
}
