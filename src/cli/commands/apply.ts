/**
 * `warden apply RUN [--to DIR]`: writes a run's change set into a checkout of its base, having
 * checked HERE — not on the node — that it is the change set the run's signed journal names
 * (DESIGN.md "Applying a change set"): the journal's signatures, `run.changes`' digest against the
 * manifest's bytes, each blob against its digest, and with `--policy` the journal's seal in the
 * witnessed log. Nothing of DIR is written before all of that holds.
 */
import { resolve } from "node:path";
import type { Command } from "commander";
import { ConflictError, NotFoundError, ValidationError } from "../../core/errors.js";
import type { RunChangesEvent } from "../../changes/format.js";
import type { CliContext } from "../context.js";
import { connect } from "../node.js";
import { EXIT_FAILED, EXIT_OK, printJson, runCommand } from "../outcome.js";
import { isUuid } from "../parse.js";
import type { VerifyFlags } from "./journal.js";
import { shownText } from "../terminal-text.js";

interface ApplyFlags extends VerifyFlags {
  to?: string;
}

export function registerApplyCommand(program: Command, ctx: CliContext): void {
  program
    .command("apply")
    .description(
      "apply a run's change set to a checkout of its base commit, after checking it against the run's signed journal " +
        "(and with --policy against the witnessed transparency log); refuses, writing nothing, a change set whose bytes do not match",
    )
    .argument("<run_id>", "the run whose change set to apply")
    .option("--to <dir>", "the checkout to change (default: the current directory)")
    .option("--key <file>", "trust this public key for the journal (standard base64 of the raw 32-byte Ed25519 key) instead of the node's published keys")
    .option("--url <url>", "the node to fetch the run from (default $WARDEN_URL, else the local node of --home)")
    .option("--home <dir>", "state directory of the local node (default $WARDEN_HOME or ./.warden)")
    .option("--policy <file>", "also check that the run's seal is in the node's transparency log, cosigned by the policy's quorum (C2SP tlog-policy), as `journal verify --policy` does")
    .option("--proof <file>", "with --policy: the run's log proof (GET /v1/log/runs/{run_id}) instead of asking the node")
    .option("--checkpoint <file>", "with --policy: prove into this checkpoint instead of the proof's own")
    .option("--json", "print {run_id, change_set, base, written, removed, files} as JSON")
    .action((runId: string, flags: ApplyFlags) => runCommand(ctx, flags, () => apply(ctx, runId, flags)));
}

async function apply(ctx: CliContext, runArgument: string, flags: ApplyFlags): Promise<number> {
  if (!isUuid(runArgument)) throw new ValidationError("run-id-invalid", `${runArgument} is not a run id (a UUID)`);
  const runId = runArgument.toLowerCase();
  const [{ fetchRunJournal }, { trustedKeys, loggedCommand }, { verifyJournal }, { resolveLimits }, { canonicalJson }, format, { applyChangeSet }] = await Promise.all([
    import("../remote-journal.js"),
    import("./journal.js"),
    import("../../journal/verify.js"),
    import("../../core/limits.js"),
    import("../../core/canonical.js"),
    import("../../changes/format.js"),
    import("../../changes/apply.js"),
  ]);
  const remote = await fetchRunJournal(ctx.io, runId, flags);
  const keys = await trustedKeys(ctx, flags, remote.nodeKeys);
  const report = verifyJournal(remote.bytes, keys, { maxBytes: resolveLimits().journalBytes, runId });
  if (!report.ok || report.first_error !== undefined) {
    const e = report.first_error;
    throw new ConflictError("apply-journal-invalid", `run ${runId}'s journal does not verify (line ${e?.line ?? "?"}: ${e?.code ?? "?"}: ${e?.reason ?? "?"}); nothing was written`, {
      status: 422,
      details: { run_id: runId, ...(e === undefined ? {} : { line: e.line, journal_code: e.code }) },
    });
  }
  const entry = report.valid.find((e) => e.event.type === "run.changes");
  const changes = entry?.event as RunChangesEvent | undefined;
  if (changes === undefined || "error" in changes) {
    const why = changes !== undefined ? `its change set could not be made (${changes.error.code}: ${changes.error.detail})` : "its journal records no change set (a plain-directory workspace, or a run that has not ended)";
    throw new NotFoundError("run-changes-not-found", `run ${runId} has nothing to apply: ${why}`, { details: { run_id: runId } });
  }
  if (flags.policy !== undefined && !(await loggedCommand(ctx, remote.bytes, runId, flags))) return EXIT_FAILED;

  const client = await connect(ctx.io, flags);
  const served = await client.runChanges(runId);
  // The manifest's stored bytes are its canonical form, so hashing the canonical form of what was
  // served checks it against the digest the journal signs, whatever the node says its digest is.
  let bytes: Buffer;
  try {
    bytes = Buffer.from(canonicalJson(served.manifest), "utf8");
  } catch (error) {
    throw new format.ChangeSetMalformedError("the node served a manifest that has no canonical form", { cause: error });
  }
  const manifest = format.parseManifest(bytes, changes.change_set);
  const root = resolve(ctx.io.cwd, flags.to ?? ".");
  const applied = await applyChangeSet(manifest, { root, blob: (digest) => client.runChangeBlob(runId, digest) });
  if (flags.json === true) {
    printJson(ctx, { run_id: runId, change_set: changes.change_set, base: manifest.base, ...applied });
    return EXIT_OK;
  }
  // The paths are the agent's: on a terminal, any control character in them is made visible.
  ctx.io.stdout(
    `applied change set ${changes.change_set} of run ${runId} (base ${manifest.base}) to ${root}: ${applied.written} written, ${applied.removed} removed\n` +
      shownText(applied.files.map((f) => `  ${f.status.padEnd(8)} ${f.old_path === null ? f.path : `${f.old_path} -> ${f.path}`}\n`).join(""), ctx.io.terminal === true),
  );
  return EXIT_OK;
}
