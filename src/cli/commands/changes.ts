/** `warden changes RUN [--stat]`: what a run changed in its git worktree, checked against its digest. */
import type { Command } from "commander";
import type { CliContext } from "../context.js";
import { connect, nodeOptions, type NodeFlags } from "../node.js";
import { EXIT_OK, printJson, runCommand, type OutputFlags } from "../outcome.js";
import { shownText } from "../terminal-text.js";

type ChangesFlags = NodeFlags & OutputFlags & { stat?: boolean };

export function registerChangesCommand(program: Command, ctx: CliContext): void {
  nodeOptions(
    program
      .command("changes")
      .description("what a run changed in its git worktree: the patch (checked against the change set's digest), or --stat")
      .argument("<run_id>", "the run's id")
      .option("--stat", "paths, statuses and line counts instead of the patch")
      .option("--json", "print the change set (or the stat) as JSON"),
  ).action((runId: string, flags: ChangesFlags) => runCommand(ctx, flags, () => changes(ctx, runId, flags)));
}

async function changes(ctx: CliContext, runId: string, flags: ChangesFlags): Promise<number> {
  const client = await connect(ctx.io, flags);
  if (flags.stat === true) {
    const stat = await client.runChangeStat(runId);
    if (flags.json === true) {
      printJson(ctx, stat);
      return EXIT_OK;
    }
    const width = Math.max(0, ...stat.files.map((f) => displayPath(f).length));
    const lines = stat.files.map((f) => {
      const counts = f.binary ? "binary" : `+${f.lines_added ?? 0} -${f.lines_deleted ?? 0}`;
      return ` ${displayPath(f).padEnd(width)} | ${f.status.padEnd(8)} ${counts}`;
    });
    // The paths are the agent's: on a terminal, any control character in them is made visible.
    ctx.io.stdout(
      `change set ${stat.change_set} (base ${stat.base})\n` +
        (lines.length === 0 ? " no changes\n" : `${shownText(lines.join("\n"), ctx.io.terminal === true)}\n ${stat.files_total} file(s) changed, ${stat.lines_added} insertion(s)(+), ${stat.lines_deleted} deletion(s)(-)\n`),
    );
    return EXIT_OK;
  }
  const reply = await client.runChanges(runId);
  // The manifest is checked whole against the digest (canonical bytes, every rule), and the patch against the manifest.
  const { canonicalJson } = await import("../../core/canonical.js");
  const { parseManifest, checkBlob } = await import("../../changes/format.js");
  const manifest = parseManifest(Buffer.from(canonicalJson(reply.manifest)), reply.change_set as `sha256:${string}`);
  if (flags.json === true) {
    printJson(ctx, { run_id: reply.run_id, change_set: reply.change_set, manifest });
    return EXIT_OK;
  }
  const patch = await client.runChangeBlob(runId, manifest.patch.sha256);
  checkBlob(patch, manifest.patch.sha256, manifest.patch.size);
  // Byte for byte to a pipe (`| git apply`); on a terminal, what the agent's files hold cannot act on it.
  ctx.io.stdout(shownText(Buffer.from(patch).toString("utf8"), ctx.io.terminal === true));
  return EXIT_OK;
}

function displayPath(f: { path: string; old_path: string | null }): string {
  return f.old_path === null ? f.path : `${f.old_path} => ${f.path}`;
}
