/** `warden push <dir>`: compile a directory into a bundle and deliver it, resuming where a previous push stopped. */
import { basename, resolve } from "node:path";
import type { Command } from "commander";
import { WardenConnectionError } from "../../client/errors.js";
import type { PushResult } from "../../client/push.js";
import { WardenError } from "../../core/errors.js";
import type { CliContext } from "../context.js";
import { formatBytes, table } from "../format.js";
import { connect, nodeOptions, type NodeFlags } from "../node.js";
import { EXIT_OK, printJson, runCommand, type OutputFlags } from "../outcome.js";
import type { ProgressSink } from "../push-progress.js";
import { parsePositiveInt } from "../parse.js";
import { signersText, signWithOf } from "../signing.js";

interface PushFlags extends NodeFlags, OutputFlags {
  bundleId?: string;
  revision?: string;
  chunkBytes?: number;
  concurrency?: number;
  progress?: boolean;
  sign?: string;
  signAgent?: boolean;
}

export function registerPushCommand(program: Command, ctx: CliContext): void {
  const command = program
    .command("push")
    .description("compile a directory into a bundle, upload the blobs the node is missing (resuming an interrupted push) and commit it")
    .argument("<dir>", "directory holding the bundle's files")
    .option("--bundle-id <id>", "bundle id (default: the directory's name)")
    .option("--revision <rev>", "revision (default: the first 12 hex digits of the bundle digest, so the same content is the same revision)")
    .option("--chunk-bytes <n>", "bytes per upload request (default 4194304; a node whose limit is lower is sent requests within its limit)", parsePositiveInt("--chunk-bytes"))
    .option("--concurrency <n>", "upload requests in flight at once (default 4)", parsePositiveInt("--concurrency"))
    .option("--no-progress", "print no progress while uploading")
    .option("--sign <keyfile>", "sign the revision with this SSH key (ssh-keygen -Y sign; a .pub or certificate file signs through ssh-agent)")
    .option("--sign-agent", "sign the revision with the first key ssh-agent holds")
    .option("--json", "print {receipt, stage_id, bytes_sent, blobs_sent, already_committed} as JSON");
  nodeOptions(command).action((dir: string, flags: PushFlags) => runCommand(ctx, flags, () => push(ctx, dir, flags)));
}

async function progressSink(ctx: CliContext, flags: PushFlags): Promise<ProgressSink | undefined> {
  if (flags.json === true || flags.progress === false) return undefined;
  const { BarProgress, LineProgress } = await import("../push-progress.js");
  // The bar redraws in place, which only a terminal understands; pipes and logs get plain lines.
  return process.stderr.isTTY === true ? new BarProgress(process.stderr) : new LineProgress((line) => ctx.io.stdout(line));
}

async function push(ctx: CliContext, dir: string, flags: PushFlags): Promise<number> {
  const client = await connect(ctx.io, flags);
  const path = resolve(ctx.io.cwd, dir);
  const progress = await progressSink(ctx, flags);
  // On a terminal the bar hides the cursor: Ctrl-C must give it back, and say how to go on.
  const onInterrupt = (): void => {
    progress?.stop();
    ctx.io.stderr("warden: interrupted; run the same push again to resume: acknowledged bytes are kept\n");
    process.exit(130);
  };
  if (progress?.redraws === true) process.once("SIGINT", onInterrupt);
  const signWith = signWithOf(flags.sign === undefined ? undefined : resolve(ctx.io.cwd, flags.sign), flags.signAgent, "--sign", "--sign-agent");
  let result: PushResult;
  try {
    result = await client.push(path, {
      bundleId: flags.bundleId ?? basename(path),
      ...(flags.revision !== undefined ? { revision: flags.revision } : {}),
      ...(flags.chunkBytes !== undefined ? { chunkBytes: flags.chunkBytes } : {}),
      ...(flags.concurrency !== undefined ? { concurrency: flags.concurrency } : {}),
      ...(signWith !== undefined ? { sign: signWith } : {}),
      ...(progress !== undefined ? { onProgress: (p) => progress.update(p) } : {}),
    });
  } catch (error) {
    // A node lost mid-push (killed, restarting, unreachable) keeps what it acknowledged.
    if (!(error instanceof WardenConnectionError)) throw error;
    const resume = `${error.message}; run the same push again once the node is reachable: it resumes with what the node already holds`;
    throw new WardenError(error.code, resume, error.status, { cause: error, details: error.details });
  } finally {
    process.off("SIGINT", onInterrupt);
    progress?.stop();
  }
  const { receipt } = result;
  if (flags.json === true) {
    printJson(ctx, {
      receipt,
      stage_id: result.stageId,
      bytes_sent: result.bytesSent,
      blobs_sent: result.blobsSent,
      already_committed: result.alreadyCommitted,
      skipped: result.skipped,
      signers: result.signers,
    });
    return EXIT_OK;
  }
  const bytes = receipt.blobs.reduce((sum, b) => sum + b.byte_len, 0);
  const sent = result.alreadyCommitted
    ? "nothing (this revision was already committed)"
    : `${formatBytes(result.bytesSent)} in ${result.blobsSent} blob(s)`;
  ctx.io.stdout(
    `committed ${receipt.bundle_id}@${receipt.revision}\n` +
      table([
        ["bundle digest", receipt.bundle_digest],
        ["manifest digest", receipt.manifest_digest],
        ["blobs", `${receipt.blobs.length} (${formatBytes(bytes)})`],
        ["sent", sent],
        ...(result.skipped.length > 0 ? [["skipped", result.skipped.join(", ")] as const] : []),
      ]) +
      signersText(result.signers, ""),
  );
  return EXIT_OK;
}
