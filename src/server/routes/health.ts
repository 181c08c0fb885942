/** Liveness (public), readiness and Prometheus metrics. */
import { Health, Readiness } from "../../api/runs.js";
import { ProblemResponse } from "../../api/problem.js";
import { StorageError, WardenError } from "../../core/errors.js";
import type { App, RouteContext } from "../context.js";

export function healthRoutes(ctx: RouteContext) {
  return async function health(app: App): Promise<void> {
    app.get("/healthz", { config: { public: true }, schema: { security: [], response: { 200: Health } } }, async () => ({ status: "ok" as const }));

    app.get("/readyz", { schema: { response: { 200: Readiness, 503: ProblemResponse } } }, async () => {
      if (ctx.warden.closing) throw new WardenError("not-ready", "the node is shutting down", 503);
      // A load balancer asks here: a node whose database is unreachable can serve nothing but errors.
      if (!ctx.warden.storageReady) throw new StorageError("storage-unavailable", "the database is unreachable; the node reconnects by itself");
      return { status: "ready" as const };
    });

    app.get("/metrics", { schema: { produces: ["text/plain"] } }, async (_request, reply) => {
      reply.type("text/plain; version=0.0.4; charset=utf-8");
      return ctx.metrics.registry.render();
    });
  };
}
