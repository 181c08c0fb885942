/** What every route module receives: the node, its settings, metrics and live streams. */
import type { FastifyBaseLogger, FastifyInstance, RawReplyDefaultExpression, RawRequestDefaultExpression, RawServerDefault } from "fastify";
import type { TypeBoxTypeProvider } from "@fastify/type-provider-typebox";
import type { ServerSettings } from "../config/serve-config.js";
import type { Warden } from "../warden/facade.js";
import type { Caller } from "./auth.js";
import type { NodeMetrics } from "./metrics.js";
import type { RunFailure } from "../api/console.js";
import type { BodyCodePrefix } from "../api/problem.js";

export type App = FastifyInstance<RawServerDefault, RawRequestDefaultExpression, RawReplyDefaultExpression, FastifyBaseLogger, TypeBoxTypeProvider>;

export interface RouteContext {
  readonly warden: Warden;
  readonly settings: ServerSettings;
  readonly metrics: NodeMetrics;
  /** stage ids begun through this process and not yet closed (for the active-stages gauge) */
  readonly stages: Set<string>;
  /** called at shutdown: end event streams, stop waiting for runs (so closing is not held up) */
  readonly closers: Set<() => void>;
  /** runs this process saw end without a recorded result, newest first (a few, for the console's overview) */
  readonly recentFailures: RunFailure[];
  /** whether the blob pack route is served (CreateServerOptions.blobPacks) */
  readonly blobPacks: boolean;
}

declare module "fastify" {
  interface FastifyRequest {
    /** set by the auth hook on every authenticated request */
    caller: Caller | null;
  }
  interface FastifyContextConfig {
    /** no bearer token required (/healthz, /openapi.json) */
    public?: boolean;
    /** prefix of the codes of body schema violations (default "request") */
    bodyCodes?: BodyCodePrefix;
    /** log this route's requests (incoming, completed) only at debug or trace; refusals and failures still log */
    quietRequestLog?: boolean;
  }
}

/** The authenticated caller; the auth hook guarantees one on every non-public route. */
export function callerOf(request: { caller: Caller | null }): Caller {
  if (request.caller === null) throw new TypeError("route reached without an authenticated caller");
  return request.caller;
}
