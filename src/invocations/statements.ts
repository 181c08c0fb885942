/**
 * What the invocations domain attests to the transparency log (DESIGN.md "Transparency"), built
 * from what a claim stores: the same statement when a result or receipt is recorded and when the
 * log catches up on one a crash kept out of it.
 */
import { sha256Digest } from "../core/digest.js";
import type { ReconciliationStatement, RunSealStatement } from "../tlog/statements.js";
import type { ClaimKey, StoredResult } from "./claim-store.js";

export function runSealStatement(key: ClaimKey, runId: string, result: StoredResult): RunSealStatement {
  const { entries, tail_hash, bytes, sha256 } = result.journal;
  return { v: 1, type: "run.sealed", run_id: runId, scope: key.scope, id: key.id, outcome: "recorded", result_hash: result.hash, entries, tail_hash, bytes, sha256 };
}

/** `receipt`: the receipt's canonical JSON, exactly as stored with the claim. */
export function reconciliationStatement(key: ClaimKey, runId: string, operator: string, receipt: string): ReconciliationStatement {
  return { v: 1, type: "run.reconciled", run_id: runId, scope: key.scope, id: key.id, operator, receipt_sha256: sha256Digest(receipt) };
}
