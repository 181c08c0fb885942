/**
 * The log's catch-up at start (DESIGN.md "Transparency", "Recovery"): a fact is durable where it
 * is kept (a claim's result or receipt, a catalog commit or signature) before its statement is
 * appended, so a node killed between the two leaves a fact out of the log. At start the node
 * appends the statements of every fact since the log's watermark (appends are idempotent by key:
 * a fact already logged costs one index lookup), then raises the watermark to the start. Reading
 * "since the watermark" goes through indexes on the facts' times, so the work is O(facts since
 * then), not O(all claims). Receipts are re-checked all: reconciled claims stay few.
 */
import { parseReceipt } from "../invocations/reconciliation.js";
import { isDamagedClaim, type ClaimStore, type RecordedCursor } from "../invocations/claim-store.js";
import { reconciliationStatement, runSealStatement } from "../invocations/statements.js";
import type { TransparencyLog } from "../tlog/log.js";
import type { Delivery } from "../delivery/service.js";
import type { Attest } from "../tlog/statements.js";
import { deliveryAttest } from "./transparency.js";

const PAGE = 1000;

export interface CatchUpSources {
  readonly claims: ClaimStore;
  readonly delivery: Delivery;
  /** hears of each failure (the node counts it) */
  readonly onError?: (error: unknown) => void;
}

export interface CatchUpReport {
  /** leaves the catch-up added */
  readonly added: number;
  /** what failed (a store that cannot be read or written, a damaged record): the watermark stayed, the next start tries again */
  readonly errors: readonly unknown[];
}

/**
 * Appends what a crash kept out of the log. A failure does not fail the start (the log never
 * fails the node's work) and does not raise the watermark, so the next start reads the same facts.
 */
export async function catchUpLog(log: TransparencyLog, sources: CatchUpSources, now = Date.now()): Promise<CatchUpReport> {
  const before = (await log.status()).size;
  const from = await log.watermark();
  const errors: unknown[] = [];
  // A log without a watermark (new, or from before it had one) starts counting now: facts from
  // before the log kept one are not backfilled.
  if (from !== undefined) {
    const append: Attest = (statement, at) => log.append(statement, at);
    const delivery = deliveryAttest(append);
    const steps = [
      () => catchUpRuns(sources.claims, from, append),
      () => catchUpReceipts(sources.claims, append),
      async () => {
        for (const entry of await sources.delivery.catalog.changedSince(from)) {
          await delivery.commit(entry);
          await Promise.all(entry.signatures.filter((s) => !s.at_commit).map((s) => delivery.signed(entry, s)));
        }
      },
    ];
    for (const step of steps) {
      await step().catch((error: unknown) => {
        errors.push(error);
        sources.onError?.(error);
      });
    }
  }
  if (errors.length === 0) await log.advanceWatermark(now);
  return { added: (await log.status()).size - before, errors };
}

async function catchUpRuns(claims: ClaimStore, from: number, append: Attest): Promise<void> {
  let after: RecordedCursor | undefined;
  do {
    const page = await claims.recordedSince(from, after, PAGE);
    await Promise.all(
      page.claims.map((claim) =>
        isDamagedClaim(claim) || claim.result === undefined ? undefined : append(runSealStatement(claim, claim.run_id, claim.result), claim.result.recorded_at),
      ),
    );
    after = page.next;
  } while (after !== undefined);
}

async function catchUpReceipts(claims: ClaimStore, append: Attest): Promise<void> {
  for (let after: { scope: string; id: string } | undefined, page; (page = await claims.list("reconciled", after, PAGE)).length > 0; ) {
    await Promise.all(
      page.map((claim) => {
        const operator = isDamagedClaim(claim) ? undefined : operatorOf(claim.receipt);
        // A damaged row or receipt is reported where it is read (list, inspect); it has nothing to log.
        return isDamagedClaim(claim) || operator === undefined ? undefined : append(reconciliationStatement(claim, claim.run_id, operator, claim.receipt!));
      }),
    );
    if (page.length < PAGE) break;
    const last = page[page.length - 1]!;
    after = { scope: last.scope, id: last.id };
  }
}

function operatorOf(receipt: string | undefined): string | undefined {
  try {
    return receipt === undefined ? undefined : parseReceipt(JSON.parse(receipt)).operator;
  } catch {
    return undefined;
  }
}
