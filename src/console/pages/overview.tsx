/** Overview: who this node is, where its state lives, what it is doing, what went wrong lately. Polled, never reloaded. */
import { client } from "../api.js";
import { href, Link } from "../router.js";
import { Empty, ErrorBox, Loading, Status, Time, useAsync } from "../ui.js";
import { UploadRows } from "../uploads.js";
import type { Fleet, SpendToday } from "../../client/wire.js";

const POLL_MS = 3000;

export function Overview() {
  const node = useAsync(() => client.node(), [], POLL_MS);
  if (node.data === undefined) return node.error !== undefined ? <ErrorBox error={node.error} /> : <Loading what="the node" />;
  const n = node.data;
  const counts = n.counts;
  return (
    <section aria-labelledby="overview-title">
      <h1 id="overview-title">Overview</h1>
      {node.error !== undefined && <ErrorBox error={node.error} title="Refresh failed" />}
      <div class="cards">
        <div class="card">
          <h2>Node</h2>
          <dl>
            <dt>Readiness</dt>
            <dd>
              <span class={n.ready ? "ok" : "bad"}>{n.ready ? "ready" : "not ready"}</span>
            </dd>
            <dt>Backend</dt>
            <dd>{n.backend === "embedded" ? "embedded (SQLite and files in one private directory)" : "PostgreSQL (shared by the fleet)"}</dd>
            <dt>Version</dt>
            <dd>{n.version}</dd>
            <dt>Signing keys</dt>
            <dd>
              {n.keys.map((k) => (
                <code class="key-id">{k.key_id}</code>
              ))}{" "}
              <Link href={href.keys()}>keys</Link>
            </dd>
          </dl>
        </div>
        <div class="card">
          <h2>Invocations</h2>
          <ul class="counts">
            {(["in_progress", "unresolved", "recorded", "reconciled"] as const).map((status) => (
              <li>
                <Link href={href.invocations({ status })}>
                  <span class="count" data-testid={`count-${status}`}>
                    {counts[status].toLocaleString()}
                  </span>{" "}
                  <Status status={status} />
                </Link>
              </li>
            ))}
          </ul>
          <p class="muted">{counts.total.toLocaleString()} identities held in all.</p>
        </div>
        <div class="card">
          <h2>Now</h2>
          <dl>
            <dt>Runs active</dt>
            <dd data-testid="active-runs">{n.active_runs}</dd>
            <dt>Uploads in progress</dt>
            <dd data-testid="upload-count">
              {n.uploads.length === 0 ? "none" : <Link href={href.bundles()}>{n.uploads.length}</Link>}
            </dd>
          </dl>
        </div>
      </div>
      <Nodes fleet={n.fleet} />
      <SpendTable spend={n.spend_today} />
      {n.uploads.length > 0 && (
        <>
          <h2>Uploads in progress</h2>
          <UploadRows uploads={n.uploads} />
        </>
      )}
      <h2>Recent failures</h2>
      {n.recent_failures.length === 0 ? (
        <Empty>No run has ended without a recorded result since this node started.</Empty>
      ) : (
        <table>
          <caption class="sr-only">Runs that ended without a recorded result</caption>
          <thead>
            <tr>
              <th scope="col">When</th>
              <th scope="col">Invocation</th>
              <th scope="col">Status</th>
            </tr>
          </thead>
          <tbody>
            {n.recent_failures.map((f) => (
              <tr>
                <td>
                  <Time iso={f.at} />
                </td>
                <td>
                  <Link href={href.invocation(f.scope, f.id)}>
                    {f.scope} {f.id}
                  </Link>
                </td>
                <td>
                  <Status status={f.status} />
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      {counts.unresolved > 0 && (
        <p>
          <Link href={href.invocations({ status: "unresolved" })}>
            {counts.unresolved} unresolved invocation{counts.unresolved === 1 ? "" : "s"} await review →
          </Link>
        </p>
      )}
    </section>
  );
}

/** The nodes sharing this node's state: a fleet's live nodes (a node killed leaves the list as its database session ends), or this one alone. */
function Nodes(props: { fleet: Fleet }) {
  const { fleet } = props;
  if (!fleet.shared) {
    return (
      <>
        <h2>Nodes</h2>
        <p class="muted" data-testid="single-node">
          A single node: the embedded backend's state is this process's alone. A fleet shares one PostgreSQL database (<code>warden serve --postgres</code>).
        </p>
      </>
    );
  }
  return (
    <>
      <h2>
        Nodes <span class="badge">{fleet.nodes.length} live</span>
      </h2>
      <table class="fleet" data-testid="fleet">
        <caption class="sr-only">The fleet's live nodes</caption>
        <thead>
          <tr>
            <th scope="col">Host</th>
            <th scope="col">PID</th>
            <th scope="col">Listens on</th>
            <th scope="col" class="wide">Version</th>
            <th scope="col" class="wide">Started</th>
          </tr>
        </thead>
        <tbody>
          {fleet.nodes.map((node) => (
            <tr data-node={node.node_id} data-pid={node.pid}>
              <td>
                {node.host}
                {node.self && <span class="badge self">this node</span>}
              </td>
              <td>{node.pid}</td>
              <td>{node.url === undefined ? <span class="muted">starting</span> : <code>{node.url}</code>}</td>
              <td class="wide">{node.version ?? "—"}</td>
              <td class="wide">
                <Time iso={node.started_at} />
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </>
  );
}

/** Today's spend per workspace and principal (DESIGN.md "Spend"): the day's counters, the fleet's on PostgreSQL. */
function SpendTable(props: { spend: SpendToday }) {
  return (
    <>
      <h2>Spend today ({props.spend.day}, UTC)</h2>
      {props.spend.counters.length === 0 ? (
        <Empty>No run has spent anything today.</Empty>
      ) : (
        <table class="spend" data-testid="spend-today">
          <caption class="sr-only">What each workspace and principal spent today</caption>
          <thead>
            <tr>
              <th scope="col">Workspace or principal</th>
              <th scope="col">Input tokens</th>
              <th scope="col" class="wide">Output tokens</th>
              <th scope="col">Estimated cost</th>
              <th scope="col" class="wide">Model turns</th>
              <th scope="col" class="wide">Wall time</th>
            </tr>
          </thead>
          <tbody>
            {props.spend.counters.map((c) => (
              <tr data-testid={`spend-${c.kind}-${c.subject}`}>
                <th scope="row" class="subject">
                  {c.kind} <code>{c.subject}</code>
                </th>
                <td>{c.input_tokens.toLocaleString()}</td>
                <td class="wide">{c.output_tokens.toLocaleString()}</td>
                <td>${(c.cost_usd_micros / 1e6).toFixed(6)}</td>
                <td class="wide">{c.turns.toLocaleString()}</td>
                <td class="wide">{(c.wall_ms / 1000).toFixed(1)} s</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </>
  );
}
