/** What the console's overview shows of this node: identity, backend, readiness, work in flight. */
import { NodeSummary, type Fleet, type QueueSummary, type RunFailure } from "../../api/console.js";
import type { NodeQueueView } from "../../warden/facade.js";
import type { FleetView } from "../../warden/fleet.js";
import { ProblemResponse } from "../../api/problem.js";
import { spendDay } from "../../runner/spend.js";
import type { App, RouteContext } from "../context.js";

/** Times on the wire are RFC 3339. */
function fleetView(view: FleetView): Fleet {
  return { shared: view.shared, nodes: view.nodes.map((node) => ({ ...node, started_at: new Date(node.started_at).toISOString() })) };
}

const iso = (ms: number | undefined): { oldest_queued_at?: string } => (ms === undefined ? {} : { oldest_queued_at: new Date(ms).toISOString() });

/** The queue as GET /v1/node carries it: the store's counts, this node's slots and the waits it saw. */
function queueSummary(view: NodeQueueView, waits: { readonly count: number; readonly sum: number; readonly max: number }): QueueSummary {
  return {
    slots: view.slots,
    depth: view.depth,
    running: view.running,
    ...iso(view.oldest_enqueued_at),
    principals: view.principals.map((p) => ({ principal: p.principal, queued: p.queued, running: p.running, ...iso(p.oldest_enqueued_at) })),
    nodes: view.owners.map((o) => ({ node_id: o.owner, running: o.running })),
    waits: { count: waits.count, sum_s: waits.sum, max_s: waits.max },
  };
}

export function nodeRoutes(ctx: RouteContext, version: string) {
  const { warden } = ctx;
  /**
   * A failure as its invocation reads now: an unresolved run an operator has since reconciled
   * says so. (A status that is an error code, a run that could not end at all, stays.)
   */
  const current = async (failure: RunFailure): Promise<RunFailure> => {
    if (failure.status !== "unresolved") return failure;
    const outcome = await warden.lookup(failure.scope, failure.id).catch(() => undefined);
    return outcome === undefined || outcome.status === failure.status ? failure : { ...failure, status: outcome.status };
  };
  return async function nodePlugin(app: App): Promise<void> {
    app.get("/v1/node", { schema: { operationId: "node", summary: "This node at a glance: keys, backend, readiness, invocations by status, runs and uploads now", response: { 200: NodeSummary, "4xx": ProblemResponse } } }, async () => ({
      version,
      backend: warden.backendKind,
      ready: !warden.closing && warden.storageReady,
      fleet: fleetView(await warden.fleetView()),
      keys: await warden.publicKeys(),
      counts: await warden.invocationCounts(),
      active_runs: warden.activeRuns,
      uploads: await warden.uploads(),
      recent_failures: await Promise.all(ctx.recentFailures.map(current)),
      spend_today: { day: spendDay(Date.now()), counters: (await warden.spendToday()).map((c) => ({ kind: c.kind, subject: c.subject, ...c.spend })) },
      queue: queueSummary(await warden.queueView(), ctx.metrics.queueWait.totals()),
    }));
  };
}
