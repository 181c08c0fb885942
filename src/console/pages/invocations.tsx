/**
 * Invocations, paged by the API's cursor (a page at a time, whatever the store holds), filtered
 * by status, with an Unresolved tab — the operator's work queue — and a jump to one id.
 */
import { useEffect, useState } from "preact/hooks";
import { client } from "../api.js";
import type { InvocationList } from "../../client/wire.js";
import { href, Link, navigate, type Route } from "../router.js";
import { Empty, ErrorBox, Loading, Status, Time, useAsync } from "../ui.js";

const PAGE = 50;
/**
 * The unresolved listing reads every row (a recorded row that fails its checks is listed as
 * unresolved) and answers an empty page with a cursor after a bounded number of rows: the console
 * follows the cursor until a row comes, saying how far it got, and stops when the page changes.
 */
const STATUSES = ["in_progress", "unresolved", "recorded", "reconciled"] as const;
type ListStatus = (typeof STATUSES)[number];

async function page(status: ListStatus | undefined, cursor: string | undefined, current: () => boolean, progress: (reads: number) => void): Promise<InvocationList> {
  let next = cursor;
  for (let reads = 1; ; reads++) {
    const list = await client.listInvocations({ limit: PAGE, ...(status === undefined ? {} : { status }), ...(next === undefined ? {} : { cursor: next }) });
    if (list.items.length > 0 || list.cursor === undefined || !current()) return list;
    progress(reads);
    next = list.cursor;
  }
}

export function Invocations(props: { route: Route; scope: string }) {
  const raw = props.route.query.get("status") ?? undefined;
  const status = (STATUSES as readonly string[]).includes(raw ?? "") ? (raw as ListStatus) : undefined;
  const cursor = props.route.query.get("cursor") ?? undefined;
  const [reads, setReads] = useState(0);
  const list = useAsync(
    (current) => {
      setReads(0);
      return page(status, cursor, current, (n) => current() && setReads(n));
    },
    [status, cursor],
  );
  const counts = useAsync(() => client.node().then((n) => n.counts), [], 5000);
  const unresolved = counts.data?.unresolved;

  return (
    <section aria-labelledby="inv-title">
      <h1 id="inv-title">Invocations</h1>
      <nav class="tabs" aria-label="Invocation lists">
        <Link href={href.invocations()} aria-current={status === undefined ? "page" : undefined}>
          All
        </Link>
        <Link href={href.invocations({ status: "unresolved" })} aria-current={status === "unresolved" ? "page" : undefined}>
          Unresolved{" "}
          {unresolved !== undefined && (
            <span class={`badge${unresolved > 0 ? " badge-alert" : ""}`} data-testid="unresolved-badge" aria-label={`${unresolved} unresolved`}>
              {unresolved.toLocaleString()}
            </span>
          )}
        </Link>
      </nav>
      <div class="toolbar">
        <label>
          Status{" "}
          <select
            value={status ?? ""}
            onChange={(e) => navigate(href.invocations({ status: (e.target as HTMLSelectElement).value }))}
          >
            <option value="">any</option>
            {STATUSES.map((s) => (
              <option value={s}>{s.replace("_", " ")}</option>
            ))}
          </select>
        </label>
        <JumpTo scope={props.scope} />
      </div>
      {list.error !== undefined && <ErrorBox error={list.error} />}
      {list.loading && reads > 0 && (
        <p class="loading" role="status">
          Still looking: {reads} reads of the store found no {status?.replace("_", " ") ?? ""} invocation yet (the node checks every row, so a big store takes a while)…
        </p>
      )}
      {list.data === undefined || (list.loading && reads > 0) ? (
        list.error === undefined && reads === 0 && <Loading what="invocations" />
      ) : list.data.items.length === 0 ? (
        <Empty>
          {status === "unresolved"
            ? "Nothing to review: no invocation is unresolved."
            : cursor !== undefined
              ? "No more invocations."
              : "No invocations yet. Start one with `warden invoke --id <uuid> --provider claude -- <prompt>` or POST /v1/invocations."}
        </Empty>
      ) : (
        <table class="invocations" aria-busy={list.loading}>
          <caption class="sr-only">Invocations{status === undefined ? "" : ` with status ${status}`}</caption>
          <thead>
            <tr>
              <th scope="col">Invocation</th>
              <th scope="col">Status</th>
              <th scope="col" class="wide">Agent</th>
              <th scope="col">Created</th>
            </tr>
          </thead>
          <tbody>
            {list.data.items.map((item) => (
              <tr>
                <td class="id">
                  <Link href={href.invocation(item.scope, item.id)}>
                    <span class="scope">{item.scope}</span> {item.id}
                  </Link>
                </td>
                <td>
                  <Status status={item.status} />
                  {item.problem !== undefined && <code class="code">{item.problem}</code>}
                </td>
                <td class="wide">{item.agent ?? "—"}</td>
                <td>
                  <Time iso={item.created_at} />
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      <nav class="pager" aria-label="Pages">
        {cursor !== undefined && <Link href={href.invocations({ status })}>First page</Link>}
        {list.data?.cursor !== undefined && (
          <Link href={href.invocations({ status, cursor: list.data.cursor })} class="next">
            Next page
          </Link>
        )}
      </nav>
    </section>
  );
}

function JumpTo(props: { scope: string }) {
  const [scope, setScope] = useState(props.scope);
  // The caller's own scope, once the session is known.
  useEffect(() => setScope(props.scope), [props.scope]);
  const [id, setId] = useState("");
  return (
    <form
      class="jump"
      onSubmit={(e) => {
        e.preventDefault();
        if (id.trim() !== "") navigate(href.invocation(scope.trim(), id.trim().toLowerCase()));
      }}
    >
      <label>
        Scope <input value={scope} onInput={(e) => setScope((e.target as HTMLInputElement).value)} size={14} />
      </label>
      <label>
        Id <input value={id} onInput={(e) => setId((e.target as HTMLInputElement).value)} placeholder="uuid" size={36} />
      </label>
      <button type="submit">Open</button>
    </form>
  );
}
