/** `warden/client`: the typed HTTP client of a warden node. */
export { WardenClient, type WardenClientOptions, type InvokeOptions, type InvokeReply, type ReconcileResult, type RetryOption } from "./client.js";
export { WardenHttpError, WardenConnectionError, type Problem } from "./errors.js";
export {
  pushDirectory,
  compileForPush,
  derivedRevision,
  DEFAULT_CHUNK_BYTES,
  type PushOptions,
  type PushResult,
  type PushProgress,
  type PushPhase,
  type PushHooks,
  type ChunkInfo,
  type StageApi,
} from "./push.js";
export { DigestCache, type DigestCacheOptions } from "../delivery/compile/digest-cache.js";
export type { RunEvent } from "./sse.js";
export type { FetchFn, TransportOptions } from "./transport.js";
export { createNodeFetch, type NodeFetch } from "./node-fetch.js";
export type * from "./wire.js";
export { isCommitted } from "./wire.js";
