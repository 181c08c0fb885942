/** `warden serve`: run the node until SIGINT/SIGTERM, then shut down gracefully. */
import type { Command } from "commander";
import type { ServeConfig, ServeFlags } from "../../config/serve-config.js";
import type { CliContext } from "../context.js";
import type { ShutdownEvent } from "../../warden/facade.js";
import { collect } from "../parse.js";

interface ServeOptions {
  home?: string;
  listen?: string;
  workspace: string[];
  trustWorkspace: string[];
  provider: string[];
  logLevel?: string;
  postgres?: string;
  json?: boolean;
  logOrigin?: string;
  witness: string[];
  witnessKey: string[];
}

export function registerServeCommand(program: Command, ctx: CliContext): void {
  program
    .command("serve")
    .description("run the warden node (HTTP API v1) on the embedded backend, or on a shared PostgreSQL with --postgres")
    .option("--home <dir>", "state directory (default $WARDEN_HOME or ./.warden)")
    .option("--listen <host:port>", "listen address; port 0 picks a free port (default 127.0.0.1:7420)")
    .option("--workspace <id=/abs/path>", "a workspace agents may run in (repeatable)", collect, [])
    .option("--trust-workspace <id>", "let the workspace's own provider configuration (.claude/, .mcp.json, .codex/) run (repeatable)", collect, [])
    .option("--provider <name=command>", "the command of a provider: claude, codex or kimi (repeatable)", collect, [])
    .option("--postgres <url>", "keep claims, journals, keys and bundles on this PostgreSQL database, shared by a fleet (default $WARDEN_POSTGRES_URL)")
    .option("--log-level <level>", "fatal, error, warn, info, debug, trace or silent (default info, or $WARDEN_LOG_LEVEL)")
    .option("--json", "print the listening line as JSON {url, pid, home}")
    .option("--log-origin <origin>", "the transparency log's checkpoint origin (default warden.local/<first key id>)")
    .option("--witness <name=url>", "submit each checkpoint to this C2SP tlog-witness (repeatable; needs --witness-key)", collect, [])
    .option("--witness-key <vkey>", "a witness's cosignature/v1 verifier key, named as in --witness (repeatable)", collect, [])
    .action(async (options: ServeOptions) => {
      ctx.exitCode = await serve(ctx, options);
    });
}

async function serve(ctx: CliContext, options: ServeOptions): Promise<number> {
  const flags: ServeFlags = {
    workspace: options.workspace,
    trustWorkspace: options.trustWorkspace,
    provider: options.provider,
    ...(options.home === undefined ? {} : { home: options.home }),
    ...(options.listen === undefined ? {} : { listen: options.listen }),
    ...(options.logLevel === undefined ? {} : { logLevel: options.logLevel }),
    ...(options.postgres === undefined ? {} : { postgres: options.postgres }),
    log: { witness: options.witness, witnessKey: options.witnessKey, ...(options.logOrigin === undefined ? {} : { logOrigin: options.logOrigin }) },
  };
  const [{ loadServeConfig, loadServeListen }, { reserveListenAddress }] = await Promise.all([
    import("../../config/serve-config.js"),
    import("../../server/listen-reservation.js"),
  ]);
  // The address first: a start that cannot listen there must not have created the home or its token.
  const reservation = await reserveListenAddress(loadServeListen(flags, ctx.io.env, ctx.io.cwd));
  let config: ServeConfig;
  try {
    config = loadServeConfig(flags, ctx.io.env, ctx.io.cwd);
  } catch (error) {
    await reservation.release();
    throw error;
  }
  if (config.generatedToken !== undefined) {
    ctx.io.stderr(`warden: no token was configured; an operator token was written to ${config.generatedToken}\n`);
  }
  // Listening for the stop signals before the node starts: one that arrives while it starts (once
  // node.json is out, a supervisor may well send it) stops it gracefully once it is up, instead of
  // killing it with node.json and its stores left as a crash leaves them.
  const stop = waitForSignal();
  // Loaded here, not at the top: fastify and the server cost every other command ~1 s to import.
  const { startNode } = await import("../../server/node.js");
  // WARDEN_CHECK_REPLIES=1 (the test suite's nodes): every reply is held against its response
  // schema and fails (500) on a mismatch, so that /openapi.json stays what the node answers.
  const checkReplies = ctx.io.env.WARDEN_CHECK_REPLIES === "1";
  const node = await startNode(config, { logStream: process.stderr, reservation, checkReplies });
  ctx.io.stdout(options.json === true ? `${JSON.stringify({ url: node.url, pid: process.pid, home: config.home })}\n` : `warden listening on ${node.url}\n`);
  const signal = await stop;
  ctx.io.stderr(`warden: ${signal}: shutting down\n`);
  await node.close((event) => ctx.io.stderr(shutdownLine(event, signal)));
  return 0;
}

/** What a shutdown waits for, and what it killed: without it a node with a running agent says nothing for the whole grace. */
export function shutdownLine(event: ShutdownEvent, signal: string): string {
  if (event.type === "waiting") {
    const runs = event.runs.map((r) => `run ${r.run_id} (${r.scope} ${r.id})`).join(", ");
    const again = signal === "SIGINT" ? "Ctrl-C again" : `${signal} again`;
    return (
      `warden: waiting up to ${Math.ceil(event.grace_ms / 1000)} s for ${event.runs.length} running agent${event.runs.length === 1 ? "" : "s"} to finish: ${runs}; ` +
      `then ${event.runs.length === 1 ? "it is" : "they are"} killed (${again} exits at once and leaves ${event.runs.length === 1 ? "it" : "them"} to the next start)\n`
    );
  }
  const runs = event.runs.map((r) => `run ${r.run_id} (pid${r.pids.length === 1 ? "" : "s"} ${r.pids.join(", ")})`).join(", ");
  return (
    `warden: the grace ran out: killed the agent${event.runs.length === 1 ? "" : "s"} of ${runs}; ` +
    `${event.runs.length === 1 ? "its run reads" : "their runs read"} unresolved (\`warden inspect\`` +
    `${event.recorded ? " says this node stopped it" : "; the stop could not be recorded, check the pids are gone"})\n`
  );
}

/** Resolves with the first SIGINT/SIGTERM; a second one exits at once. */
export function waitForSignal(): Promise<NodeJS.Signals> {
  return new Promise((resolve) => {
    const first = (signal: NodeJS.Signals): void => {
      process.off("SIGINT", first);
      process.off("SIGTERM", first);
      process.once("SIGINT", () => process.exit(130));
      process.once("SIGTERM", () => process.exit(143));
      resolve(signal);
    };
    process.on("SIGINT", first);
    process.on("SIGTERM", first);
  });
}
