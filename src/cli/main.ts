/**
 * The `warden` command line: builds the program from one module per command group, runs it and
 * returns the exit code instead of exiting, so tests and embedders can call it.
 */
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { Command, CommanderError } from "commander";
import { registerJournalCommands } from "./commands/journal.js";
import { registerServeCommand } from "./commands/serve.js";
import { registerPushCommand } from "./commands/push.js";
import { registerBundlesCommands } from "./commands/bundles.js";
import { registerMaterializeCommand } from "./commands/materialize.js";
import { registerInvokeCommand } from "./commands/invoke.js";
import { registerInvocationsCommands } from "./commands/invocations.js";
import { registerInspectCommand } from "./commands/inspect.js";
import { registerReconcileCommand } from "./commands/reconcile.js";
import { registerConsoleCommand } from "./commands/console.js";
import { processIo, type CliContext, type CliIo } from "./context.js";
import { reportFailure } from "./outcome.js";

/** The package version, found by walking up from this module (src/ and dist/src/ sit at different depths). */
function packageVersion(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (let i = 0; i < 6; i++) {
    try {
      const pkg = JSON.parse(readFileSync(join(dir, "package.json"), "utf8")) as { name?: unknown; version?: unknown };
      if (pkg.name === "warden" && typeof pkg.version === "string") return pkg.version;
    } catch {
      // not here: keep walking up
    }
    dir = dirname(dir);
  }
  return "0.0.0";
}

export function buildProgram(ctx: CliContext): Command {
  const program = new Command()
    .name("warden")
    .description("crash-safe node for coding agents: bundle delivery, exactly-once invocations, signed run journals")
    .version(packageVersion(), "-V, --version", "print the version")
    .helpOption("-h, --help", "show help")
    .showHelpAfterError(false)
    .exitOverride()
    // Usage errors are printed by main() like every other failure: `warden: <message> (<code>)`.
    .configureOutput({ writeOut: (s) => ctx.io.stdout(s), writeErr: (s) => ctx.io.stderr(s), outputError: () => undefined });
  registerServeCommand(program, ctx);
  registerPushCommand(program, ctx);
  registerBundlesCommands(program, ctx);
  registerMaterializeCommand(program, ctx);
  registerInvokeCommand(program, ctx);
  registerInvocationsCommands(program, ctx);
  registerInspectCommand(program, ctx);
  registerReconcileCommand(program, ctx);
  registerJournalCommands(program, ctx);
  registerConsoleCommand(program, ctx);
  return program;
}

export async function main(argv: string[], io: CliIo = processIo()): Promise<number> {
  const ctx: CliContext = { io, exitCode: 0 };
  try {
    await buildProgram(ctx).parseAsync(argv);
    return ctx.exitCode;
  } catch (error) {
    // Help and version are already printed (help on stderr with exit 1 when a command group was given no subcommand).
    if (error instanceof CommanderError && PRINTED.has(error.code)) return error.exitCode === 0 ? 0 : 1;
    reportFailure(ctx, wantsJson(argv), error);
    return 1;
  }
}

const PRINTED = new Set(["commander.help", "commander.helpDisplayed", "commander.version"]);

/** Whether `--json` was asked for: commander may have stopped before parsing it. A `--json` after `--` is prompt text. */
function wantsJson(argv: readonly string[]): boolean {
  const args = argv.slice(2);
  const end = args.indexOf("--");
  return (end < 0 ? args : args.slice(0, end)).includes("--json");
}
