/**
 * `warden model-serve --script FILE`: a scripted model server on loopback (src/scripted-model), to
 * rehearse a bundle with the real Claude Code and Codex CLIs offline before pushing it to a fleet.
 * Prints where to point each CLI, then one JSON line per model request it answered.
 */
import type { Command } from "commander";
import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import { ValidationError, errnoCode } from "../../core/errors.js";
import type { CliContext } from "../context.js";
import { waitForSignal } from "./serve.js";

interface ModelServeFlags {
  script: string;
  listen: string;
  log?: string;
}

const MAX_SCRIPT_BYTES = 16 * 1024 * 1024;

export function registerModelServeCommand(program: Command, ctx: CliContext): void {
  program
    .command("model-serve")
    .description("serve a scripted model (Anthropic /v1/messages and OpenAI /v1/responses) on loopback, to rehearse a bundle with the real CLIs offline")
    .requiredOption("--script <file>", 'JSON: {"turns": [{"text": …} | {"tool": {"name", "input"}}, …]} (one turn per model request)')
    .option("--listen <host:port>", "listen address (port 0 picks a free one)", "127.0.0.1:0")
    .option("--log <file>", "append every request, with its body, to this file as JSON lines")
    .action(async (flags: ModelServeFlags) => {
      ctx.exitCode = await modelServe(ctx, flags);
    });
}

async function modelServe(ctx: CliContext, flags: ModelServeFlags): Promise<number> {
  const { parseListen } = await import("../../config/listen.js");
  const { ScriptedModelServer, parseModelScript } = await import("../../scripted-model/index.js");
  const listen = parseListen(flags.listen);
  const script = parseModelScript(readScript(resolve(ctx.io.cwd, flags.script)));
  const { appendFileSync } = await import("node:fs");
  const log = flags.log === undefined ? undefined : resolve(ctx.io.cwd, flags.log);
  const stop = waitForSignal();
  const server = await ScriptedModelServer.start({
    script,
    host: listen.host,
    port: listen.port,
    onRequest: (r) => {
      ctx.io.stdout(`${JSON.stringify({ seq: r.seq, protocol: r.protocol, path: r.path, turn: r.turn, outcome: r.outcome })}\n`);
      if (log !== undefined) appendFileSync(log, `${JSON.stringify(r)}\n`, { mode: 0o600 });
    },
  });
  ctx.io.stdout(
    `scripted model listening on ${server.url} (${script.turns.length} turns)\n` +
      `  claude: ANTHROPIC_BASE_URL=${server.url} ANTHROPIC_API_KEY=any\n` +
      `  codex:  model_provider "warden" with base_url = "${server.url}/v1", wire_api = "responses"\n` +
      `  warden: providers.<name>.model.baseUrl = "${server.url}" (claude) / "${server.url}/v1" (codex)\n`,
  );
  const signal = await stop;
  ctx.io.stderr(`warden model-serve: ${signal}: ${server.requests.length} requests, ${server.turnsTaken} turns taken\n`);
  await server.close();
  return 0;
}

function readScript(path: string): unknown {
  let text: string;
  try {
    const bytes = readFileSync(path);
    if (bytes.byteLength > MAX_SCRIPT_BYTES) throw new ValidationError("model-script-invalid", `${path}: larger than ${MAX_SCRIPT_BYTES} bytes`);
    text = bytes.toString("utf8");
  } catch (error) {
    if (errnoCode(error) !== undefined) throw new ValidationError("model-script-unreadable", `${path}: ${errnoCode(error)}`, { details: { path } });
    throw error;
  }
  try {
    return JSON.parse(text) as unknown;
  } catch {
    throw new ValidationError("model-script-invalid", `${path}: not valid JSON`, { details: { path } });
  }
}
