/**
 * Invocations over HTTP with IETF Idempotency-Key semantics. The scope is always
 * `api:<caller name>` from the token, never from the request. A known key is answered by a read
 * (the replay path: no claim attempt, no fsync, no journal verification); only an unknown key
 * claims and starts a run. Every reply carries `Cache-Control: no-store` (set by the app's
 * request hook, so that 401/403 replies carry it too).
 */
import {
  IDEMPOTENCY_REPLAYED_HEADER,
  Inspection,
  InvocationList,
  InvocationListQuery,
  InvocationParams,
  InvocationView,
  InvokeBody,
  InvokeHeaders,
  QUEUE_LIST_STATUSES,
  ReconcileReply,
  Review,
  type InvocationView as InvocationViewType,
} from "../../api/invocations.js";
import { ProblemResponse } from "../../api/problem.js";
import { ConflictError, NotFoundError, isWardenError } from "../../core/errors.js";
import type { RunFailure } from "../../api/console.js";
import type { ExistingOutcome } from "../../invocations/index.js";
import type { KnownOutcome, QueuedInvocation } from "../../warden/facade.js";
import { callerOf, type App, type RouteContext } from "../context.js";
import { preferredWaitMs, prefersAsync, settleWithin } from "../prefer-wait.js";
import { validatorCompiler } from "../validation.js";

export function invocationRoutes(ctx: RouteContext) {
  const { warden, metrics, settings } = ctx;
  // One series per outcome label (a handful), kept so a replay does not re-key its counter.
  const outcomeSeries = new Map<string, { value: number }>();
  const countInvocation = (outcome: string): void => {
    let series = outcomeSeries.get(outcome);
    if (series === undefined) {
      series = metrics.invocations.series({ outcome });
      outcomeSeries.set(outcome, series);
    }
    series.value += 1;
  };

  return async function invocationsPlugin(app: App): Promise<void> {
    app.post(
      "/v1/invocations",
      {
        config: { bodyCodes: "invoke-request" },
        schema: {
          operationId: "invoke", summary: "Run an agent exactly once under an Idempotency-Key",
          headers: InvokeHeaders,
          body: InvokeBody,
          response: { 200: InvocationView, 202: InvocationView, "4xx": ProblemResponse },
        },
      },
      async (request, reply) => {
        const id = keyOf(request.headers["idempotency-key"]);
        const scope = scopeOf(callerOf(request).name);
        if (prefersAsync(request.headers.prefer)) {
          const submitted = await warden.submit(scope, id, request.body);
          if ("created" in submitted) {
            countInvocation(submitted.created ? "queued" : `queued_${submitted.status}`);
            if (submitted.status !== "queued") return reply.code(200).send(queuedViewOf(submitted));
            reply.header("location", `/v1/invocations/${encodeURIComponent(scope)}/${id}`);
            return reply.code(202).send({ scope, id, status: "queued" as const, queued_at: submitted.queued_at });
          }
          countInvocation(outcomeLabel(submitted));
          if (submitted.status === "recorded") reply.header(IDEMPOTENCY_REPLAYED_HEADER, "true");
          return reply.code(200).send(answerOf(scope, id, submitted));
        }
        const { traceparent, tracestate } = request.headers;
        // The caller's trace, if any: never part of the request, so a retry under another trace is the same invocation.
        const trace = traceparent === undefined ? {} : { trace: { traceparent, ...(tracestate === undefined ? {} : { tracestate }) } };
        const started = await warden.start(scope, id, request.body, trace);
        if (started.status !== "started") {
          countInvocation(outcomeLabel(started));
          if (started.status === "recorded") reply.header(IDEMPOTENCY_REPLAYED_HEADER, "true");
          return reply.code(200).send(answerOf(scope, id, started));
        }
        countInvocation("started");
        // The caller may be long gone when a run ends: a run that ends without a recorded result
        // must say why in the node's log, or the operator sees only `unresolved` and a counter.
        started.done.then(
          (outcome) => {
            metrics.runs.inc({ outcome: outcome.status });
            if (outcome.status !== "recorded") {
              app.log.warn({ scope, id, run_id: started.run_id, status: outcome.status }, "run ended without a recorded result");
              noteFailure(ctx, { scope, id, run_id: started.run_id, status: outcome.status, at: new Date().toISOString() });
            }
          },
          (error: unknown) => {
            metrics.runs.inc({ outcome: "error" });
            app.log.error({ scope, id, run_id: started.run_id, err: error }, "run could not record its result; it reads unresolved");
            noteFailure(ctx, { scope, id, run_id: started.run_id, status: isWardenError(error) ? error.code : "error", at: new Date().toISOString() });
          },
        );
        const waitMs = preferredWaitMs(request.headers.prefer, settings.maxWaitS);
        const location = `/v1/invocations/${encodeURIComponent(scope)}/${id}`;
        reply.header("location", location);
        if (waitMs > 0) {
          const finished = await settleWithin(started.done, waitMs, ctx.closers);
          if (finished !== undefined) {
            // The run ended within the wait: answer exactly what a retry would get, minus the replay mark.
            const outcome = finished.ok ? finished.value : await warden.lookup(scope, id);
            if (outcome !== undefined) return reply.code(200).send(answerOf(scope, id, outcome));
          }
        }
        return reply.code(202).send({ scope, id, run_id: started.run_id, status: "running" as const });
      },
    );

    app.get(
      "/v1/invocations",
      { schema: { operationId: "listInvocations", summary: "Page through invocations", querystring: InvocationListQuery, response: { 200: InvocationList, "4xx": ProblemResponse } } },
      async (request) => {
        const { status, ...page } = request.query;
        if (status !== undefined && (QUEUE_LIST_STATUSES as readonly string[]).includes(status)) {
          const listed = await warden.listQueued(status as (typeof QUEUE_LIST_STATUSES)[number], page);
          return { items: listed.items.map(queuedViewOf), ...(listed.cursor === undefined ? {} : { cursor: listed.cursor }) };
        }
        return warden.listInvocations({ ...page, ...(status === undefined ? {} : { status: status as Exclude<typeof status, (typeof QUEUE_LIST_STATUSES)[number]> }) });
      },
    );

    app.get(
      "/v1/invocations/:scope/:id",
      { schema: { operationId: "getInvocation", summary: "An invocation's state (never creates a claim)", params: InvocationParams, response: { 200: InvocationView, "4xx": ProblemResponse } } },
      async (request) => {
        const { scope, id } = request.params;
        const outcome = await warden.lookup(scope, id);
        if (outcome !== undefined) return viewOf(scope, id.toLowerCase(), outcome);
        // Submitted and not started: the queue's row answers (its claim does once it starts).
        const queued = await warden.lookupQueued(scope, id);
        if (queued !== undefined) return queuedViewOf(queued);
        // Started between the two reads: its claim answers now.
        const started = await warden.lookup(scope, id);
        if (started === undefined) throw new NotFoundError("invocation-not-found", `no invocation ${scope}/${id}`, { details: { scope, id } });
        return viewOf(scope, id.toLowerCase(), started);
      },
    );

    app.post(
      "/v1/invocations/:scope/:id/cancellation",
      {
        schema: {
          operationId: "cancelInvocation", summary: "Cancel a queued invocation, or stop a running one",
          params: InvocationParams,
          response: { 200: InvocationView, "4xx": ProblemResponse },
        },
      },
      async (request) => {
        const { scope, id } = request.params;
        const caller = callerOf(request).name;
        const outcome = await warden.cancel(scope, id, `api:${caller}`);
        app.log.info({ scope, id, by: caller, status: outcome.status }, "invocation cancelled");
        return "queued_at" in outcome ? queuedViewOf(outcome) : viewOf(scope, id.toLowerCase(), outcome);
      },
    );

    app.get(
      "/v1/invocations/:scope/:id/inspection",
      { schema: { operationId: "inspectInvocation", summary: "Snapshot and journal report an operator reviews", params: InvocationParams, response: { 200: Inspection, "4xx": ProblemResponse } } },
      async (request) => warden.inspect(request.params.scope, request.params.id),
    );

    app.post(
      "/v1/invocations/:scope/:id/reconciliation",
      {
        config: { bodyCodes: "review" },
        // The schema documents the body; the review's own parser checks it, so that one answer
        // lists every problem of a review (a schema check would stop at its first finding).
        validatorCompiler: (route) => (route.httpPart === "body" ? () => true : validatorCompiler(route)),
        schema: {
          operationId: "reconcileInvocation", summary: "Close an unresolved invocation with a signed review",
          params: InvocationParams,
          body: Review,
          response: { 200: ReconcileReply, 201: ReconcileReply, "4xx": ProblemResponse },
        },
      },
      async (request, reply) => {
        const result = await warden.reconcile(request.params.scope, request.params.id, request.body, callerOf(request).name);
        return reply.code(result.replayed ? 200 : 201).send({ receipt: result.receipt });
      },
    );
  };
}

/** How many ended-badly runs the overview shows. */
const RECENT_FAILURES = 20;

function noteFailure(ctx: RouteContext, failure: RunFailure): void {
  ctx.recentFailures.unshift(failure);
  ctx.recentFailures.length = Math.min(ctx.recentFailures.length, RECENT_FAILURES);
}

export function scopeOf(callerName: string): string {
  return `api:${callerName}`;
}

/** The Idempotency-Key as an invocation id: a UUID, sf-string quotes removed, lowercase. */
function keyOf(header: string): string {
  return (header.startsWith('"') ? header.slice(1, -1) : header).toLowerCase();
}

/** POST's answer for a key that is not this caller's fresh run: a result, or a 409 problem. */
function answerOf(scope: string, id: string, outcome: KnownOutcome): InvocationViewType {
  const runId = outcome.status === "in_progress" ? outcome.run_id : outcome.audit.run_id;
  const details = { scope, id, ...(runId === undefined ? {} : { run_id: runId }) };
  switch (outcome.status) {
    case "recorded":
      return viewOf(scope, id, outcome);
    case "in_progress":
      throw new ConflictError("in-progress", `invocation ${scope}/${id} is running; ask again later`, { details });
    case "unresolved":
      // The message is all a caller of `warden invoke` sees: it names the run and where to start.
      throw new ConflictError("unresolved", `invocation ${scope}/${id} (run ${runId ?? "unknown"}) is unresolved: it is never run again; an operator reviews it (\`warden inspect ${scope} ${id}\`) and closes it (\`warden reconcile\`)`, {
        // The same list GET /v1/invocations/{scope}/{id} answers for this id.
        details: { ...details, reasons: outcome.audit.reasons ?? [] },
      });
    case "reconciled":
      throw new ConflictError("reconciled", `invocation ${scope}/${id} was closed by an operator's reconciliation`, { details });
  }
}

function viewOf(scope: string, id: string, outcome: KnownOutcome): InvocationViewType {
  if (outcome.status === "in_progress") return { scope, id, status: "in_progress", ...(outcome.run_id === undefined ? {} : { run_id: outcome.run_id }) };
  const audit = outcome.audit;
  if (outcome.status === "recorded") {
    // Every replay answers this one: built field by field (same fields, same order as below).
    const view: InvocationViewType = { scope, id, status: "recorded", run_id: audit.run_id, agent: audit.agent };
    if (audit.journal !== undefined) view.journal = audit.journal;
    if (outcome.result !== undefined) view.result = outcome.result;
    view.result_hash = outcome.result_hash;
    view.expired = outcome.expired;
    return view;
  }
  const base = {
    scope,
    id,
    status: outcome.status,
    run_id: audit.run_id,
    agent: audit.agent,
    ...(audit.journal === undefined ? {} : { journal: audit.journal }),
  };
  switch (outcome.status) {
    case "unresolved":
      return { ...base, reasons: audit.reasons ?? [], ...(audit.findings === undefined ? {} : { findings: audit.findings }) };
    case "reconciled":
      return { ...base, receipt: outcome.receipt };
  }
}

function queuedViewOf(q: QueuedInvocation): InvocationViewType & { status: QueuedInvocation["status"] } {
  return {
    scope: q.scope,
    id: q.id,
    status: q.status,
    queued_at: q.queued_at,
    priority: q.priority,
    deadline_at: q.deadline_at,
    principal: q.principal,
    workspace: q.workspace,
    provider: q.provider,
    ...(q.cancelled_by === undefined ? {} : { cancelled_by: q.cancelled_by }),
    ...(q.error === undefined ? {} : { error: q.error }),
  };
}

function outcomeLabel(outcome: ExistingOutcome): string {
  return outcome.status === "recorded" ? "replayed" : outcome.status;
}
