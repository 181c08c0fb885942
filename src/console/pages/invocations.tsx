/**
 * Invocations, paged by the API's cursor (a page at a time, whatever the store holds), filtered
 * by status, with an Unresolved tab — the operator's work queue —, beside it the runs awaiting an
 * operator's approval, and a jump to one id.
 */
import { useEffect, useLayoutEffect, useState } from "preact/hooks";
import { client } from "../api.js";
import type { InvocationList } from "../../client/wire.js";
import { INVOCATION_LIST_STATUSES as STATUSES, invocationListStatus, invocationsPageQuery, type InvocationListStatus as ListStatus } from "../../api/console-pages.js";
import { href, Link, navigate, type Route } from "../router.js";
import { Empty, ErrorBox, Loading, Status, Time, useAsync } from "../ui.js";

/**
 * A filtered listing (recorded, say, in a store of mostly reconciled rows) may answer an empty
 * page with a cursor after a bounded number of rows: the console follows the cursor until a row
 * comes, saying how far it got, and stops when the page changes. (The unresolved listing, the
 * work queue, is read from indexes and answers at once.)
 */

async function page(status: ListStatus | undefined, cursor: string | undefined, current: () => boolean, progress: (reads: number) => void): Promise<InvocationList> {
  let next = cursor;
  for (let reads = 1; ; reads++) {
    const list = await client.listInvocations(invocationsPageQuery(status, next));
    if (list.items.length > 0 || list.cursor === undefined || !current()) return list;
    progress(reads);
    next = list.cursor;
  }
}

const ROWS_MARK = "warden:invocations-rows";

export function Invocations(props: { route: Route; scope: string }) {
  const status = invocationListStatus(props.route.query.get("status"));
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
  const rows = list.data?.items.length ?? 0;
  // When rows first show, for a benchmark to read (bench/console.bench.ts): navigation start to rows in the document.
  useLayoutEffect(() => {
    if (rows > 0 && performance.getEntriesByName(ROWS_MARK).length === 0) performance.mark(ROWS_MARK);
  }, [rows]);
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
        <Link href={href.invocations({ status: "awaiting_approval" })} aria-current={status === "awaiting_approval" ? "page" : undefined}>
          Awaiting approval
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
          Still looking: {reads} reads of the store found no {status?.replace("_", " ") ?? ""} invocation yet (a big store takes a while)…
        </p>
      )}
      {list.data === undefined || (list.loading && reads > 0) ? (
        list.error === undefined && reads === 0 && <Loading what="invocations" />
      ) : list.data.items.length === 0 ? (
        <Empty>
          {status === "unresolved"
            ? "Nothing to review: no invocation is unresolved."
            : status === "awaiting_approval"
              ? "Nothing to approve: no run waits for an operator."
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
