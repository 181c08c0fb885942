/** `warden console`: a one-time link that logs a browser in to the node's operator console. */
import type { Command } from "commander";
import type { CliContext } from "../context.js";
import { connect, nodeOptions, type NodeFlags } from "../node.js";
import { EXIT_OK, printJson, runCommand, type OutputFlags } from "../outcome.js";

type ConsoleFlags = NodeFlags & OutputFlags & { open?: boolean };

export function registerConsoleCommand(program: Command, ctx: CliContext): void {
  nodeOptions(
    program
      .command("console")
      .description("print a one-time link (valid 2 minutes, usable once) that logs a browser in to the node's console with this token's role")
      .option("--open", "also open the link in the desktop's browser (xdg-open / open)")
      .option("--json", "print {url, expires_at} as JSON"),
  ).action((flags: ConsoleFlags) => runCommand(ctx, flags, () => consoleLink(ctx, flags)));
}

async function consoleLink(ctx: CliContext, flags: ConsoleFlags): Promise<number> {
  const client = await connect(ctx.io, flags);
  const login = await client.consoleLogin();
  client.close();
  const url = client.url + login.path;
  if (flags.json === true) printJson(ctx, { url, expires_at: login.expires_at });
  else ctx.io.stdout(`${url}\n(one use, until ${login.expires_at}; the part after # never leaves your browser)\n`);
  if (flags.open === true) {
    const { spawn } = await import("node:child_process");
    const opener = process.platform === "darwin" ? "open" : "xdg-open";
    // Detached and ignored: no browser at all is not a failure, the link is printed.
    const child = spawn(opener, [url], { stdio: "ignore", detached: true });
    child.on("error", () => undefined);
    child.unref();
  }
  return EXIT_OK;
}
