/**
 * The `warden` command line: builds the program from one module per command group, runs it and
 * returns the exit code instead of exiting, so tests and embedders can call it.
 *
 * Start-up is loading: every module a command imports is read and compiled before it can answer,
 * and the heavy ones (SQLite, pg, fastify, the runner, the schemas) cost a client command most of
 * a second. So the CLI loads only what the command it runs needs:
 *   - `COMMANDS` below names each top-level command and loads its registration module only when
 *     that command runs (all of them for help, none for `--version`);
 *   - a registration module (`commands/<name>.ts`) imports at its top only commander, types
 *     (`import type`) and the light `src/cli/*` helpers (context, parse, node, outcome, format);
 *   - whatever else an action needs (the client comes through `connect`, the server, a backend,
 *     the journal checks, cli-progress) is `await import(...)`ed inside the action.
 * A new command: write `commands/<name>.ts` that way and add one line to `COMMANDS`.
 * test/cli/lazy-load.test.ts fails when `--version`, `--help` or a client command loads
 * better-sqlite3, pg, fastify, typebox or the runner.
 */
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { Command, CommanderError } from "commander";
import { processIo, type CliContext, type CliIo } from "./context.js";
import { reportFailure } from "./outcome.js";

/** Adds one command group to the program. */
export type RegisterCommand = (program: Command, ctx: CliContext) => void;

interface CommandEntry {
  readonly name: string;
  readonly load: () => Promise<RegisterCommand>;
}

/** Every top-level command, in the order help lists them. */
const COMMANDS: readonly CommandEntry[] = [
  { name: "serve", load: async () => (await import("./commands/serve.js")).registerServeCommand },
  { name: "push", load: async () => (await import("./commands/push.js")).registerPushCommand },
  { name: "bundles", load: async () => (await import("./commands/bundles.js")).registerBundlesCommands },
  { name: "materialize", load: async () => (await import("./commands/materialize.js")).registerMaterializeCommand },
  { name: "invoke", load: async () => (await import("./commands/invoke.js")).registerInvokeCommand },
  { name: "invocations", load: async () => (await import("./commands/invocations.js")).registerInvocationsCommands },
  { name: "cancel", load: async () => (await import("./commands/cancel.js")).registerCancelCommand },
  { name: "inspect", load: async () => (await import("./commands/inspect.js")).registerInspectCommand },
  { name: "reconcile", load: async () => (await import("./commands/reconcile.js")).registerReconcileCommand },
  { name: "apply", load: async () => (await import("./commands/apply.js")).registerApplyCommand },
  { name: "attest", load: async () => (await import("./commands/attest.js")).registerAttestCommand },
  { name: "changes", load: async () => (await import("./commands/changes.js")).registerChangesCommand },
  { name: "journal", load: async () => (await import("./commands/journal.js")).registerJournalCommands },
  { name: "log", load: async () => (await import("./commands/log.js")).registerLogCommands },
  { name: "witness", load: async () => (await import("./commands/witness.js")).registerWitnessCommand },
  { name: "console", load: async () => (await import("./commands/console.js")).registerConsoleCommand },
  { name: "model-serve", load: async () => (await import("./commands/model-serve.js")).registerModelServeCommand },
];

const VERSION_FLAGS = new Set(["-V", "--version"]);

/**
 * The commands `argv` (process.argv: node, script, args…) can run: the one it names, none when it
 * asks for the version, and all of them otherwise (help, usage errors and their suggestions).
 */
function commandsFor(argv: readonly string[] | undefined): readonly CommandEntry[] {
  const first = argv?.[2];
  if (first === undefined) return COMMANDS;
  if (VERSION_FLAGS.has(first)) return [];
  const named = COMMANDS.find((c) => c.name === first);
  return named === undefined ? COMMANDS : [named];
}

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

/** The program with the commands `argv` can run registered (every command when argv is not given). */
export async function buildProgram(ctx: CliContext, argv?: readonly string[]): Promise<Command> {
  const registrars = await Promise.all(commandsFor(argv).map((c) => c.load()));
  const program = new Command()
    .name("warden")
    .description("crash-safe node for coding agents: bundle delivery, exactly-once invocations, signed run journals")
    .version(packageVersion(), "-V, --version", "print the version")
    .helpOption("-h, --help", "show help")
    .showHelpAfterError(false)
    .exitOverride()
    // Usage errors are printed by main() like every other failure: `warden: <message> (<code>)`.
    .configureOutput({ writeOut: (s) => ctx.io.stdout(s), writeErr: (s) => ctx.io.stderr(s), outputError: () => undefined });
  for (const register of registrars) register(program, ctx);
  return program;
}

export async function main(argv: string[], io: CliIo = processIo()): Promise<number> {
  const ctx: CliContext = { io, exitCode: 0 };
  try {
    await (await buildProgram(ctx, argv)).parseAsync(argv);
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
