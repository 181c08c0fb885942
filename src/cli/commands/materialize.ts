/**
 * `warden materialize <bundle> --provider P [--dir D]`: build a provider's tree of a committed
 * bundle. The node materializes it under its own state directory (HTTP API: `{root, args, env}`,
 * re-verified byte for byte); with `--dir` the CLI, on the node's machine, copies that tree into a
 * new private directory D and prints the launch arguments and environment pointing into D.
 */
import { isAbsolute, resolve } from "node:path";
import * as fsp from "node:fs/promises";
import type { Command } from "commander";
import { ValidationError, errnoCode } from "../../core/errors.js";
import type { MaterializationReply, ProviderName } from "../../client/wire.js";
import { resolveBundleRef } from "../bundle-ref.js";
import type { CliContext } from "../context.js";
import { copyTree } from "../copy-tree.js";
import { table } from "../format.js";
import { connect, nodeOptions, type NodeFlags } from "../node.js";
import { EXIT_OK, printJson, runCommand, type OutputFlags } from "../outcome.js";
import { PROVIDERS_TEXT, parseProvider } from "../parse.js";

interface MaterializeFlags extends NodeFlags, OutputFlags {
  provider: ProviderName;
  dir?: string;
}

export function registerMaterializeCommand(program: Command, ctx: CliContext): void {
  nodeOptions(
    program
      .command("materialize")
      .description("materialize a committed bundle for a provider (claude: plugin dir, codex: CODEX_HOME, kimi: skills dir) and print how to launch it")
      .argument("<bundle>", "<bundle-id> (latest live revision) or <bundle-id>@<revision>")
      .requiredOption("--provider <name>", PROVIDERS_TEXT, parseProvider)
      .option("--dir <dir>", "copy the tree into this new directory (the node must run on this machine); default: leave it in the node's state directory")
      .option("--json", "print {bundle_id, revision, provider, session, root, args, env, commands: {launch, check?}} as JSON"),
  ).action((bundle: string, flags: MaterializeFlags) => runCommand(ctx, flags, () => materialize(ctx, bundle, flags)));
}

function rebase(value: string, from: string, to: string): string {
  return value === from || value.startsWith(from + "/") ? to + value.slice(from.length) : value;
}

/** Copies the node's session tree into `dir` and points the launch at the copy. */
async function copyOut(reply: MaterializationReply, dir: string): Promise<MaterializationReply> {
  if (!isAbsolute(reply.root)) throw new ValidationError("materialization-root-invalid", `the node answered a relative root ${JSON.stringify(reply.root)}`);
  try {
    await fsp.lstat(reply.root);
  } catch (error) {
    if (errnoCode(error) !== "ENOENT") throw error;
    throw new ValidationError(
      "materialization-not-local",
      `the node materialized the bundle at ${reply.root} on its own machine; --dir needs a node running on this machine`,
    );
  }
  await copyTree(reply.root, dir);
  return {
    session: reply.session,
    root: dir,
    args: reply.args.map((a) => rebase(a, reply.root, dir)),
    env: Object.fromEntries(Object.entries(reply.env).map(([k, v]) => [k, rebase(v, reply.root, dir)])),
  };
}

/** A word a POSIX shell reads back as itself. */
function shellWord(word: string): string {
  return /^[A-Za-z0-9_@%+=:,./-]+$/.test(word) ? word : `'${word.replace(/'/g, `'\\''`)}'`;
}

function commandLine(env: Readonly<Record<string, string>>, argv: readonly string[]): string {
  return [...Object.entries(env).map(([k, v]) => `${k}=${shellWord(v)}`), ...argv.map(shellWord)].join(" ");
}

/**
 * The command lines to paste: launch the provider's CLI on the tree, and check the tree with that
 * CLI where it has a check (DESIGN.md "Providers"). Claude's plugin is the `--plugin-dir`, not the
 * root above it, which `claude plugin validate <root>` would refuse with "No manifest found".
 */
export function providerCommands(provider: ProviderName, reply: Pick<MaterializationReply, "args" | "env">): { launch: string; check?: string } {
  const launch = commandLine(reply.env, [provider, ...reply.args]);
  if (provider === "claude") {
    const at = reply.args.indexOf("--plugin-dir");
    const pluginDir = at >= 0 ? reply.args[at + 1] : undefined;
    return pluginDir === undefined ? { launch } : { launch, check: commandLine({}, ["claude", "plugin", "validate", pluginDir]) };
  }
  if (provider === "codex") return { launch, check: commandLine(reply.env, ["codex", "mcp", "list"]) };
  return { launch };
}

async function materialize(ctx: CliContext, bundle: string, flags: MaterializeFlags): Promise<number> {
  const provider = flags.provider;
  const client = await connect(ctx.io, flags);
  const ref = await resolveBundleRef(client, bundle);
  const dir = flags.dir === undefined ? undefined : resolve(ctx.io.cwd, flags.dir);
  if (dir !== undefined) {
    // Checked before the node does any work: a materialization that cannot be copied is waste.
    const exists = await fsp.lstat(dir).then(
      () => true,
      (error: unknown) => (errnoCode(error) === "ENOENT" ? false : Promise.reject(error)),
    );
    if (exists) throw new ValidationError("target-exists", `${dir} already exists; name a new directory`);
  }
  const reply = await client.materialize(ref.bundle_id, ref.revision, provider);
  let result: MaterializationReply;
  try {
    result = dir === undefined ? reply : await copyOut(reply, dir);
  } finally {
    if (dir !== undefined) {
      // The copy is what the launch uses: the node's tree would only take one of its places. A
      // copy that failed leaves it of no use either, under a session this command never printed.
      await client.releaseMaterialization(reply.session).catch((error: unknown) => {
        const why = error instanceof Error ? error.message : String(error);
        ctx.io.stderr(`warden: the node kept its own copy (session ${reply.session}): ${why}\n`);
      });
    }
  }
  const commands = providerCommands(provider, result);
  if (flags.json === true) {
    printJson(ctx, { bundle_id: ref.bundle_id, revision: ref.revision, provider, ...result, commands });
    return EXIT_OK;
  }
  const env = Object.entries(result.env).map(([k, v]) => `${k}=${v}`);
  // The node's own tree takes one of its limits.materializations places until it is removed:
  // the operator needs the session to remove it, and to know that they must.
  const kept = dir === undefined ? `the node keeps this tree until DELETE /v1/materializations/${result.session}\n` : "";
  ctx.io.stdout(
    `materialized ${ref.bundle_id}@${ref.revision} for ${provider}\n` +
      table([
        ...(dir === undefined ? [["session", result.session] as const] : []),
        ["root", result.root],
        ["args", result.args.length > 0 ? result.args.join(" ") : "(none)"],
        ["env", env.length > 0 ? env.join(" ") : "(none)"],
        ["launch", commands.launch],
        ...(commands.check === undefined ? [] : [["check", commands.check] as const]),
      ]) +
      kept,
  );
  return EXIT_OK;
}
