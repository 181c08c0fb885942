/**
 * `warden witness`: runs a C2SP tlog-witness for the logs named by `--log VKEY` until SIGINT or
 * SIGTERM. Its key and its memory live in `--dir` (0700; created with its key at the first start).
 */
import type { Command } from "commander";
import type { CliContext } from "../context.js";
import { runCommand } from "../outcome.js";
import { collect } from "../parse.js";

interface WitnessFlags {
  dir?: string;
  name?: string;
  log: string[];
  listen?: string;
  json?: boolean;
}

export function registerWitnessCommand(program: Command, ctx: CliContext): void {
  program
    .command("witness")
    .description("run a C2SP tlog-witness: cosign checkpoints of the given logs only if consistent with every one it cosigned before")
    .requiredOption("--dir <dir>", "the witness's private state directory (its key, its last checkpoint per log)")
    .requiredOption("--name <name>", "the witness's key name, e.g. witness.example.com/w1")
    .option("--log <vkey>", "a log it witnesses: the log's note verifier key, named by its origin (repeatable)", collect, [])
    .option("--listen <host:port>", "listen address (default 127.0.0.1:7430; port 0 picks a free port)")
    .option("--json", "print the listening line as JSON {url, vkey, pid}")
    .action((flags: WitnessFlags) => runCommand(ctx, flags, () => witness(ctx, flags)));
}

async function witness(ctx: CliContext, flags: WitnessFlags): Promise<number> {
  const { resolve, join } = await import("node:path");
  const http = await import("node:http");
  const { ensurePrivateDirSync } = await import("../../storage/secure-fs.js");
  const { EmbeddedKeyStore } = await import("../../backends/embedded/journal/key-store.js");
  const { parseVkey, SIG_ED25519, isKeyName } = await import("../../tlog/note.js");
  const { verifierFor } = await import("../../tlog/cosignature.js");
  const { SqliteWitnessStore } = await import("../../witness/store.js");
  const { Witness } = await import("../../witness/witness.js");
  const { witnessHandler } = await import("../../witness/server.js");
  const { parseListen } = await import("../../config/listen.js");
  const { ValidationError } = await import("../../core/errors.js");
  const name = flags.name ?? "";
  if (!isKeyName(name)) throw new ValidationError("witness-name-invalid", `--name ${name}: a key name is non-empty, with no spaces and no "+"`);
  const logs = flags.log.map((v) => parseVkey(v, verifierFor));
  if (logs.length === 0 || logs.some((l) => l.type !== SIG_ED25519)) throw new ValidationError("witness-log-invalid", "name each log with --log <its Ed25519 note vkey>");
  const dir = resolve(ctx.io.cwd, flags.dir!);
  ensurePrivateDirSync(dir, { create: true, recursive: true });
  const key = await new EmbeddedKeyStore(join(dir, "keys")).active();
  const store = new SqliteWitnessStore(dir);
  const w = new Witness({ name, key, logs, store });
  const listen = parseListen(flags.listen ?? "127.0.0.1:7430");
  const server = http.createServer(witnessHandler(w, logs.map((l) => l.name)));
  await new Promise<void>((done, fail) => {
    server.once("error", fail);
    server.listen(listen.port, listen.host, () => done());
  });
  const address = server.address() as { port: number };
  const url = `http://${listen.host.includes(":") ? `[${listen.host}]` : listen.host}:${address.port}`;
  ctx.io.stdout(flags.json === true ? `${JSON.stringify({ url, vkey: w.vkey, pid: process.pid })}\n` : `witness ${w.vkey} listening on ${url}\n`);
  const signal = await new Promise<string>((done) => {
    process.once("SIGINT", () => done("SIGINT"));
    process.once("SIGTERM", () => done("SIGTERM"));
  });
  ctx.io.stderr(`warden witness: ${signal}: shutting down\n`);
  server.closeAllConnections();
  await new Promise<void>((done) => server.close(() => done()));
  store.close();
  return 0;
}
