/**
 * Queue: the submitted invocations waiting for a node with room (DESIGN.md "Queued invocations"),
 * the fleet's on PostgreSQL — depth, running and oldest wait per principal, running per node, this
 * node's slots and the waits it saw — and each waiting invocation with a Cancel button for
 * operators. Polled, as the overview is. (Not the Invocations page's Unresolved tab, the work
 * queue of runs to review: these have not run yet.)
 */
import { useState } from "preact/hooks";
import { client } from "../api.js";
import type { QueueSummary } from "../../client/wire.js";
import { href, Link } from "../router.js";
import { Empty, ErrorBox, Loading, Time, useAsync } from "../ui.js";

const POLL_MS = 2000;

/** How long ago `iso` was, for a wait: "42 s", "3 min", "2.5 h". */
function waited(iso: string | undefined, now: number): string {
  if (iso === undefined) return "—";
  const s = Math.max(0, (now - Date.parse(iso)) / 1000);
  return s < 120 ? `${s.toFixed(0)} s` : s < 7200 ? `${(s / 60).toFixed(0)} min` : `${(s / 3600).toFixed(1)} h`;
}

export function Queue(props: { operator: boolean }) {
  const summary = useAsync(() => client.node().then((n) => n.queue), [], POLL_MS);
  const waiting = useAsync(() => client.listInvocations({ status: "queued" }), [], POLL_MS);
  const [cancelled, setCancelled] = useState<{ key: string; error?: unknown } | undefined>(undefined);
  const [busy, setBusy] = useState<string | undefined>(undefined);
  const cancel = async (scope: string, id: string): Promise<void> => {
    const key = `${scope}/${id}`;
    setBusy(key);
    try {
      await client.cancel(scope, id);
      setCancelled({ key });
    } catch (error) {
      setCancelled({ key, error });
    } finally {
      setBusy(undefined);
      waiting.reload();
      summary.reload();
    }
  };
  const now = Date.now();
  return (
    <section aria-labelledby="queue-title">
      <h1 id="queue-title">Queue</h1>
      <p class="muted">Invocations submitted with <code>Prefer: respond-async</code> wait here until a node with room takes them.</p>
      {summary.error !== undefined && <ErrorBox error={summary.error} title="Refresh failed" />}
      {summary.data === undefined ? summary.error === undefined && <Loading what="the queue" /> : <Summary queue={summary.data} now={now} />}
      <h2>Waiting</h2>
      {cancelled?.error !== undefined && <ErrorBox error={cancelled.error} title={`Cancel of ${cancelled.key} failed`} />}
      {cancelled !== undefined && cancelled.error === undefined && (
        <p role="status" data-testid="cancelled">
          Cancelled {cancelled.key}: it will not run.
        </p>
      )}
      {waiting.error !== undefined && <ErrorBox error={waiting.error} />}
      {waiting.data === undefined ? (
        waiting.error === undefined && <Loading what="waiting invocations" />
      ) : waiting.data.items.length === 0 ? (
        <Empty>Nothing is waiting: every submitted invocation has been taken by a node.</Empty>
      ) : (
        <table class="queue" aria-busy={waiting.loading}>
          <caption class="sr-only">Invocations waiting in the queue</caption>
          <thead>
            <tr>
              <th scope="col">Invocation</th>
              <th scope="col">Principal</th>
              <th scope="col">Workspace</th>
              <th scope="col">Provider</th>
              <th scope="col">Priority</th>
              <th scope="col">Waiting</th>
              {props.operator && <th scope="col">Action</th>}
            </tr>
          </thead>
          <tbody>
            {waiting.data.items.map((item) => {
              const key = `${item.scope}/${item.id}`;
              return (
                <tr data-testid="queued-row" data-key={key}>
                  <td class="id">
                    <Link href={href.invocation(item.scope, item.id)}>
                      <span class="scope">{item.scope}</span> {item.id}
                    </Link>
                  </td>
                  <td>{item.principal ?? "—"}</td>
                  <td>{item.workspace ?? "—"}</td>
                  <td>{item.provider ?? "—"}</td>
                  <td>{item.priority ?? 0}</td>
                  <td>
                    {waited(item.queued_at, now)} <span class="muted">(since <Time iso={item.queued_at} />)</span>
                  </td>
                  {props.operator && (
                    <td>
                      <button type="button" class="danger" disabled={busy === key} aria-label={`Cancel ${key}`} onClick={() => void cancel(item.scope, item.id)}>
                        Cancel
                      </button>
                    </td>
                  )}
                </tr>
              );
            })}
          </tbody>
        </table>
      )}
      {waiting.data?.cursor !== undefined && <p class="muted">More are waiting than this page shows.</p>}
    </section>
  );
}

function Summary(props: { queue: QueueSummary; now: number }) {
  const q = props.queue;
  return (
    <>
      <div class="cards">
        <div class="card">
          <h2>Fleet</h2>
          <dl>
            <dt>Waiting</dt>
            <dd data-testid="queue-depth">{q.depth.toLocaleString()}</dd>
            <dt>Running from the queue</dt>
            <dd data-testid="queue-running">{q.running.toLocaleString()}</dd>
            <dt>Oldest waiting</dt>
            <dd>{waited(q.oldest_queued_at, props.now)}</dd>
          </dl>
        </div>
        <div class="card">
          <h2>This node</h2>
          <dl>
            <dt>Slots</dt>
            <dd data-testid="queue-slots">{q.slots}</dd>
            <dt>Started from the queue</dt>
            <dd>{q.waits.count.toLocaleString()}</dd>
            <dt>Their wait</dt>
            <dd>{q.waits.count === 0 ? "—" : `${(q.waits.sum_s / q.waits.count).toFixed(1)} s on average, ${q.waits.max_s.toFixed(1)} s at most`}</dd>
          </dl>
        </div>
      </div>
      <h2>By principal</h2>
      {q.principals.length === 0 ? (
        <Empty>No principal has invocations waiting or running from the queue.</Empty>
      ) : (
        <table class="queue-principals">
          <caption class="sr-only">The queue by principal</caption>
          <thead>
            <tr>
              <th scope="col">Principal</th>
              <th scope="col">Waiting</th>
              <th scope="col">Running</th>
              <th scope="col">Oldest waiting</th>
            </tr>
          </thead>
          <tbody>
            {q.principals.map((p) => (
              <tr data-testid="queue-principal">
                <td>{p.principal}</td>
                <td>{p.queued.toLocaleString()}</td>
                <td>{p.running.toLocaleString()}</td>
                <td>{waited(p.oldest_queued_at, props.now)}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      <h2>By node</h2>
      {q.nodes.length === 0 ? (
        <Empty>No node is running anything from the queue.</Empty>
      ) : (
        <table class="queue-nodes">
          <caption class="sr-only">Queued invocations running per node</caption>
          <thead>
            <tr>
              <th scope="col">Node</th>
              <th scope="col">Running</th>
            </tr>
          </thead>
          <tbody>
            {q.nodes.map((n) => (
              <tr>
                <td>
                  <code>{n.node_id}</code>
                </td>
                <td>{n.running.toLocaleString()}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </>
  );
}
