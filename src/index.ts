/**
 * `import { openWarden } from "warden"`: the library facade, the domain services it composes,
 * their types, the error classes and the HTTP server factory. The typed HTTP client is
 * `warden/client`; the wire schemas of HTTP API v1 are exported here as `api`.
 */
export * from "./core/index.js";
export * from "./storage/index.js";
export * from "./journal/index.js";
export * from "./invocations/index.js";
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
} from "./warden.js";
export {
  Delivery,
  type BeginResult,
  type StagingBegun,
  type CommittedBegun,
  type StageStatus,
  type ChunkAccepted,
  type DeliveryOptions,
} from "./delivery/service.js";
export type { BundleView, RevisionView } from "./delivery/catalog.js";
export type { MissingBlob } from "./delivery/stage.js";
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
export { parseManifest, createManifest } from "./delivery/manifest.js";
export { TrustPolicy, type BundleSignature, type SignerView, type SigningConfig, type TrustRuleConfig } from "./signing/policy.js";
export { bundleStatement, SIGNATURE_NAMESPACE } from "./signing/statement.js";
export { parseSshsig, verifySshsig } from "./signing/sshsig.js";
export { parseAllowedSigners } from "./signing/allowed-signers.js";
export { compileDirectory, readCompiledFile, type CompiledBundle, type CompiledFile, type CompileOptions } from "./delivery/compile.js";
export { Materializer, type MaterializerOptions, type MaterializeRequest } from "./providers/materializer.js";
export { PROVIDER_NAMES, isProviderName, type ProviderName, type BundleRef, type Materialization, type Launch } from "./providers/types.js";
export { DEFAULT_PROVIDER_PROFILES, resolveProfiles, type ProviderProfile, type ProviderProfiles } from "./providers/profiles.js";
export { Runner, type RunnerOptions, type RunnerHooks, type InvokeInput, type RunResult, type StartOutcome } from "./runner/runner.js";
export { parseInvokeRequest, type InvokeRequest } from "./runner/request.js";
export { createServer, type CreateServerOptions } from "./server/app.js";
export { startNode, type RunningNode } from "./server/node.js";
export { loadServeConfig, type ServeConfig, type ServeFlags, type ServerSettings } from "./config/serve-config.js";
export * as api from "./api/index.js";
