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
import { processIo, type CliContext, type CliIo } from "./context.js";
import { describeError } from "./errors.js";

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
    .configureOutput({ writeOut: (s) => ctx.io.stdout(s), writeErr: (s) => ctx.io.stderr(s) });
  registerServeCommand(program, ctx);
  registerPushCommand(program, ctx);
  registerBundlesCommands(program, ctx);
  registerMaterializeCommand(program, ctx);
  registerInvokeCommand(program, ctx);
  registerInvocationsCommands(program, ctx);
  registerInspectCommand(program, ctx);
  registerReconcileCommand(program, ctx);
  registerJournalCommands(program, ctx);
  return program;
}

export async function main(argv: string[], io: CliIo = processIo()): Promise<number> {
  const ctx: CliContext = { io, exitCode: 0 };
  try {
    await buildProgram(ctx).parseAsync(argv);
    return ctx.exitCode;
  } catch (error) {
    // Commander has already printed its own message (usage error, help, version).
    if (error instanceof CommanderError) return error.exitCode === 0 ? 0 : 1;
    io.stderr(`warden: ${describeError(error)}\n`);
    return 1;
  }
}
