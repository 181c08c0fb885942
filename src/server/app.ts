/**
 * The HTTP node (DESIGN.md "HTTP API v1"): a fastify app over a Warden. Validation, OpenAPI and
 * the client's types all come from the schemas in src/api. `createServer` returns the app ready
 * to `listen` (or to `inject` in tests); it never closes the Warden, its owner does.
 */
import { randomUUID } from "node:crypto";
import type { IncomingMessage, ServerResponse } from "node:http";
import Fastify, { LogController, type FastifyReply, type FastifyRequest } from "fastify";
import swagger from "@fastify/swagger";
import { NoQuery } from "../api/common.js";
import type { ServerSettings } from "../config/serve-config.js";
import type { Warden } from "../warden/facade.js";
import { TokenAuthority, type Caller } from "./auth.js";
import type { App, RouteContext } from "./context.js";
import { createNodeMetrics } from "./metrics.js";
import { ConnectionGuard } from "./connections.js";
import { AuthError, isWardenError } from "../core/errors.js";
import { answerClientError, httpServerOptions, keepForDrain, repeatedHeader, REQUEST_ARRIVAL_MS } from "./http-framing.js";
import { parseJsonBodiesAsUtf8 } from "./json-body.js";
import { problemOf, sendProblem } from "./problem.js";
import { validatorCompiler } from "./validation.js";
import { replySerializer } from "./reply-check.js";
import { bundleRoutes } from "./routes/bundles.js";
import { healthRoutes } from "./routes/health.js";
import { invocationRoutes } from "./routes/invocations.js";
import { runRoutes } from "./routes/runs.js";
import { logRoutes } from "./routes/log.js";
import { AllowedMethods } from "./allowed-methods.js";
import { stageRoutes } from "./routes/stages.js";
import { nodeRoutes } from "./routes/node.js";
import { SESSION_COOKIE } from "../api/console.js";
import { defaultConsoleDir, loadConsoleAssets, packageVersion } from "./console/assets.js";
import { checkOrigin, consoleRoutes, isConsolePath, securityHeaders } from "./console/routes.js";
import { checkCsrf, ConsoleSessions, cookieValue } from "./console/sessions.js";

/**
 * Replies about invocations and their runs are never cached (DESIGN.md: "All invocation replies
 * carry Cache-Control: no-store"): a run's journal and verification change while it runs.
 */
const NO_STORE_PREFIXES = ["/v1/invocations", "/v1/runs/"];
/**
 * Longest path parameter the router hands to a route, counted in URL characters. fastify's
 * default (100) is shorter than a valid scope (256 bytes, up to 768 characters percent-encoded),
 * and its refusal is not a problem document; past this bound the URL is refused as too long.
 */
const MAX_PARAM_CHARS = 1024;

export interface CreateServerOptions {
  /** where logs go (default stdout); `warden serve` sends them to stderr */
  readonly logStream?: NodeJS.WritableStream;
  readonly version?: string;
  /** how long a request may take to arrive, ms (default REQUEST_ARRIVAL_MS; a seam for tests) */
  readonly requestArrivalMs?: number;
  /** the built console's directory (default: dist/console of this package) */
  readonly consoleDir?: string;
  /** how long a new connection may stay silent, ms (default FIRST_REQUEST_MS; a seam for tests) */
  readonly firstRequestMs?: number;
  /** hold every reply against its route's response schema, failing it (500) on a mismatch (tests) */
  readonly checkReplies?: boolean;
  /**
   * false: no blob pack route, the node answers it 404 `route-not-found` as a node that predates
   * packs does (a seam for the client's fallback test); default true
   */
  readonly blobPacks?: boolean;
}

/** Quiet routes skip their per-request lines; a request that failed while answering is logged whatever its route. */
class NodeLogController extends LogController {
  override requestCompleted(error: Error | null | undefined, request: FastifyRequest, reply: FastifyReply, metadata?: Record<string, unknown>): void {
    if (error && this.isLogDisabled(request)) reply.log.error({ res: reply, err: error, responseTime: reply.elapsedTime }, "request errored");
    else super.requestCompleted(error, request, reply, metadata);
  }
}

export async function createServer(warden: Warden, settings: ServerSettings, options: CreateServerOptions = {}): Promise<App> {
  // A push sends a chunk per MiB (or per small file): two info lines each were most of what a
  // node spent per chunk beyond storing it, written synchronously to stderr. Such routes log
  // their requests at debug; a refused or failed chunk is still logged by the error handler.
  const requestLinesOfQuietRoutes = settings.logLevel === "debug" || settings.logLevel === "trace";
  const app: App = Fastify({
    logger: {
      level: settings.logLevel,
      // Tokens never reach a log line, whatever a serializer is later taught to print.
      redact: { paths: ["req.headers.authorization", "headers.authorization", "authorization", "req.headers.cookie", "headers.cookie"], censor: "[redacted]" },
      ...(options.logStream === undefined ? {} : { stream: options.logStream }),
    },
    logController: new NodeLogController({
      disableRequestLogging: requestLinesOfQuietRoutes ? false : (request) => request.routeOptions.config.quietRequestLog === true,
    }),
    genReqId: () => randomUUID(),
    bodyLimit: settings.jsonBodyBytes,
    return503OnClosing: false,
    ...httpServerOptions(options.requestArrivalMs ?? REQUEST_ARRIVAL_MS),
    clientErrorHandler: answerClientError,
    routerOptions: { maxParamLength: MAX_PARAM_CHARS },
    // The router refuses a malformed or over-long URL before any hook runs: without this, fastify
    // answers those with its own JSON, not a problem document.
    frameworkErrors: (error, request, reply) => {
      const spec = problemOf(error, undefined);
      request.log.info({ code: spec.code }, "request refused");
      reply.header("x-request-id", request.id);
      if (isConsolePath(request.url)) securityHeaders(reply);
      return sendProblem(reply, spec, request);
    },
  }).withTypeProvider();
  app.setValidatorCompiler(validatorCompiler);
  app.setSerializerCompiler(replySerializer(options.checkReplies === true));
  app.removeContentTypeParser("text/plain");
  parseJsonBodiesAsUtf8(app);

  const authority = new TokenAuthority(settings.tokens);
  const sessions = new ConsoleSessions();
  /**
   * Who sends `request`, when its one bearer token (or, with none, its console session cookie) is
   * valid and allows its method; else an AuthError. A session's changing request must also come
   * from the node's own page (Origin) and carry the session's CSRF token.
   */
  const callerOf = (request: IncomingMessage): Caller => {
    if (repeatedHeader(request.rawHeaders, "authorization")) throw new AuthError("unauthorized", "send exactly one Authorization header");
    const cookie = request.headers.authorization === undefined ? cookieValue(request.headers.cookie, SESSION_COOKIE) : undefined;
    if (cookie !== undefined) {
      const session = sessions.find(cookie);
      if (session === undefined) throw new AuthError("unauthorized", "the console session has ended; log in again (`warden console`)");
      const method = request.method ?? "GET";
      if (method !== "GET" && method !== "HEAD") {
        checkOrigin(request.headers);
        checkCsrf(session, request.headers["x-warden-csrf"]);
      }
      authority.authorize(session.caller, method);
      return session.caller;
    }
    const caller = authority.authenticate(request.headers.authorization);
    authority.authorize(caller, request.method ?? "GET");
    return caller;
  };
  const ctx: RouteContext = {
    warden,
    settings,
    metrics: createNodeMetrics({
      activeStages: () => ctx.stages.size,
      activeRuns: () => warden.activeRuns,
      journalAppends: () => warden.journalAppends,
      spendToday: () => warden.spendToday(),
      queueView: () => warden.queueView(),
      homeRoom: () => warden.homeRoom(),
      ...(warden.log === undefined ? {} : { log: { snapshot: () => warden.log!.snapshot(), failures: () => warden.logFailures } }),
    }),
    stages: new Set(),
    closers: new Set(),
    recentFailures: [],
    blobPacks: options.blobPacks ?? true,
  };
  // Submitted to leased: how long each queued run this node started waited (DESIGN.md "Queued invocations").
  warden.onQueuedStart((row) => ctx.metrics.queueWait.observe(Math.max(0, (row.leased_at ?? Date.now()) - row.enqueued_at) / 1000, { principal: row.principal }));

  // Node answers `Expect: 100-continue` by itself, before any hook: a client without a valid token
  // (or an observer writing) was invited to send its body, a chunk of up to chunkBytes, only to be
  // refused after. The invitation now goes only to a request its token lets through; any other
  // hears its refusal from the hook below before it sends the body.
  app.server.on("checkContinue", (request: IncomingMessage, response: ServerResponse) => {
    try {
      callerOf(request);
      response.writeContinue();
    } catch {
      // refused by the onRequest hook, with its problem document
    }
    app.server.emit("request", request, response);
  });

  const connections = new ConnectionGuard({
    total: warden.limits.connections,
    perClient: warden.limits.connectionsPerClient,
    ...(options.firstRequestMs === undefined ? {} : { firstRequestMs: options.firstRequestMs }),
  });
  connections.attach(app.server);

  app.decorateRequest("caller", null);
  // Callback-style hooks: they run on every request, and a promise per hook is measurable there.
  app.addHook("onRequest", (request, reply, done) => {
    reply.header("x-request-id", request.id);
    // Set first, so that every answer under /ui/ carries them: a refusal, a 404, a 500 too.
    if (isConsolePath(request.url)) securityHeaders(reply);
    // fastify builds a new routeOptions object on every read of it: read it once.
    const route = request.routeOptions;
    // Before auth, so even a 401 on an invocation route is never cached.
    const template = route.url;
    if (template !== undefined && NO_STORE_PREFIXES.some((prefix) => template.startsWith(prefix))) reply.header("cache-control", "no-store");
    if (route.config.public === true) return done();
    try {
      request.caller = callerOf(request.raw);
    } catch (error) {
      return done(error as Error);
    }
    if (request.caller.role === "operator") connections.markOperator(request.raw.socket);
    done();
  });
  // Series by "method status route": a few dozen at most (routes are templates, not URLs).
  const requestSeries = new Map<string, { readonly count: { value: number }; readonly seconds: { value: number } }>();
  app.addHook("onResponse", (request, reply, done) => {
    const route = request.routeOptions.url ?? "unmatched";
    const key = `${request.method} ${reply.statusCode} ${route}`;
    let series = requestSeries.get(key);
    if (series === undefined) {
      series = {
        count: ctx.metrics.requests.series({ method: request.method, route, status: String(reply.statusCode) }),
        seconds: ctx.metrics.requestSeconds.series({ route }),
      };
      requestSeries.set(key, series);
    }
    series.count.value += 1;
    series.seconds.value += reply.elapsedTime / 1000;
    done();
  });
  app.addHook("preClose", async () => {
    for (const close of [...ctx.closers]) close();
  });
  app.setErrorHandler((error, request, reply) => {
    const spec = problemOf(error, request.routeOptions.config?.bodyCodes);
    // A client that went away before its body ended (a push cut off, a killed curl) is no failure
    // of this node, whatever the store reading that body then said: nothing of it was kept. It is
    // counted apart, so that an alert on 5xx or on storage failures never fires for it.
    if ((request.raw.destroyed && !request.raw.complete) || spec.code === "chunk-body-aborted") {
      ctx.metrics.requestsAborted.inc({ route: request.routeOptions.url ?? "unmatched" });
      request.log.info({ code: spec.code, detail: spec.detail }, "client went away mid-request");
    }
    // 503 is a state the node is in (its database is away, it is shutting down), said once per
    // request: a warning with its code, not an error with a stack trace for every caller.
    else if (spec.status === 503 && isWardenError(error)) request.log.warn({ code: spec.code, detail: spec.detail }, "request refused: not available now");
    else if (spec.status >= 500) request.log.error({ err: error }, "request failed");
    else request.log.info({ code: spec.code }, "request refused");
    keepForDrain(request.raw, reply);
    return sendProblem(reply, spec, request);
  });
  const allowed = new AllowedMethods();
  app.addHook("onRoute", (route) => {
    allowed.add(route.method, route.url ?? route.path);
    // The API refuses query parameters it does not know, on every route (health probes aside,
    // whose callers are load balancers that may add their own).
    if (route.url.startsWith("/v1/") && route.schema?.querystring === undefined) route.schema = { ...route.schema, querystring: NoQuery };
  });
  app.setNotFoundHandler((request, reply) => {
    const path = request.url.split("?")[0]!;
    const methods = allowed.for(path);
    if (methods.length > 0) {
      reply.header("allow", methods.join(", "));
      return sendProblem(reply, { status: 405, code: "method-not-allowed", detail: `${path} answers ${methods.join(", ")}, not ${request.method}` }, request);
    }
    return sendProblem(reply, { status: 404, code: "route-not-found", detail: `no route ${request.method} ${path}` }, request);
  });

  await app.register(swagger, {
    openapi: {
      openapi: "3.1.0",
      info: {
        title: "warden node",
        version: options.version ?? "1",
        description: "HTTP API v1 of a warden node: bundle delivery, exactly-once invocations, signed run journals.",
        license: { name: "Apache-2.0", identifier: "Apache-2.0" },
      },
      // Relative: the node this document was fetched from (it knows no name a client reaches it by).
      servers: [{ url: "/", description: "the node serving this document" }],
      components: { securitySchemes: { bearer: { type: "http", scheme: "bearer" } } },
      security: [{ bearer: [] }],
    },
    // A wildcard route (`/v1/log/tile/*`, whose tile paths hold slashes) is documented with a named
    // path parameter: OpenAPI has no wildcard, and `{*}` is no parameter name a client can use.
    transform: ({ schema, url }) => {
      if (!url.endsWith("/*")) return { schema, url };
      const params = (schema as { params?: { properties?: Record<string, unknown> } } | undefined)?.params;
      const wildcard = params?.properties?.["*"];
      const renamed = wildcard === undefined ? schema : { ...schema, params: { ...params, properties: { path: wildcard }, required: ["path"] } };
      return { schema: renamed, url: `${url.slice(0, -1)}{path}` };
    },
  });
  await app.register(healthRoutes(ctx));
  await app.register(stageRoutes(ctx));
  await app.register(bundleRoutes(ctx));
  await app.register(invocationRoutes(ctx));
  await app.register(runRoutes(ctx));
  await app.register(logRoutes(ctx));
  await app.register(nodeRoutes(ctx, options.version ?? packageVersion()));
  await app.register(consoleRoutes({ sessions, authority, assets: loadConsoleAssets(options.consoleDir ?? defaultConsoleDir()) }));
  // Public: it describes the API, holds no state, and clients fetch it before they have a token.
  app.get("/openapi.json", { config: { public: true }, schema: { hide: true } }, async () => app.swagger());
  return app;
}
