/**
 * `import { openWarden } from "warden"`: the library's public names, each listed here on purpose
 * (docs/http-api.md "Library" says what each group is for; test/contracts/public-exports.test.ts
 * pins the list, so a name joins or leaves it only by a change to both). What a library user
 * needs: the facade and its options, the typed errors, the HTTP client, the verification of
 * journals, receipts and signatures, bundles compiled from a directory, the HTTP node, and the
 * wire schemas of HTTP API v1 as `api`. Everything else under src/ is the engine's inside.
 */

// The facade: one node in-process.
export {
  openWarden,
  Warden,
  type WardenOptions,
  type InvocationStart,
  type StartedRun,
  type KnownOutcome,
  type RunVerification,
  type CloseOptions,
  type ShutdownEvent,
  type RunningRun,
  type StartOptions,
  type QueuedInvocation,
  type Submission,
  type NodeQueueView,
} from "./warden/facade.js";
export type { QueueConfig } from "./warden/queue-runner.js";
export type { TraceCarrier, TracingOptions } from "./tracing/tracing.js";
export type { LogOptions } from "./warden/transparency.js";
export type { PostgresNodeOptions } from "./backends/postgres/node.js";
export type { RunnerHooks } from "./runner/runner.js";
export { DEFAULT_LIMITS, type Limits } from "./core/limits.js";
export { parseInvokeRequest, type InvokeRequest } from "./runner/request.js";
export { PROVIDER_NAMES, isProviderName, type ProviderName, type Materialization } from "./providers/types.js";
export { DEFAULT_PROVIDER_PROFILES, type ProviderProfile, type ProviderProfiles } from "./providers/profiles.js";

// Typed errors: every failure is one of these, with a stable `code` (docs/errors.md).
export {
  WardenError,
  ValidationError,
  ConflictError,
  NotFoundError,
  LimitError,
  UnsafeStorageError,
  IntegrityError,
  StorageError,
  AuthError,
  isWardenError,
  type ErrorDetails,
  type ErrorItem,
} from "./core/errors.js";

// The HTTP client (also `warden/client`, with the wire types).
export { WardenClient, WardenHttpError, WardenConnectionError, type WardenClientOptions, type Problem } from "./client/index.js";

// Verification: journals, reconciliation receipts, signed bundles.
export { verifyJournal, type VerifyReport, type VerifyOptions, type VerifyError, type VerifyErrorCode, type Checkpoint } from "./journal/verify.js";
export { inspectRun, type RunInspection } from "./journal/inspect.js";
export type { PublicKeyRecord } from "./journal/types.js";
export { verifyReceipt, type ReceiptVerification } from "./invocations/reconciliation.js";
export { TrustPolicy, type BundleSignature, type SignerView, type SigningConfig, type TrustRuleConfig } from "./signing/policy.js";
export { bundleStatement, SIGNATURE_NAMESPACE } from "./signing/statement.js";
export { parseSshsig, verifySshsig } from "./signing/sshsig.js";
export { parseAllowedSigners } from "./signing/allowed-signers.js";

// Bundles: compiled from a directory, their manifests and digests.
export { compileDirectory, type CompiledBundle, type CompiledFile, type CompileOptions } from "./delivery/compile/directory.js";
export { parseManifest, createManifest } from "./delivery/manifest.js";
export {
  COMPONENT_KINDS,
  COMPONENT_SCOPES,
  bundleDigestOf,
  manifestDigestOf,
  type BlobRef,
  type Component,
  type ComponentKind,
  type ComponentScope,
  type CommitReceipt,
  type Manifest,
} from "./delivery/manifest-types.js";
export type { Digest } from "./core/digest.js";

// The HTTP node over a Warden.
export { createServer, type CreateServerOptions } from "./server/app.js";
export { startNode, type RunningNode } from "./server/node.js";
export { loadServeConfig, type ServeConfig, type ServeFlags, type ServerSettings } from "./config/serve-config.js";
export * as api from "./api/index.js";
