/**
 * Reconcile (operators only): the inspection report, the review form, and the signed receipt.
 * Evidence files are hashed here, in the browser (sha256 via WebCrypto); only their names and
 * digests are sent. The node's own rules answer a bad review, shown with their code.
 */
import { useEffect, useRef, useState } from "preact/hooks";
import { client } from "../api.js";
import type { ReconciliationReceipt, Review } from "../../client/wire.js";
import { href, Link } from "../router.js";
import { ErrorBox, Loading, Status, useAsync } from "../ui.js";
import { hex } from "../verify.js";
import { ReceiptView } from "../receipt.js";
import { explainMemoryBound, explainTermination } from "../../invocations/explain.js";
import { visibleText } from "../../core/visible-text.js";

type Evidence = Review["evidence"][number];

async function sha256Of(file: File): Promise<string> {
  const digest = await crypto.subtle.digest("SHA-256", await file.arrayBuffer());
  return `sha256:${hex(digest)}`;
}

export function Reconcile(props: { scope: string; id: string }) {
  const inspection = useAsync(() => client.inspect(props.scope, props.id), [props.scope, props.id]);
  const [outcome, setOutcome] = useState<string>("");
  const [rationale, setRationale] = useState("");
  const [stopped, setStopped] = useState(false);
  const [evidence, setEvidence] = useState<Evidence[]>([]);
  const [hashing, setHashing] = useState(false);
  const [submitting, setSubmitting] = useState(false);
  const [error, setError] = useState<unknown>(undefined);
  const [receipt, setReceipt] = useState<ReconciliationReceipt | undefined>(undefined);
  // The form that had focus is replaced by the receipt: focus its heading, where reading goes on.
  const receiptHeading = useRef<HTMLHeadingElement>(null);
  useEffect(() => receiptHeading.current?.focus(), [receipt]);

  if (inspection.data === undefined) return inspection.error !== undefined ? <ErrorBox error={inspection.error} /> : <Loading what="the inspection" />;
  const { snapshot, snapshot_hash, report } = inspection.data;
  const journal = report.journal;

  const submit = async (event: Event): Promise<void> => {
    event.preventDefault();
    setSubmitting(true);
    setError(undefined);
    try {
      // Sent as the operator filled it in: the node is the one judge of a review (stale snapshot, template text, missing evidence).
      const review = { snapshot_hash, outcome, rationale, evidence, effects_stopped: stopped } as unknown as Review;
      setReceipt((await client.reconcile(props.scope, props.id, review)).receipt);
    } catch (failure) {
      setError(failure);
    } finally {
      setSubmitting(false);
    }
  };

  if (receipt !== undefined) {
    return (
      <section aria-labelledby="rec-title">
        <h1 id="rec-title" tabIndex={-1} ref={receiptHeading}>
          Reconciled
        </h1>
        <p role="status" data-testid="receipt-status">
          The node signed the receipt: <Status status="reconciled" /> {receipt.review.outcome}, by {receipt.operator}, key <code>{receipt.key_id}</code>.
        </p>
        <ReceiptView receipt={receipt} jsonOpen />
        <p>
          <Link href={href.invocation(props.scope, props.id)}>Back to the invocation</Link>
        </p>
      </section>
    );
  }

  return (
    <section aria-labelledby="rec-title">
      <h1 id="rec-title">
        Review <span class="mono">{snapshot.id}</span>
      </h1>
      <div class="card">
        <h2>Inspection</h2>
        <dl>
          <dt>Status</dt>
          <dd>
            <Status status={report.status} />
          </dd>
          <dt>Run</dt>
          <dd>
            <Link href={href.invocation(props.scope, props.id)}>{snapshot.audit.run_id}</Link>
          </dd>
          <dt>Journal</dt>
          <dd>
            {journal.present ? `${journal.entries} entries, ${journal.ok ? "verifies" : `fails: ${journal.first_error?.code ?? "?"} at line ${journal.first_error?.line ?? "?"}`}` : "missing"}
          </dd>
          <dt>Termination</dt>
          <dd>{explainTermination(journal.termination)}</dd>
          <dt>Effects</dt>
          <dd>
            {journal.effects} ({journal.open_effects.length} open{journal.open_effects.length > 0 ? `: ${visibleText(journal.open_effects.join(", "))}` : ""})
          </dd>
          <dt>Agent process</dt>
          <dd>
            {journal.agent_process === undefined ? "not noted" : `pid ${journal.agent_process.pid} on ${journal.agent_process.host}`}
            {(report.agent_stopped ?? []).map((s) => (
              <div>
                killed {s.at} (pids {s.killed.join(", ")}) by the node that started next
              </div>
            ))}
          </dd>
          {journal.memory_bound !== undefined && (
            <>
              <dt>Memory bound</dt>
              <dd>{explainMemoryBound(journal.memory_bound)}</dd>
            </>
          )}
          <dt>Findings</dt>
          <dd>{visibleText(journal.findings.map((f) => f.reason + (f.effect_id !== undefined ? ` (effect ${f.effect_id})` : "")).join("; ")) || "none"}</dd>
          <dt>Snapshot hash</dt>
          <dd class="mono small">{snapshot_hash}</dd>
        </dl>
      </div>
      {report.status !== "unresolved" ? (
        <p>
          This invocation is <Status status={report.status} />: only unresolved invocations are reconciled.
        </p>
      ) : (
        <form class="review" onSubmit={(e) => void submit(e)} aria-describedby="review-help">
          <h2>Your review</h2>
          <p id="review-help" class="muted">
            The node signs a receipt over this review and the snapshot above. The invocation is then closed for good: it is never run again.
          </p>
          <fieldset>
            <legend>Outcome</legend>
            {(
              [
                ["completed", "completed: its effects all happened as intended"],
                ["failed", "failed: it did not do what it was asked"],
                ["no_effects", "no effects: it changed nothing"],
              ] as const
            ).map(([value, label]) => (
              <label class="radio">
                <input type="radio" name="outcome" value={value} checked={outcome === value} onChange={() => setOutcome(value)} /> {label}
              </label>
            ))}
          </fieldset>
          <label for="rationale">Rationale</label>
          <textarea id="rationale" rows={4} value={rationale} onInput={(e) => setRationale((e.target as HTMLTextAreaElement).value)} placeholder="what you checked, and what you found" />
          <label for="evidence">Evidence files (hashed in this browser; only names and sha256 are sent)</label>
          <input
            id="evidence"
            type="file"
            multiple
            onChange={(e) => {
              const files = [...((e.target as HTMLInputElement).files ?? [])];
              setHashing(true);
              Promise.all(files.map(async (file) => ({ reference: file.name, sha256: await sha256Of(file) })))
                .then((list) => setEvidence((current) => [...current, ...list]), setError)
                .finally(() => setHashing(false));
            }}
          />
          {evidence.length > 0 && (
            <ul class="evidence" aria-label="Evidence">
              {evidence.map((item, i) => (
                <li>
                  {item.reference} <code class="small">{item.sha256}</code>{" "}
                  <button type="button" class="link" onClick={() => setEvidence(evidence.filter((_, j) => j !== i))} aria-label={`Remove ${item.reference}`}>
                    remove
                  </button>
                </li>
              ))}
            </ul>
          )}
          <label class="checkbox">
            <input type="checkbox" checked={stopped} onChange={(e) => setStopped((e.target as HTMLInputElement).checked)} /> I checked that the run's effects have stopped (its agent
            process is gone)
          </label>
          {error !== undefined && <ErrorBox error={error} title="The node refused the review" />}
          <button type="submit" disabled={submitting || hashing}>
            {submitting ? "Signing…" : "Sign and close"}
          </button>
        </form>
      )}
    </section>
  );
}
