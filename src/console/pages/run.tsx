/**
 * One invocation and its run: the request as the journal records it, the outcome and result, the
 * journal as a timeline that grows live while the run runs (server-sent events; the browser's
 * EventSource resumes after a dropped connection with Last-Event-ID), and the journal verified
 * here, in the browser, against the node's published keys.
 */
import { useEffect, useState } from "preact/hooks";
import { client, describeError } from "../api.js";
import type { InvocationView } from "../../client/wire.js";
import { href, Link } from "../router.js";
import { verifyJournal, type JournalCheck } from "../verify.js";
import { ErrorBox, Loading, Status, Time, useAsync } from "../ui.js";
import { ReceiptView } from "../receipt.js";
import { Changes, type RunChangesView } from "../changes.js";
import { explainTermination, explainUnresolved } from "../../invocations/explain.js";
import { visibleText } from "../../core/visible-text.js";

interface JournalEntry {
  readonly seq: number;
  readonly ts: string;
  readonly key_id: string;
  readonly event: { readonly type: string; readonly [field: string]: unknown };
}

function parseLine(data: string): JournalEntry | undefined {
  try {
    return (JSON.parse(data) as { entry: JournalEntry }).entry;
  } catch {
    return undefined;
  }
}

/** The run's entries, live: every entry so far, then each one as it is appended, until the run ends. */
function useTimeline(runId: string | undefined, onEnd: () => void): { entries: JournalEntry[]; live: boolean; reconnects: number } {
  const [entries, setEntries] = useState<JournalEntry[]>([]);
  const [live, setLive] = useState(false);
  const [reconnects, setReconnects] = useState(0);
  useEffect(() => {
    setEntries([]);
    if (runId === undefined) return undefined;
    const source = new EventSource(`/v1/runs/${encodeURIComponent(runId)}/events`);
    let opened = 0;
    source.onopen = () => {
      opened++;
      if (opened > 1) setReconnects(opened - 1);
      setLive(true);
    };
    source.onmessage = (message: MessageEvent<string>) => {
      const entry = parseLine(message.data);
      if (entry !== undefined) setEntries((list) => [...list, entry]);
    };
    source.addEventListener("end", () => {
      source.close();
      setLive(false);
      onEnd();
    });
    source.onerror = () => {
      // EventSource reconnects by itself (sending Last-Event-ID) unless the node refused the stream.
      if (source.readyState === EventSource.CLOSED) setLive(false);
    };
    return () => source.close();
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [runId]);
  return { entries, live, reconnects };
}

function describe(entry: JournalEntry, started: ReadonlyMap<string, JournalEntry>): string {
  const e = entry.event;
  switch (e.type) {
    case "run.started": {
      const provider = typeof e.provider === "string" ? e.provider : "?";
      return `agent ${String(e.agent)}, provider ${provider}`;
    }
    case "effect.started":
      return `${String(e.kind)} ${String(e.name)} (${String(e.effect_id)})`;
    case "effect.finished": {
      const start = started.get(String(e.effect_id));
      const ms = start === undefined ? undefined : Date.parse(entry.ts) - Date.parse(start.ts);
      const name = start === undefined ? String(e.effect_id) : `${String(start.event.kind)} ${String(start.event.name)}`;
      return `${name}: ${String(e.outcome)}${ms === undefined ? "" : ` after ${ms} ms`}`;
    }
    case "run.terminated":
      return `${String(e.reason)}${typeof e.result_hash === "string" ? `, result ${e.result_hash.slice(7, 19)}` : ""}`;
    default: {
      const { type: _type, ...rest } = e;
      return cut(fields(rest));
    }
  }
}

/** How much of a note the timeline shows on its line (the whole entry is in the raw journal). */
const DETAIL_CHARS = 240;

function cut(text: string): string {
  return text.length > DETAIL_CHARS ? `${text.slice(0, DETAIL_CHARS)}…` : text;
}

/**
 * A note's fields as words: `process: pid 4242, host ci-3, permission workspace`. Keys lose their
 * underscores, nested objects become `key value` pairs, lists are joined with commas.
 */
function fields(value: unknown, nested = false): string {
  if (value === null || value === undefined) return "—";
  if (typeof value !== "object") return String(value);
  if (Array.isArray(value)) return value.length === 0 ? "none" : value.map((v) => fields(v, true)).join(", ");
  const entries = Object.entries(value as Record<string, unknown>);
  if (entries.length === 0) return "—";
  const words = (k: string) => k.replace(/_/g, " ");
  if (nested) return `(${entries.map(([k, v]) => `${words(k)} ${fields(v, true)}`).join(", ")})`;
  return entries.map(([k, v]) => (typeof v === "object" && v !== null && !Array.isArray(v) ? `${words(k)}: ${fieldsOf(v as Record<string, unknown>)}` : `${words(k)}: ${fields(v, true)}`)).join("; ");
}

function fieldsOf(object: Record<string, unknown>): string {
  return Object.entries(object).map(([k, v]) => `${k.replace(/_/g, " ")} ${fields(v, true)}`).join(", ");
}

function Timeline(props: { entries: readonly JournalEntry[]; live: boolean; reconnects: number }) {
  const started = new Map<string, JournalEntry>();
  for (const entry of props.entries) if (entry.event.type === "effect.started") started.set(String(entry.event.effect_id), entry);
  return (
    <section aria-labelledby="timeline-title">
      <h2 id="timeline-title">
        Timeline{" "}
        {props.live && (
          <span class="live" role="status">
            live
          </span>
        )}
      </h2>
      {props.reconnects > 0 && <p class="muted">Reconnected {props.reconnects}× (resumed after the last entry received).</p>}
      <ol class="timeline" aria-live="polite" data-testid="timeline">
        {props.entries.map((entry) => (
          <li data-seq={entry.seq} class={`ev ev-${entry.event.type.replace(".", "-")}${entry.event.type === "effect.finished" ? ` outcome-${String(entry.event.outcome)}` : ""}`}>
            <span class="seq">#{entry.seq}</span>
            <span class="ev-type">{entry.event.type}</span>
            <span class="ev-detail">{visibleText(describe(entry, started))}</span>
            <Time iso={entry.ts} />
          </li>
        ))}
      </ol>
    </section>
  );
}

function VerificationBadge(props: { runId: string; check: JournalCheck | undefined; error: unknown }) {
  const download = `/v1/runs/${encodeURIComponent(props.runId)}/journal`;
  return (
    <div class="verification">
      {props.error !== undefined ? (
        <ErrorBox error={props.error} title="The browser could not check the journal" />
      ) : props.check === undefined ? (
        <span class="badge" role="status">
          checking…
        </span>
      ) : props.check.ok ? (
        <span class="badge badge-ok" role="status" data-testid="verify-badge">
          ✓ verified in this browser: {props.check.entries} entries{props.check.incompleteTail ? " (last line incomplete)" : ""}, keys {props.check.keyIds.join(", ")}
        </span>
      ) : (
        <span class="badge badge-bad" role="status" data-testid="verify-badge">
          ✗ failed at line {props.check.failure?.line}: {props.check.failure?.reason}
        </span>
      )}{" "}
      <a href={download} download={`${props.runId}.jsonl`}>
        Download the raw journal
      </a>
    </div>
  );
}

export function Run(props: { scope: string; id: string; operator: boolean }) {
  const invocation = useAsync(() => client.getInvocation(props.scope, props.id), [props.scope, props.id]);
  const runId = invocation.data?.run_id;
  const [ended, setEnded] = useState(0);
  const timeline = useTimeline(runId, () => {
    setEnded((n) => n + 1);
    invocation.reload();
  });
  // The journal ends (run.terminated) a moment before the node has recorded the run's outcome
  // (seal, result, log leaf): until the invocation stops reading in_progress, ask again.
  const settling = ended > 0 && invocation.data?.status === "in_progress";
  useEffect(() => {
    if (!settling) return undefined;
    const timer = setTimeout(() => invocation.reload(), 300);
    return () => clearTimeout(timer);
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [settling, invocation.data]);
  const [check, setCheck] = useState<{ result?: JournalCheck; error?: unknown }>({});
  useEffect(() => {
    if (runId === undefined) return;
    let current = true;
    setCheck({});
    Promise.all([client.journal(runId), client.keys()])
      .then(([bytes, keys]) => verifyJournal(bytes, keys))
      .then(
        (result) => current && setCheck({ result }),
        (error: unknown) => current && setCheck({ error }),
      );
    return () => void (current = false);
  }, [runId, ended]);

  if (invocation.data === undefined) return invocation.error !== undefined ? <ErrorBox error={invocation.error} /> : <Loading what="the invocation" />;
  const view = invocation.data;
  const first = timeline.entries[0]?.event;
  return (
    <section aria-labelledby="run-title">
      <h1 id="run-title">
        Invocation <span class="mono">{view.id}</span>
      </h1>
      <p>
        <Status status={view.status} /> in scope <code>{view.scope}</code>
        {view.status === "unresolved" && props.operator && (
          <>
            {" "}
            <Link href={href.reconcile(view.scope, view.id)} class="button">
              Review and reconcile
            </Link>
          </>
        )}
      </p>
      {invocation.error !== undefined && <ErrorBox error={invocation.error} />}
      {view.status === "awaiting_approval" && view.parked !== undefined && <Approval view={view} operator={props.operator} onAnswered={() => invocation.reload()} />}
      <div class="cards">
        <div class="card">
          <h2>Request</h2>
          <dl>
            <dt>Provider</dt>
            <dd>{typeof first?.provider === "string" ? first.provider : "—"}</dd>
            <dt>Bundle</dt>
            <dd>{bundleOf(first)}</dd>
            <dt>Isolation</dt>
            <dd>
              <Isolation event={first} />
            </dd>
            <dt>Agent</dt>
            <dd>{view.agent ?? "—"}</dd>
            <dt>Request hash</dt>
            <dd class="mono small">{requestHashOf(first)}</dd>
            <dt>Workspace, prompt</dt>
            <dd class="muted">kept only as the request hash (the node stores no prompt)</dd>
          </dl>
        </div>
        <Outcome view={view} termination={terminationOf(timeline.entries, timeline.live)} />
        <Spend entries={timeline.entries} />
      </div>
      {runId === undefined ? (
        <p class="muted">No run is attached to this invocation yet.</p>
      ) : (
        <>
          <p>
            Run <code>{runId}</code>
          </p>
          <VerificationBadge runId={runId} check={check.result} error={check.error} />
          <Changes runId={runId} event={timeline.entries.find((e) => e.event.type === "run.changes")?.event as RunChangesView | undefined} />
          <Timeline entries={timeline.entries} live={timeline.live} reconnects={timeline.reconnects} />
          <AgentOutput runId={runId} live={timeline.live || view.status === "in_progress"} ended={ended} result={view.result} />
        </>
      )}
    </section>
  );
}

/** The run.terminated reason of the entries so far; null while the stream is still delivering them. */
function terminationOf(entries: readonly JournalEntry[], live: boolean): string | undefined | null {
  const end = entries.find((e) => e.event.type === "run.terminated");
  if (end !== undefined) return String(end.event.reason);
  return live || entries.length === 0 ? null : undefined;
}

function bundleOf(event: JournalEntry["event"] | undefined): string {
  const bundle = event?.bundle as { bundle_id?: unknown; revision?: unknown } | undefined;
  return bundle === undefined ? "none" : `${String(bundle.bundle_id)}@${String(bundle.revision)}`;
}

/** The confinement run.started recorded: a warning badge for a run configured unconfined. */
function Isolation(props: { event: JournalEntry["event"] | undefined }) {
  const isolation = props.event?.isolation as { profile?: { kind?: unknown; egress?: { allow?: unknown } }; digest?: unknown } | undefined;
  if (isolation === undefined) return <span class="muted">not recorded</span>;
  if (isolation.profile?.kind === "none") {
    return (
      <span class="badge badge-bad" data-testid="isolation-badge" title={String(isolation.digest)}>
        unconfined
      </span>
    );
  }
  const allow = Array.isArray(isolation.profile?.egress?.allow) ? (isolation.profile.egress.allow as string[]).join(", ") : "";
  return (
    // The recorded kind: `journal verify`'s word for it, not the configuration's ("sandbox").
    <span data-testid="isolation-badge" title={String(isolation.digest)}>
      {typeof isolation.profile?.kind === "string" ? isolation.profile.kind : "sandbox"}; egress to {allow === "" ? "nothing" : allow}
    </span>
  );
}

/** The run's signed `run.spend` (DESIGN.md "Spend"): what it spent, and the limit it reached. */
function Spend(props: { entries: readonly JournalEntry[] }) {
  const spend = props.entries.find((e) => e.event.type === "run.spend")?.event as
    | { tokens?: { input?: unknown; output?: unknown }; cost_usd_micros?: unknown; turns?: unknown; wall_ms?: unknown; prices?: unknown; breached?: unknown }
    | undefined;
  if (spend === undefined) return null;
  const micros = typeof spend.cost_usd_micros === "number" ? spend.cost_usd_micros : 0;
  return (
    <div class="card" data-testid="spend">
      <h2>Spend</h2>
      <dl>
        <dt>Tokens</dt>
        <dd data-testid="spend-tokens">
          {String(spend.tokens?.input)} in, {String(spend.tokens?.output)} out
        </dd>
        <dt>Estimated cost</dt>
        <dd data-testid="spend-cost" title={`price table ${String(spend.prices)}`}>
          ${(micros / 1e6).toFixed(6)}
        </dd>
        <dt>Model turns</dt>
        <dd>{String(spend.turns)}</dd>
        <dt>Wall time</dt>
        <dd>{typeof spend.wall_ms === "number" ? `${(spend.wall_ms / 1000).toFixed(1)} s` : "—"}</dd>
        {typeof spend.breached === "string" && (
          <>
            <dt>Budget</dt>
            <dd data-testid="spend-breached">
              <span class="badge badge-bad">{spend.breached} reached</span>
            </dd>
          </>
        )}
      </dl>
    </div>
  );
}

function requestHashOf(event: JournalEntry["event"] | undefined): string {
  const invocation = event?.invocation as { request_hash?: unknown } | undefined;
  return typeof invocation?.request_hash === "string" ? invocation.request_hash : "—";
}

/** `termination`: the journal's run.terminated reason; undefined: the journal has none; null: not known yet (the timeline is loading). */
function Outcome(props: { view: InvocationView; termination: string | undefined | null }) {
  const { view } = props;
  const result = view.result as { exit_code?: unknown } | undefined;
  return (
    <div class="card">
      <h2>Outcome</h2>
      <dl>
        <dt>Status</dt>
        <dd>
          <Status status={view.status} />
        </dd>
        {view.reasons !== undefined && (
          <>
            <dt>Why</dt>
            <dd data-testid="why">{explainUnresolved(view.reasons) || "—"}</dd>
          </>
        )}
        {(view.status !== "recorded" || props.termination === "stopped") && props.termination !== null && (
          <>
            <dt>Termination</dt>
            <dd data-testid="termination">{explainTermination(props.termination)}</dd>
          </>
        )}
        {result !== undefined && (
          <>
            <dt>Exit code</dt>
            <dd>{String(result.exit_code ?? "—")}</dd>
          </>
        )}
        {view.expired === true && (
          <>
            <dt>Result</dt>
            <dd class="muted">pruned by retention (the identity and its hash are kept)</dd>
          </>
        )}
      </dl>
      {view.receipt !== undefined && (
        <>
          <h3>Reconciliation receipt</h3>
          <ReceiptView receipt={view.receipt} />
        </>
      )}
      {view.result !== undefined && (
        <details>
          <summary>Result (JSON)</summary>
          <pre class="output">{visibleText(JSON.stringify(view.result, null, 2))}</pre>
        </details>
      )}
    </div>
  );
}

/** How much of each stream the page asks for, and how many of its last lines it shows. */
const OUTPUT_TAIL_BYTES = 8192;
const OUTPUT_LINES = 40;
const OUTPUT_POLL_MS = 1000;

type StreamTail = { readonly text: string; readonly size: number } | { readonly error: unknown };

async function streamTail(runId: string, stream: "stdout" | "stderr"): Promise<StreamTail> {
  try {
    const tail = await client.runOutput(runId, stream, { tailBytes: OUTPUT_TAIL_BYTES });
    return { text: tail.text.split("\n").slice(-OUTPUT_LINES - 1).join("\n"), size: tail.size };
  } catch (error) {
    return { error };
  }
}

/**
 * The last lines the agent printed, from the files the node that ran it captures: stderr (its
 * diagnostics) in view; stdout, the event stream the timeline already shows, folded. Polled
 * while the run runs, read once more when it ends. A node that does not hold the files (another
 * node of the fleet ran it, or retention removed them) says so; the result keeps stdout's tail.
 */
function AgentOutput(props: { runId: string; live: boolean; ended: number; result: unknown }) {
  const output = useAsync(
    async () => ({ stderr: await streamTail(props.runId, "stderr"), stdout: await streamTail(props.runId, "stdout") }),
    [props.runId, props.ended],
    props.live ? OUTPUT_POLL_MS : undefined,
  );
  const kept = (props.result as { output_tail?: unknown } | undefined)?.output_tail;
  const pane = (stream: "stdout" | "stderr", tail: StreamTail) => {
    if ("error" in tail) {
      const { message, code } = describeError(tail.error);
      if (stream === "stdout" && typeof kept === "string" && kept !== "") {
        return (
          <>
            <p class="muted">The result keeps the end of stdout ({message}):</p>
            <pre class="output" data-testid={stream}>{visibleText(kept)}</pre>
          </>
        );
      }
      return (
        <p class="muted">
          {message} <code class="code">{code}</code>
        </p>
      );
    }
    if (tail.size === 0) return <p class="muted" data-testid={stream}>Nothing written{props.live ? " yet" : ""}.</p>;
    return (
      <pre class="output" data-testid={stream} tabIndex={0} aria-label={`last lines of ${stream}`}>
        {visibleText(tail.text)}
      </pre>
    );
  };
  return (
    <section aria-labelledby="output-title">
      <h2 id="output-title">Agent output</h2>
      {output.data === undefined ? (
        <Loading what="the agent's output" />
      ) : (
        <>
          <h3 class="stream">stderr</h3>
          {pane("stderr", output.data.stderr)}
          <details>
            <summary>stdout (the event stream the timeline shows)</summary>
            {pane("stdout", output.data.stdout)}
          </details>
        </>
      )}
    </section>
  );
}

/**
 * A run parked on a call its policy decided `ask`: what it waits for, and (for an operator) the
 * form that answers it (POST /v1/invocations/{scope}/{id}/approval).
 */
function Approval(props: { view: InvocationView; operator: boolean; onAnswered: () => void }) {
  const parked = props.view.parked!;
  const [reason, setReason] = useState("");
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(undefined);
  const answer = async (decision: "allow" | "deny"): Promise<void> => {
    setBusy(true);
    setError(undefined);
    try {
      await client.approve(props.view.scope, props.view.id, { decision, ...(reason.trim() === "" ? {} : { reason: reason.trim() }) });
      props.onAnswered();
    } catch (e) {
      setError(e);
    } finally {
      setBusy(false);
    }
  };
  return (
    <div class="card" role="region" aria-labelledby="approval-title">
      <h2 id="approval-title">Awaiting approval</h2>
      <p>
        The run stopped before a <code>{visibleText(parked.tool)}</code> call its policy asks about ({parked.policies.join(", ")}). Nothing runs until an operator answers; at{" "}
        <Time iso={parked.deadline} /> no answer is a denial.
      </p>
      {props.operator ? (
        <form class="approval" onSubmit={(e) => e.preventDefault()}>
          <label>
            Reason (journaled with the answer){" "}
            <input value={reason} onInput={(e) => setReason((e.target as HTMLInputElement).value)} maxLength={4096} size={40} />
          </label>{" "}
          <button type="button" disabled={busy} onClick={() => void answer("allow")}>
            Approve
          </button>{" "}
          <button type="button" disabled={busy} onClick={() => void answer("deny")}>
            Deny
          </button>
        </form>
      ) : (
        <p class="muted">An operator answers it.</p>
      )}
      {error !== undefined && <ErrorBox error={error} />}
    </div>
  );
}
