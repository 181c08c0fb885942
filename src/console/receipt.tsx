/**
 * A reconciliation receipt, whole: the review (outcome, rationale, evidence, effects stopped), who
 * signed it when, with which key, the signature, and the snapshot it covers. The run page shows it
 * on load for every reconciled run, the review page right after signing: one view for both.
 */
import type { ReconciliationReceipt } from "../client/wire.js";
import { Status, Time } from "./ui.js";

/** `jsonOpen`: the receipt's JSON unfolded (right after signing, where it is what was just made). */
export function ReceiptView(props: { receipt: ReconciliationReceipt; jsonOpen?: boolean }) {
  const { receipt } = props;
  const { review, snapshot } = receipt;
  return (
    <div class="receipt" data-testid="receipt-view">
      <dl>
        <dt>Outcome</dt>
        <dd>
          <Status status="reconciled" /> {review.outcome.replace("_", " ")}
        </dd>
        <dt>Operator</dt>
        <dd>
          {receipt.operator}, <Time iso={receipt.recorded_at} />
        </dd>
        <dt>Rationale</dt>
        <dd class="rationale">{review.rationale}</dd>
        <dt>Evidence</dt>
        <dd>
          <ul class="evidence" aria-label="Evidence">
            {review.evidence.map((e) => (
              <li>
                {e.reference} <code class="small">{e.sha256}</code>
              </li>
            ))}
          </ul>
        </dd>
        <dt>Effects stopped</dt>
        <dd>{review.effects_stopped ? "yes, the operator checked" : "no"}</dd>
        <dt>Covers</dt>
        <dd class="small">
          run <code>{snapshot.audit.run_id}</code>: {snapshot.audit.entries} journal entries, tail <code>{snapshot.audit.tail_hash}</code>; snapshot{" "}
          <code>{review.snapshot_hash}</code>
        </dd>
        <dt>Signed with</dt>
        <dd>
          key <code>{receipt.key_id}</code>
        </dd>
        <dt>Signature</dt>
        <dd class="mono small break">{receipt.sig}</dd>
      </dl>
      <details open={props.jsonOpen === true}>
        <summary>The signed receipt (JSON)</summary>
        <pre class="output" data-testid="receipt">
          {JSON.stringify(receipt, null, 2)}
        </pre>
      </details>
    </div>
  );
}
