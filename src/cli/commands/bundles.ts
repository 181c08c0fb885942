/** `warden bundles [show <id> | retire <id@rev> | sign <id@rev>]`: the node's committed bundles and their revisions. */
import { resolve } from "node:path";
import type { Command } from "commander";
import type { BundleView } from "../../client/wire.js";
import { ValidationError } from "../../core/errors.js";
import { splitBundleRef } from "../bundle-ref.js";
import { signersText, signWithOf } from "../signing.js";
import type { CliContext } from "../context.js";
import { formatBytes } from "../format.js";
import { connect, nodeOptions, type NodeFlags } from "../node.js";
import { EXIT_OK, printJson, runCommand, type OutputFlags } from "../outcome.js";

type BundlesFlags = NodeFlags & OutputFlags;

export function registerBundlesCommands(program: Command, ctx: CliContext): void {
  const bundles = program
    .command("bundles")
    .description("the node's committed bundles: `bundles` lists them, `bundles show <id>` shows one, `bundles retire <id@rev>` retires a revision")
    .addHelpText("after", "\n`warden bundles [--json]` is `warden bundles list`: see `warden bundles list --help`.");
  // `list` is the default subcommand, so `warden bundles --json` works and the parent has no
  // options of its own that would swallow the subcommands' (commander parses parent options first).
  nodeOptions(
    bundles
      .command("list", { isDefault: true })
      .description("list every bundle with its latest live revision")
      .option("--json", "print {bundles: [{bundle_id, revisions}]} as JSON"),
  ).action((flags: BundlesFlags) => runCommand(ctx, flags, () => list(ctx, flags)));
  nodeOptions(
    bundles
      .command("show")
      .description("show one bundle: every revision with its receipt")
      .argument("<id>", "bundle id")
      .option("--json", "print {bundle_id, revisions} as JSON"),
  ).action((id: string, flags: BundlesFlags) => runCommand(ctx, flags, () => show(ctx, id, flags)));
  nodeOptions(
    bundles
      .command("retire")
      .description("retire a revision: new sessions refuse it (it stays listed), and blobs nothing live references any more are deleted")
      .argument("<id@rev>", "the bundle and the revision to retire (the revision is never implied)")
      .option("--json", "print {bundle_id, revision, retired, collected_blobs} as JSON"),
  ).action((ref: string, flags: BundlesFlags) => runCommand(ctx, flags, () => retire(ctx, ref, flags)));
  nodeOptions(
    bundles
      .command("sign")
      .description("add your signature to a committed revision (a second signer, a release manager), made by ssh-keygen -Y sign")
      .argument("<id@rev>", "the bundle and the revision to sign (the revision is never implied)")
      .option("--key <file>", "SSH private key file, or a public key / certificate whose private half ssh-agent holds")
      .option("--agent", "sign with the first key ssh-agent holds")
      .option("--json", "print the revision {revision, receipt, signatures, …} as JSON"),
  ).action((ref: string, flags: SignFlags) => runCommand(ctx, flags, () => sign(ctx, ref, flags)));
}

type SignFlags = BundlesFlags & { key?: string; agent?: boolean };

async function sign(ctx: CliContext, text: string, flags: SignFlags): Promise<number> {
  const ref = splitBundleRef(text);
  if (ref.revision === undefined) throw new ValidationError("bundle-ref-revision-required", `name the revision to sign: ${ref.bundle_id}@<revision>`);
  const signWith = signWithOf(flags.key === undefined ? undefined : resolve(ctx.io.cwd, flags.key), flags.agent, "--key", "--agent");
  if (signWith === undefined) throw new ValidationError("sign-key-required", "give --key <file> or --agent");
  const client = await connect(ctx.io, flags);
  const revision = (await client.getBundle(ref.bundle_id)).revisions.find((r) => r.revision === ref.revision);
  if (revision === undefined) throw new ValidationError("revision-not-found", `${ref.bundle_id} has no revision ${JSON.stringify(ref.revision)}`, { status: 404 });
  const [{ sshSign }, { bundleStatement }] = await Promise.all([import("../../client/ssh-sign.js"), import("../../signing/statement.js")]);
  const signature = await sshSign(bundleStatement(revision.receipt), signWith);
  const view = await client.addSignature(ref.bundle_id, ref.revision, signature);
  if (flags.json === true) printJson(ctx, view);
  else ctx.io.stdout(`signed ${ref.bundle_id}@${ref.revision}\n${signersText(view.signatures)}`);
  return EXIT_OK;
}

async function retire(ctx: CliContext, text: string, flags: BundlesFlags): Promise<number> {
  const ref = splitBundleRef(text);
  // Retiring the latest revision by default would be one typo away from the wrong one.
  if (ref.revision === undefined) throw new ValidationError("bundle-ref-revision-required", `name the revision to retire: ${ref.bundle_id}@<revision>`);
  const reply = await (await connect(ctx.io, flags)).retireRevision(ref.bundle_id, ref.revision);
  if (flags.json === true) printJson(ctx, reply);
  else ctx.io.stdout(`retired ${reply.bundle_id}@${reply.revision}; ${reply.collected_blobs} blob(s) no longer referenced were deleted\n`);
  return EXIT_OK;
}

function bytesOf(view: BundleView["revisions"][number]): number {
  return view.receipt.blobs.reduce((sum, b) => sum + b.byte_len, 0);
}

async function list(ctx: CliContext, flags: BundlesFlags): Promise<number> {
  const bundles = await (await connect(ctx.io, flags)).listBundles();
  if (flags.json === true) {
    printJson(ctx, { bundles });
    return EXIT_OK;
  }
  if (bundles.length === 0) {
    ctx.io.stdout("no bundles\n");
    return EXIT_OK;
  }
  for (const bundle of bundles) {
    const live = bundle.revisions.filter((r) => !r.retired);
    const latest = live[live.length - 1];
    const summary = latest === undefined ? "all revisions retired" : `latest ${latest.revision} (${latest.committed_at}, ${formatBytes(bytesOf(latest))})`;
    ctx.io.stdout(`${bundle.bundle_id}  ${bundle.revisions.length} revision(s), ${summary}\n`);
  }
  return EXIT_OK;
}

async function show(ctx: CliContext, id: string, flags: BundlesFlags): Promise<number> {
  const bundle = await (await connect(ctx.io, flags)).getBundle(id);
  if (flags.json === true) {
    printJson(ctx, bundle);
    return EXIT_OK;
  }
  ctx.io.stdout(`bundle ${bundle.bundle_id}\n`);
  for (const r of bundle.revisions) {
    const retired = r.retired ? `  retired ${r.retired_at ?? ""}`.trimEnd() : "";
    ctx.io.stdout(
      `  ${r.revision}  committed ${r.committed_at}  ${r.receipt.blobs.length} blob(s), ${formatBytes(bytesOf(r))}${retired}\n` +
        `    bundle digest   ${r.receipt.bundle_digest}\n` +
        `    manifest digest ${r.manifest_digest}\n` +
        (r.signatures.length === 0 ? "    unsigned\n" : signersText(r.signatures)),
    );
  }
  return EXIT_OK;
}
