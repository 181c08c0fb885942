/**
 * `warden log verify OLD NEW`: are two checkpoints of a node's transparency log consistent (one a
 * prefix of the other)? The proof comes from `--proof FILE` or from the node; either way it is
 * checked here, against log keys from `--policy FILE` or `--vkey`. Heavy modules load in the action.
 */
import { resolve } from "node:path";
import type { Command } from "commander";
import type { CliContext } from "../context.js";
import { connect, type NodeFlags } from "../node.js";
import { runCommand } from "../outcome.js";
import { collect } from "../parse.js";
import { readInputFile } from "../read-input.js";

interface LogVerifyFlags extends NodeFlags {
  policy?: string;
  vkey: string[];
  proof?: string;
  json?: boolean;
}

const NOTE_MAX_BYTES = 64 * 1024;

export function registerLogCommands(program: Command, ctx: CliContext): void {
  const log = program.command("log").description("the node's transparency log (C2SP checkpoints, tiles, witnesses)");
  log
    .command("verify")
    .description("check that two checkpoints of a log are consistent: the smaller tree is a prefix of the larger")
    .argument("<old>", "a checkpoint file (a signed note)")
    .argument("<new>", "another checkpoint file of the same log")
    .option("--policy <file>", "trust the log keys of this C2SP tlog-policy file")
    .option("--vkey <vkey>", "trust this log verifier key (repeatable)", collect, [])
    .option("--proof <file>", "the consistency proof: one base64 hash per line, or the JSON the node answers; default: ask the node")
    .option("--url <url>", "the node to ask for the proof (default $WARDEN_URL, else the local node)")
    .option("--home <dir>", "the local node to ask (default $WARDEN_HOME or ./.warden)")
    .option("--json", "print {ok, old, size} as JSON")
    .action((oldFile: string, newFile: string, flags: LogVerifyFlags) => runCommand(ctx, flags, () => logVerify(ctx, oldFile, newFile, flags)));
}

async function logVerify(ctx: CliContext, oldFile: string, newFile: string, flags: LogVerifyFlags): Promise<number> {
  const { parseVkey } = await import("../../tlog/note.js");
  const { verifierFor } = await import("../../tlog/cosignature.js");
  const { parsePolicy } = await import("../../tlog/policy.js");
  const { parseNote } = await import("../../tlog/note.js");
  const { parseCheckpointText } = await import("../../tlog/checkpoint.js");
  const { verifyCheckpointConsistency } = await import("../../tlog/verify.js");
  const { ValidationError } = await import("../../core/errors.js");
  const read = async (file: string): Promise<string> => (await readInputFile(resolve(ctx.io.cwd, file), NOTE_MAX_BYTES)).toString("utf8");
  const logs = [
    ...(flags.policy === undefined ? [] : parsePolicy(await read(flags.policy)).logs),
    ...flags.vkey.map((v) => parseVkey(v, verifierFor)),
  ];
  if (logs.length === 0) throw new ValidationError("no-trusted-keys", "name the log's key: --policy FILE or --vkey VKEY");
  const oldNote = await read(oldFile);
  const newNote = await read(newFile);
  let proof: string[];
  if (flags.proof !== undefined) {
    const text = (await read(flags.proof)).trim();
    proof = text.startsWith("{") ? ((JSON.parse(text) as { proof?: string[] }).proof ?? []) : text.split("\n").filter((l) => l !== "");
  } else {
    const sizes = [oldNote, newNote].map((n) => parseCheckpointText(parseNote(n).text).size).sort((a, b) => a - b) as [number, number];
    proof = sizes[0] === sizes[1] ? [] : (await (await connect(ctx.io, flags)).logConsistency(sizes[0], sizes[1])).proof;
  }
  try {
    const checked = verifyCheckpointConsistency(oldNote, newNote, proof, logs);
    if (flags.json === true) ctx.io.stdout(`${JSON.stringify({ ok: true, old: checked.old.size, size: checked.new.size })}\n`);
    else ctx.io.stdout(`OK ${checked.old.origin}: the tree of size ${checked.old.size} is a prefix of the tree of size ${checked.new.size}\n`);
    return 0;
  } catch (error) {
    if ((error as { code?: string }).code !== "tlog-inconsistent") throw error;
    if (flags.json === true) ctx.io.stdout(`${JSON.stringify({ ok: false, code: "tlog-inconsistent", detail: (error as Error).message })}\n`);
    else ctx.io.stdout(`INCONSISTENT: ${(error as Error).message}\n`);
    return 1;
  }
}
