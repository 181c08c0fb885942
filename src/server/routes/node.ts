/** What the console's overview shows of this node: identity, backend, readiness, work in flight. */
import { NodeSummary } from "../../api/console.js";
import { ProblemResponse } from "../../api/problem.js";
import type { App, RouteContext } from "../context.js";

export function nodeRoutes(ctx: RouteContext, version: string) {
  const { warden } = ctx;
  return async function nodePlugin(app: App): Promise<void> {
    app.get("/v1/node", { schema: { operationId: "node", summary: "This node at a glance: keys, backend, readiness, invocations by status, runs and uploads now", response: { 200: NodeSummary, "4xx": ProblemResponse } } }, async () => ({
      version,
      backend: warden.backendKind,
      ready: !warden.closing && warden.storageReady,
      keys: await warden.publicKeys(),
      counts: await warden.invocations.counts(),
      active_runs: warden.activeRuns,
      uploads: await warden.delivery.uploads(),
      recent_failures: ctx.recentFailures,
    }));
  };
}
