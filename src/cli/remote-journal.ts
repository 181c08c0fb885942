/**
 * `warden journal verify <run_id>`: the run's journal is fetched from the node
 * (`GET /v1/runs/{run_id}/journal`) and verified HERE, with the CLI's own verifier, against the
 * node's published keys (`GET /v1/keys`) — or against `--key`, which pins the key instead of
 * trusting what the node publishes. The node's own verification route is not used: a proof checked
 * by the party it is supposed to convince is no proof.
 */
import { existsSync } from "node:fs";
import { resolve } from "node:path";
import type { PublicKeyRecord } from "../journal/types.js";
import type { CliIo } from "./context.js";
import { connect, type NodeFlags } from "./node.js";
import { isUuid } from "./parse.js";

/** A UUID that names no file in the working directory is a run id. */
export function isRunIdArgument(io: CliIo, argument: string): boolean {
  return isUuid(argument) && !existsSync(resolve(io.cwd, argument));
}

export async function fetchRunJournal(io: CliIo, runId: string, flags: NodeFlags): Promise<{ bytes: Uint8Array; nodeKeys: () => Promise<readonly PublicKeyRecord[]> }> {
  const client = await connect(io, flags);
  const bytes = await client.journal(runId.toLowerCase());
  return { bytes, nodeKeys: () => client.keys() };
}
