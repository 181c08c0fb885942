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
import type { ReconciliationReceipt } from "../client/wire.js";
import { WardenHttpError } from "../client/errors.js";
import type { CliIo } from "./context.js";
import { connect, type NodeFlags } from "./node.js";
import { isUuid } from "./parse.js";

/** A UUID that names no file in the working directory is a run id. */
export function isRunIdArgument(io: CliIo, argument: string): boolean {
  return isUuid(argument) && !existsSync(resolve(io.cwd, argument));
}

export interface RemoteJournal {
  readonly bytes: Uint8Array;
  nodeKeys(): Promise<readonly PublicKeyRecord[]>;
  /** The node's receipt closing the invocation `(scope, id)`, when the node reconciled it. */
  receipt(scope: string, id: string): Promise<ReconciliationReceipt | undefined>;
}

export async function fetchRunJournal(io: CliIo, runId: string, flags: NodeFlags): Promise<RemoteJournal> {
  const client = await connect(io, flags);
  const bytes = await client.journal(runId.toLowerCase());
  return {
    bytes,
    nodeKeys: () => client.keys(),
    receipt: async (scope, id) => {
      // A journal whose invocation the node does not know (its claim is elsewhere) has no receipt here.
      const view = await client.getInvocation(scope, id).catch((error: unknown) => {
        if (error instanceof WardenHttpError && error.status === 404) return undefined;
        throw error;
      });
      return view?.status === "reconciled" ? view.receipt : undefined;
    },
  };
}

/** What `journal verify` says of a reconciled run: the operator's review, and whether its receipt holds for the journal just verified. */
export interface ReconciliationSummary {
  readonly outcome: string;
  readonly operator: string;
  readonly recorded_at: string;
  readonly receipt_ok: boolean;
  readonly reason?: string;
}

/**
 * Checks a receipt against the journal verified HERE, not against what the node says: signed by a
 * trusted key, its review made on its snapshot, and its snapshot naming this very run, entry
 * count and tail hash. (The claim row it also covers is the node's; `inspect` checks that.)
 */
export async function summarizeReceipt(
  receipt: ReconciliationReceipt,
  keys: readonly PublicKeyRecord[],
  journal: { run_id: string; entries: number; tail_hash: string },
): Promise<ReconciliationSummary> {
  const { verifyReceipt } = await import("../invocations/reconciliation.js");
  const base = { outcome: receipt.review.outcome, operator: receipt.operator, recorded_at: receipt.recorded_at };
  // Its own snapshot as the "current" one: verifyReceipt then checks the signature and the review;
  // the journal part of the snapshot is checked against the bytes verified here, below.
  const checked = verifyReceipt(receipt, keys, receipt.snapshot as Parameters<typeof verifyReceipt>[2]);
  if (!checked.ok) return { ...base, receipt_ok: false, reason: checked.reason };
  const audit = receipt.snapshot.audit;
  if (audit.run_id !== journal.run_id || audit.entries !== journal.entries || audit.tail_hash !== journal.tail_hash) {
    return { ...base, receipt_ok: false, reason: `the receipt covers ${audit.entries} entries ending ${audit.tail_hash} of run ${audit.run_id}, not this journal` };
  }
  return { ...base, receipt_ok: true };
}
