/**
 * The library's public names (`import … from "warden"`, src/index.ts) are an explicit list, pinned
 * here, values and types alike, as the TypeScript compiler sees the module; and docs/http-api.md's
 * "Library" section names each of them. A name added to or dropped from src/index.ts fails this
 * test until the list below and the docs say so too.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import ts from "typescript";
import { repo } from "../support/node.js";

const PUBLIC = [
  // the facade
  "openWarden", "Warden", "WardenOptions", "InvocationStart", "StartedRun", "KnownOutcome", "RunVerification", "CloseOptions", "ShutdownEvent", "RunningRun", "StartOptions",
  "QueuedInvocation", "Submission", "NodeQueueView", "QueueConfig", "TraceCarrier", "TracingOptions",
  "LogOptions", "PostgresNodeOptions", "RunnerHooks", "DEFAULT_LIMITS", "Limits", "parseInvokeRequest", "InvokeRequest",
  "PROVIDER_NAMES", "isProviderName", "ProviderName", "Materialization", "DEFAULT_PROVIDER_PROFILES", "ProviderProfile", "ProviderProfiles",
  // typed errors
  "WardenError", "ValidationError", "ConflictError", "NotFoundError", "LimitError", "UnsafeStorageError", "IntegrityError", "StorageError", "AuthError", "isWardenError", "ErrorDetails", "ErrorItem",
  // the client
  "WardenClient", "WardenHttpError", "WardenConnectionError", "WardenClientOptions", "Problem",
  // verification
  "verifyJournal", "VerifyReport", "VerifyOptions", "VerifyError", "VerifyErrorCode", "Checkpoint", "inspectRun", "RunInspection", "PublicKeyRecord",
  "verifyReceipt", "ReceiptVerification", "TrustPolicy", "BundleSignature", "SignerView", "SigningConfig", "TrustRuleConfig",
  "bundleStatement", "SIGNATURE_NAMESPACE", "parseSshsig", "verifySshsig", "parseAllowedSigners",
  // bundles
  "compileDirectory", "CompiledBundle", "CompiledFile", "CompileOptions", "parseManifest", "createManifest",
  "COMPONENT_KINDS", "COMPONENT_SCOPES", "bundleDigestOf", "manifestDigestOf", "BlobRef", "Component", "ComponentKind", "ComponentScope", "CommitReceipt", "Manifest", "Digest",
  // the HTTP node
  "createServer", "CreateServerOptions", "startNode", "RunningNode", "loadServeConfig", "ServeConfig", "ServeFlags", "ServerSettings", "api",
];

function exportedNames(entry: string): string[] {
  const program = ts.createProgram([entry], { module: ts.ModuleKind.NodeNext, moduleResolution: ts.ModuleResolutionKind.NodeNext, target: ts.ScriptTarget.ES2022, noEmit: true, skipLibCheck: true });
  const checker = program.getTypeChecker();
  const module = checker.getSymbolAtLocation(program.getSourceFile(entry)!)!;
  return checker.getExportsOfModule(module).map((s) => s.getName());
}

test("src/index.ts exports exactly the listed public names", { timeout: 300_000 }, () => {
  const names = exportedNames(join(repo, "src", "index.ts"));
  assert.deepEqual([...names].sort(), [...PUBLIC].sort());
});

test("docs/http-api.md's Library section names every public name", () => {
  const doc = readFileSync(join(repo, "docs", "http-api.md"), "utf8");
  const section = /^## Library\n([\s\S]*?)^## /m.exec(doc)?.[1] ?? assert.fail("docs/http-api.md has no Library section");
  const missing = PUBLIC.filter((name) => !new RegExp(`\\b${name}\\b`).test(section));
  assert.deepEqual(missing, [], "names the Library section does not mention");
});
