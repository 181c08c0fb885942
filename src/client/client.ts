/**
 * The typed client of HTTP API v1 (DESIGN.md): one method per route, replies typed, failures
 * thrown as WardenHttpError with the node's problem `code`. `push` drives the delivery routes to
 * upload a directory resumably (push.ts).
 */
import type { TraceCarrier } from "../tracing/tracing.js";
import type { Manifest } from "../delivery/manifest-types.js";
import { WardenHttpError } from "./errors.js";
import type { PushOptions, PushResult, StageApi } from "./push.js";
import { packPieces, type PackChunk } from "../delivery/blob-pack-frame.js";
import { BLOB_PACK_CONTENT_TYPE } from "../api/media-types.js";
import { readEvents, type RunEvent } from "./sse.js";
import { Transport, type TransportOptions } from "./transport.js";
import type {
  AttestationEnvelope,
  BeginStageReply,
  BundleList,
  BundleView,
  CommitReply,
  Inspection,
  InvocationList,
  InvocationListQuery,
  InvocationView,
  ApprovalBody,
  InvokeBody,
  KeyList,
  LogStatusBody,
  RunProofBody,
  LoginLink,
  Manifest as ManifestView,
  MaterializationReply,
  NodeSummary,
  ProviderPlans,
  OutputTail,
  RunChangeSet,
  ChangeStat,
  RetirementReply,
  RevisionView,
  ProviderName,
  ReconcileReply as ReconcileBody,
  ReconciliationReceipt,
  Review,
  StageStatus,
  UploadList,
  UploadProgress,
  Verification,
} from "./wire.js";

export type WardenClientOptions = TransportOptions;

export interface RetryOption {
  /** false: one attempt only (push retries on its own, after re-syncing) */
  readonly retry?: boolean;
}

export interface InvokeOptions {
  /** `Prefer: wait=<s>`: let a fresh run finish within this many seconds before answering 202 */
  readonly waitSeconds?: number;
  /**
   * `Prefer: respond-async`: submit to the node's queue and answer `202 queued` at once; the
   * request may then carry `priority`, `deadline_s` and `labels` (DESIGN.md "Queued invocations").
   * `waitSeconds` is not sent with it.
   */
  readonly async?: boolean;
  readonly signal?: AbortSignal;
  /**
   * The caller's W3C trace context, sent as `traceparent`/`tracestate` so the run's span joins
   * the caller's trace (DESIGN.md "Traces"). Default: this process's `TRACEPARENT` and
   * `TRACESTATE` variables, as a traced parent hands them to a child; `false` sends none.
   */
  readonly trace?: TraceCarrier | false;
}

export interface InvokeReply {
  /** 200 replayed or finished within the wait, 202 running */
  readonly httpStatus: number;
  /** `Idempotency-Replayed: true`: this is a stored result, not this call's run */
  readonly replayed: boolean;
  readonly invocation: InvocationView;
}

export interface ReconcileResult {
  readonly receipt: ReconciliationReceipt;
  /** false when the node answered the receipt of the same review submitted before (200) */
  readonly created: boolean;
}

const seg = encodeURIComponent;

export class WardenClient implements StageApi {
  readonly #http: Transport;

  constructor(options: WardenClientOptions) {
    this.#http = new Transport(options);
  }

  get url(): string {
    return this.#http.baseUrl;
  }

  /** Closes the client's kept-alive connections; idle ones never keep a process alive anyway. */
  close(): void {
    this.#http.close();
  }

  // ---- delivery ----

  async beginStage(manifest: Manifest, options: RetryOption = {}): Promise<BeginStageReply> {
    const reply = await this.#http.json<BeginStageReply>({ method: "POST", path: "/v1/stages", json: manifest, retry: options.retry });
    return reply.body;
  }

  async uploadChunk(stageId: string, digest: string, offset: number, bytes: Uint8Array): Promise<{ nextOffset: number }> {
    const path = `/v1/stages/${seg(stageId)}/blobs/${seg(digest)}`;
    const reply = await this.#http.sendForHeaders({ method: "PATCH", path, bytes, headers: { "upload-offset": String(offset) }, retry: false });
    const header = reply.header("upload-offset");
    const nextOffset = header !== null && /^\d+$/.test(header) ? Number(header) : NaN;
    if (!Number.isSafeInteger(nextOffset)) {
      throw new WardenHttpError(502, { code: "upload-offset-missing", detail: `the node acknowledged a chunk without a valid Upload-Offset header` }, { method: "PATCH", path });
    }
    return { nextOffset };
  }

  /**
   * Sends chunks of several blobs in one request, as a blob pack (DESIGN.md "Blob packs"): each
   * frame is applied as the chunk it carries would be alone. A node that predates packs answers
   * 404 `route-not-found` (see `isPackUnsupported`).
   */
  async uploadPack(stageId: string, frames: readonly PackChunk[]): Promise<void> {
    const path = `/v1/stages/${seg(stageId)}/blobs`;
    await this.#http.sendForHeaders({ method: "PATCH", path, bytes: packPieces(frames), contentType: BLOB_PACK_CONTENT_TYPE, retry: false });
  }

  async stageStatus(stageId: string, options: RetryOption = {}): Promise<StageStatus> {
    return (await this.#http.json<StageStatus>({ method: "GET", path: `/v1/stages/${seg(stageId)}`, retry: options.retry })).body;
  }

  /** Commits a fully uploaded stage; `signatures` (armored SSHSIG over the revision's statement) go with it. */
  async commitStage(stageId: string, options: RetryOption & { signatures?: readonly string[] } = {}): Promise<CommitReply> {
    const path = `/v1/stages/${seg(stageId)}/commit`;
    const signatures = options.signatures ?? [];
    return (
      await this.#http.json<CommitReply>({ method: "POST", path, retry: options.retry, ...(signatures.length === 0 ? {} : { json: { signatures } }) })
    ).body;
  }

  /** Adds a signature to a committed revision; answers the revision with all its signers. */
  async addSignature(bundleId: string, revision: string, signature: string): Promise<RevisionView> {
    const path = `/v1/bundles/${seg(bundleId)}/${seg(revision)}/signatures`;
    return (await this.#http.json<RevisionView>({ method: "POST", path, json: { signature } })).body;
  }

  /** Stages being uploaded now (by any client, through any node sharing the stores), with their progress. */
  async listStages(): Promise<readonly UploadProgress[]> {
    return (await this.#http.json<UploadList>({ method: "GET", path: "/v1/stages" })).body.stages;
  }

  async abortStage(stageId: string): Promise<void> {
    await this.#http.sendForHeaders({ method: "DELETE", path: `/v1/stages/${seg(stageId)}` });
  }

  async listBundles(): Promise<readonly BundleView[]> {
    return (await this.#http.json<BundleList>({ method: "GET", path: "/v1/bundles" })).body.bundles;
  }

  async getBundle(bundleId: string): Promise<BundleView> {
    return (await this.#http.json<BundleView>({ method: "GET", path: `/v1/bundles/${seg(bundleId)}` })).body;
  }

  /** The manifest a committed revision was delivered with (paths, kinds, digests, sizes). */
  async bundleManifest(bundleId: string, revision: string): Promise<ManifestView> {
    return (await this.#http.json<ManifestView>({ method: "GET", path: `/v1/bundles/${seg(bundleId)}/${seg(revision)}/manifest` })).body;
  }

  /** What each provider would get from a committed revision, or the refusal it would answer (nothing is written). */
  async revisionProviders(bundleId: string, revision: string): Promise<ProviderPlans> {
    return (await this.#http.json<ProviderPlans>({ method: "GET", path: `/v1/bundles/${seg(bundleId)}/${seg(revision)}/providers` })).body;
  }

  /** Materializes a committed revision for a provider on the node; answers where it lies and how to launch. */
  async materialize(bundleId: string, revision: string, provider: ProviderName): Promise<MaterializationReply> {
    const path = `/v1/bundles/${seg(bundleId)}/${seg(revision)}/materializations`;
    // Not retried: each call builds a new session tree on the node.
    return (await this.#http.json<MaterializationReply>({ method: "POST", path, json: { provider }, retry: false })).body;
  }

  /** Retires a revision (new sessions refuse it) and has the node delete the blobs nothing live references. */
  async retireRevision(bundleId: string, revision: string): Promise<RetirementReply> {
    const path = `/v1/bundles/${seg(bundleId)}/${seg(revision)}/retirement`;
    return (await this.#http.json<RetirementReply>({ method: "POST", path })).body;
  }

  /** Removes a tree `materialize` made on the node (it keeps a bounded number of them). */
  async releaseMaterialization(session: string): Promise<void> {
    await this.#http.sendForHeaders({ method: "DELETE", path: `/v1/materializations/${seg(session)}` });
  }

  /** Compiles `dir`, uploads only what the node is missing (resuming from its offsets) and commits. */
  async push(dir: string, options: PushOptions = {}): Promise<PushResult> {
    // Loaded on first use: compiling a bundle brings the manifest schemas, which every other
    // request (and every CLI command but `push`) would otherwise pay for at start.
    const { pushDirectory } = await import("./push.js");
    return pushDirectory(this, dir, options);
  }

  // ---- invocations ----

  /**
   * Requests a run under `Idempotency-Key: id`. Safe to retry: the key makes a repeated request
   * answer the first one's outcome (409 `in-progress` while it runs) instead of running again.
   */
  async invoke(id: string, request: InvokeBody, options: InvokeOptions = {}): Promise<InvokeReply> {
    const headers: Record<string, string> = { "idempotency-key": id };
    // A wait with respond-async would start the run now (the server's rule): a submission sends none.
    if (options.async === true) headers.prefer = "respond-async";
    else if (options.waitSeconds !== undefined) headers.prefer = `wait=${options.waitSeconds}`;
    const trace = options.trace ?? { traceparent: process.env.TRACEPARENT, tracestate: process.env.TRACESTATE };
    if (trace !== false && trace.traceparent !== undefined && trace.traceparent !== "") {
      headers.traceparent = trace.traceparent;
      if (trace.tracestate !== undefined && trace.tracestate !== "") headers.tracestate = trace.tracestate;
    }
    const reply = await this.#http.json<InvocationView>({ method: "POST", path: "/v1/invocations", json: request, headers, signal: options.signal });
    return { httpStatus: reply.status, replayed: reply.header("idempotency-replayed") === "true", invocation: reply.body };
  }

  async getInvocation(scope: string, id: string): Promise<InvocationView> {
    return (await this.#http.json<InvocationView>({ method: "GET", path: `/v1/invocations/${seg(scope)}/${seg(id)}` })).body;
  }

  async listInvocations(query: InvocationListQuery = {}): Promise<InvocationList> {
    return (await this.#http.json<InvocationList>({ method: "GET", path: "/v1/invocations", query })).body;
  }

  /**
   * Cancels an invocation (operator): a queued one becomes `cancelled`, a running one's agent is
   * stopped (its view reads `in_progress` until it ends); a finished one is `409 invocation-finished`.
   */
  async cancel(scope: string, id: string): Promise<InvocationView> {
    const path = `/v1/invocations/${seg(scope)}/${seg(id)}/cancellation`;
    return (await this.#http.json<InvocationView>({ method: "POST", path })).body;
  }

  async inspect(scope: string, id: string): Promise<Inspection> {
    return (await this.#http.json<Inspection>({ method: "GET", path: `/v1/invocations/${seg(scope)}/${seg(id)}/inspection` })).body;
  }

  async reconcile(scope: string, id: string, review: Review): Promise<ReconcileResult> {
    const path = `/v1/invocations/${seg(scope)}/${seg(id)}/reconciliation`;
    const reply = await this.#http.json<ReconcileBody>({ method: "POST", path, json: review });
    return { receipt: reply.body.receipt, created: reply.status === 201 };
  }

  /** Answers a run awaiting approval; `replayed` when the same answer had been given already. */
  async approve(scope: string, id: string, body: ApprovalBody): Promise<{ readonly view: InvocationView; readonly replayed: boolean }> {
    const path = `/v1/invocations/${seg(scope)}/${seg(id)}/approval`;
    const reply = await this.#http.json<InvocationView>({ method: "POST", path, json: body });
    return { view: reply.body, replayed: reply.status === 200 };
  }

  // ---- runs and keys ----

  /** The run's raw journal bytes (application/x-ndjson), exactly as stored. */
  async journal(runId: string): Promise<Uint8Array> {
    const response = await this.#http.send({ method: "GET", path: `/v1/runs/${seg(runId)}/journal`, accept: "application/x-ndjson" });
    return new Uint8Array(await response.arrayBuffer());
  }

  async verifyRun(runId: string): Promise<Verification> {
    return (await this.#http.json<Verification>({ method: "GET", path: `/v1/runs/${seg(runId)}/verification` })).body;
  }

  /** Journal entries of a run as they are appended (server-sent events); ends when the node closes the stream. */
  async *events(runId: string, options: { signal?: AbortSignal } = {}): AsyncIterable<RunEvent> {
    const path = `/v1/runs/${seg(runId)}/events`;
    const response = await this.#http.send({ method: "GET", path, accept: "text/event-stream", signal: options.signal, retry: false });
    yield* readEvents(response, path);
  }

  /** The end of what the run's agent printed on `stream` (at most `tailBytes`, whole lines), from the node that ran it. */
  async runOutput(runId: string, stream: "stdout" | "stderr", options: { tailBytes?: number } = {}): Promise<OutputTail> {
    const query = options.tailBytes === undefined ? "" : `?tail=${options.tailBytes}`;
    return (await this.#http.json<OutputTail>({ method: "GET", path: `/v1/runs/${seg(runId)}/output/${stream}${query}` })).body;
  }

  /** The run's change set (manifest and digest) as the node stored it; check it with src/changes/format.ts parseManifest. */
  async runChanges(runId: string): Promise<RunChangeSet> {
    return (await this.#http.json<RunChangeSet>({ method: "GET", path: `/v1/runs/${seg(runId)}/changes` })).body;
  }

  /** The stat form of the run's change set: paths, statuses, line counts. */
  async runChangeStat(runId: string): Promise<ChangeStat> {
    return (await this.#http.json<ChangeStat>({ method: "GET", path: `/v1/runs/${seg(runId)}/changes?stat` })).body;
  }

  /** One blob of the run's change set (a new file's bytes or the patch); check it against its digest. */
  async runChangeBlob(runId: string, digest: string): Promise<Uint8Array> {
    const response = await this.#http.send({ method: "GET", path: `/v1/runs/${seg(runId)}/changes/blobs/${seg(digest)}`, accept: "application/octet-stream" });
    return new Uint8Array(await response.arrayBuffer());
  }

  /** The node's signed in-toto statement about a run's change set, as a DSSE envelope (DESIGN.md "Attestations"). */
  async runAttestation(runId: string): Promise<AttestationEnvelope> {
    return (await this.#http.json<AttestationEnvelope>({ method: "GET", path: `/v1/runs/${seg(runId)}/attestation` })).body;
  }

  async keys(): Promise<KeyList["keys"]> {
    return (await this.#http.json<KeyList>({ method: "GET", path: "/v1/keys" })).body.keys;
  }

  // ---- transparency log ----

  /** The log's latest signed checkpoint (a C2SP signed note, with the witness cosignatures the node got). */
  async logCheckpoint(): Promise<string> {
    return (await this.#http.send({ method: "GET", path: "/v1/log/checkpoint", accept: "text/plain" })).text();
  }

  /** A run's logged seal, its inclusion proof and the checkpoint it proves into (verify with tlog/verify.ts). */
  async logRunProof(runId: string): Promise<RunProofBody> {
    return (await this.#http.json<RunProofBody>({ method: "GET", path: `/v1/log/runs/${seg(runId)}` })).body;
  }

  /** The `run.reconciled` leaf of the receipt that closed run `runId`, with its inclusion proof (same shape as `logRunProof`). */
  async logReconciliationProof(runId: string): Promise<RunProofBody> {
    return (await this.#http.json<RunProofBody>({ method: "GET", path: `/v1/log/reconciliations/${seg(runId)}` })).body;
  }

  async logConsistency(oldSize: number, size: number): Promise<{ old: number; size: number; proof: string[] }> {
    return (await this.#http.json<{ old: number; size: number; proof: string[] }>({ method: "GET", path: `/v1/log/proof/consistency/${oldSize}/${size}` })).body;
  }

  async logStatus(): Promise<LogStatusBody> {
    return (await this.#http.json<LogStatusBody>({ method: "GET", path: "/v1/log" })).body;
  }

  // ---- operations ----

  /** The node at a glance (the console's overview): keys, backend, readiness, invocations by status, runs and uploads now. */
  async node(): Promise<NodeSummary> {
    return (await this.#http.json<NodeSummary>({ method: "GET", path: "/v1/node" })).body;
  }

  /** A one-time console login link for this client's own role; its secret is in the path's fragment. */
  async consoleLogin(): Promise<LoginLink> {
    return (await this.#http.json<LoginLink>({ method: "POST", path: "/v1/console/logins", retry: false })).body;
  }

  async health(): Promise<unknown> {
    return (await this.#http.json<unknown>({ method: "GET", path: "/healthz" })).body;
  }

  async ready(): Promise<unknown> {
    return (await this.#http.json<unknown>({ method: "GET", path: "/readyz" })).body;
  }

  /** Prometheus text exposition. */
  async metrics(): Promise<string> {
    return (await this.#http.send({ method: "GET", path: "/metrics", accept: "text/plain" })).text();
  }

  async openapi(): Promise<unknown> {
    return (await this.#http.json<unknown>({ method: "GET", path: "/openapi.json" })).body;
  }
}
