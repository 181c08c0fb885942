/** Liveness (public), readiness and Prometheus metrics. */
import { Type } from "typebox";
import { Health, Readiness } from "../../api/runs.js";
import { ProblemResponse } from "../../api/problem.js";
import { StorageError, WardenError } from "../../core/errors.js";
import type { App, RouteContext } from "../context.js";

export function healthRoutes(ctx: RouteContext) {
  return async function health(app: App): Promise<void> {
    app.get("/healthz", { config: { public: true }, schema: { operationId: "getHealth", summary: "Liveness: the process answers (no token)", security: [], response: { 200: Health } } }, async () => ({ status: "ok" as const }));

    app.get("/readyz", { schema: { operationId: "getReadiness", summary: "Readiness: the node can take work (its storage is reachable, it is not shutting down)", response: { 200: Readiness, "4xx": ProblemResponse, 503: ProblemResponse } } }, async () => {
      if (ctx.warden.closing) throw new WardenError("not-ready", "the node is shutting down", 503);
      // A load balancer asks here: a node whose database is unreachable can serve nothing but errors.
      if (!ctx.warden.storageReady) throw new StorageError("storage-unavailable", "the database is unreachable; the node reconnects by itself");
      // The log's and witnesses' state is reported, never judged: a witness down must not take the node out of rotation.
      const log = ctx.warden.log?.snapshot();
      return { status: "ready" as const, ...(log === undefined ? {} : { log }) };
    });

    app.get("/metrics", { schema: { operationId: "getMetrics", summary: "Prometheus metrics (text exposition format 0.0.4)", produces: ["text/plain"], response: { 200: Type.String({ description: "Prometheus text" }), "4xx": ProblemResponse } } }, async (_request, reply) => {
      reply.type("text/plain; version=0.0.4; charset=utf-8");
      await ctx.metrics.registry.refresh();
      return ctx.metrics.registry.render();
    });
  };
}
