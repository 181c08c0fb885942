/**
 * Delivery stages: begin (or resume) from a manifest, stream binary chunks into a blob's partial,
 * status for resuming clients, commit, abort. Chunk bodies are never buffered: the raw request
 * stream goes straight into Delivery.putChunk, which appends and hashes as bytes arrive.
 */
import type { IncomingMessage } from "node:http";
import type { Readable } from "node:stream";
import type { FastifyReply, FastifySchemaCompiler } from "fastify";
import { TypeBoxValidatorCompiler } from "@fastify/type-provider-typebox";
import type { TSchema } from "typebox";
import { Value } from "typebox/value";
import { NoContent } from "../../api/common.js";
import { ProblemResponse } from "../../api/problem.js";
import {
  BLOB_PACK_CONTENT_TYPE,
  CHUNK_CONTENT_TYPE,
  ChunkHeaders,
  ChunkParams,
  CommitBody,
  CommitReply,
  Manifest,
  StageBegun,
  StageCommitted,
  StageParams,
  StageStatus,
  UploadList,
} from "../../api/delivery.js";
import { LimitError, ValidationError } from "../../core/errors.js";
import type { App, RouteContext } from "../context.js";

/**
 * The manifest's rules (path syntax, order, digests, limits, contract) live in one place, the
 * delivery module's parser, which names each broken rule with its own `manifest-*` code; the
 * route's schema documents the body and types the client, the parser validates it.
 */
const manifestValidator: FastifySchemaCompiler<TSchema> = (route) =>
  route.httpPart === "body" ? (value: unknown) => ({ value }) : TypeBoxValidatorCompiler(route);

export function stageRoutes(ctx: RouteContext) {
  const { warden, metrics, stages } = ctx;

  return async function stagesPlugin(app: App): Promise<void> {
    app.post(
      "/v1/stages",
      {
        validatorCompiler: manifestValidator,
        schema: {
          operationId: "beginStage", summary: "Begin (or resume) the upload of a bundle manifest",
          body: Manifest,
          response: { 200: StageCommitted, 201: StageBegun, "4xx": ProblemResponse },
        },
      },
      async (request, reply) => {
        const begun = await warden.beginStage(request.body);
        // The request limit goes with every begin: a push sizes its requests within it from the first.
        const chunk_bytes = warden.limits.chunkBytes;
        if (begun.committed) {
          return reply.code(200).send({
            stage_id: begun.stage_id,
            manifest_digest: begun.manifest_digest,
            committed: true,
            receipt: begun.receipt,
            missing: [],
            chunk_bytes,
          });
        }
        metrics.stages.inc({ event: stages.has(begun.stage_id) ? "resumed" : "begun" });
        stages.add(begun.stage_id);
        return reply.code(201).send({ stage_id: begun.stage_id, manifest_digest: begun.manifest_digest, missing: begun.missing, chunk_bytes });
      },
    );

    app.get(
      "/v1/stages",
      { schema: { operationId: "listStages", summary: "Stages being uploaded now, with the bytes received of those declared", response: { 200: UploadList, "4xx": ProblemResponse } } },
      async () => ({ stages: await warden.uploads() }),
    );

    app.get(
      "/v1/stages/:stage_id",
      { schema: { operationId: "getStage", summary: "Where each missing blob resumes", params: StageParams, response: { 200: StageStatus, "4xx": ProblemResponse } } },
      async (request) => {
        return warden.stageStatus(request.params.stage_id);
      },
    );

    app.post(
      "/v1/stages/:stage_id/commit",
      {
        schema: {
          operationId: "commitStage",
          summary: "Commit a fully uploaded stage, with the publisher's signatures if any",
          params: StageParams,
          response: { 200: CommitReply, "4xx": ProblemResponse },
        },
      },
      async (request) => {
        const receipt = await warden.commitStage(request.params.stage_id, commitSignatures(request.body));
        if (stages.delete(request.params.stage_id)) metrics.stages.inc({ event: "committed" });
        return { receipt };
      },
    );

    app.delete(
      "/v1/stages/:stage_id",
      { schema: { operationId: "abortStage", summary: "Abort a stage and drop its partial blobs", params: StageParams, response: { 204: NoContent, "4xx": ProblemResponse } } },
      async (request, reply) => {
        await warden.abortStage(request.params.stage_id);
        if (stages.delete(request.params.stage_id)) metrics.stages.inc({ event: "aborted" });
        return reply.code(204).send(null);
      },
    );

    await app.register(chunkRoute(ctx, ctx.blobPacks));
  };
}

/**
 * The signatures of a commit body: none without a body (clients that predate signatures send
 * none), else `{signatures: [armored…]}` checked against CommitBody.
 */
function commitSignatures(body: unknown): readonly string[] {
  if (body === undefined || body === null) return [];
  if (!Value.Check(CommitBody, body)) {
    throw new ValidationError("commit-body-invalid", "the commit body must be {\"signatures\": [armored SSH signatures, at most 16]}");
  }
  return body.signatures ?? [];
}

/**
 * A chunk's 204 is sent without a payload: given `null`, fastify parses the reply's content type,
 * runs the preSerialization hooks and serializes it, per chunk, only to drop it for a 204 (the
 * same bytes reach the wire either way). Its types ask for the schema's `null`.
 */
const NO_PAYLOAD = undefined as unknown as null;

/**
 * The chunk routes, in their own scope: the only place that accepts application/octet-stream and
 * blob packs. `packs: false` leaves the pack route out, as a node that predates it answers (a test
 * seam for the client's fallback).
 */
function chunkRoute(ctx: RouteContext, packs: boolean) {
  const { warden, metrics } = ctx;
  const chunkBytes = warden.limits.chunkBytes;

  /** The declared length of a chunk or pack body, refused over the chunk limit before a byte is read. */
  const declaredLength = (headers: { readonly "content-length"?: string | undefined }): number => {
    const declared = Number(headers["content-length"] ?? NaN);
    if (declared > chunkBytes) {
      throw new LimitError("chunk-too-large", `a chunk of ${declared} bytes is over the limit of ${chunkBytes}`, {
        details: { limit: chunkBytes },
      });
    }
    return declared;
  };
  const mediaType = (headers: { readonly "content-type"?: string | undefined }): string | undefined =>
    headers["content-type"]?.split(";")[0]?.trim().toLowerCase();

  return async function chunkPlugin(app: App): Promise<void> {
    app.removeAllContentTypeParsers();
    // No parseAs: the handler gets the raw request stream and nothing is buffered here.
    app.addContentTypeParser(CHUNK_CONTENT_TYPE, (_request, payload, done) => done(null, payload));
    if (packs) app.addContentTypeParser(BLOB_PACK_CONTENT_TYPE, (_request, payload, done) => done(null, payload));

    app.patch(
      "/v1/stages/:stage_id/blobs/:digest",
      {
        config: { quietRequestLog: true },
        schema: {
          operationId: "uploadChunk", summary: "Append a chunk of a blob at Upload-Offset",
          params: ChunkParams,
          headers: ChunkHeaders,
          consumes: [CHUNK_CONTENT_TYPE],
          response: { 204: NoContent, "4xx": ProblemResponse },
        },
      },
      async (request, reply) => {
        if (mediaType(request.headers) !== CHUNK_CONTENT_TYPE) {
          throw new ValidationError("unsupported-media-type", `a chunk is sent as ${CHUNK_CONTENT_TYPE}`, { status: 415 });
        }
        const declared = declaredLength(request.headers);
        // The header's schema admits only decimal safe integers: its `upload-offset-invalid` is the one check.
        const offset = Number(request.headers["upload-offset"]);
        const body = request.body === undefined || request.body === null ? new Uint8Array(0) : counted(request.body as Readable, (n) => metrics.bytesReceived.inc({}, n));
        const accepted = await warden.putChunk(request.params.stage_id, request.params.digest, offset, body).catch(async (error: unknown) => {
          await finishRefusedBody(request.raw, reply, Number.isSafeInteger(declared));
          throw error;
        });
        return reply.code(204).header("upload-offset", String(accepted.next_offset)).send(NO_PAYLOAD);
      },
    );

    if (!packs) return;
    app.patch(
      "/v1/stages/:stage_id/blobs",
      {
        config: { quietRequestLog: true },
        schema: {
          operationId: "uploadPack", summary: "Append many chunks of the stage's blobs, framed as a blob pack, in one request",
          params: StageParams,
          consumes: [BLOB_PACK_CONTENT_TYPE],
          response: { 204: NoContent, "4xx": ProblemResponse },
        },
      },
      async (request, reply) => {
        if (mediaType(request.headers) !== BLOB_PACK_CONTENT_TYPE) {
          throw new ValidationError("unsupported-media-type", `a blob pack is sent as ${BLOB_PACK_CONTENT_TYPE}`, { status: 415 });
        }
        // The framing is checked against the declared end before a frame is applied: a pack that
        // would end inside a frame is refused at that frame, not after part of it was taken.
        if (request.headers["content-length"] === undefined) {
          throw new ValidationError("content-length-required", "a blob pack declares its Content-Length", { status: 411 });
        }
        const declared = declaredLength(request.headers);
        const body = request.body === undefined || request.body === null ? new Uint8Array(0) : undestroyed(request.body as Readable);
        // Blob bytes, as for a chunk: the frames' data, not their headers.
        const onBlobBytes = (n: number): void => metrics.bytesReceived.inc({}, n);
        await warden.putPack(request.params.stage_id, body, { declaredBytes: declared, onBlobBytes }).catch(async (error: unknown) => {
          await finishRefusedBody(request.raw, reply, true);
          throw error;
        });
        return reply.code(204).send(NO_PAYLOAD);
      },
    );
  };
}

/**
 * A chunk refused part-way leaves the rest of its body on the connection, and a keep-alive client
 * sends its next request behind those bytes: unread, that request is never seen, and the client
 * waits until a timeout drops the connection (a push that met a full disk stalled for minutes on
 * its status request). A body of declared length (at most the chunk limit, checked before any byte
 * was read) is read to its end and dropped, so the connection stays usable; one of no declared
 * length may go on without bound, so the connection is closed after the reply instead.
 */
async function finishRefusedBody(raw: IncomingMessage, reply: FastifyReply, declaredLength: boolean): Promise<void> {
  if (raw.complete) return;
  if (!declaredLength || raw.destroyed) {
    reply.header("connection", "close");
    return;
  }
  try {
    for await (const _ of raw) void _;
  } catch {
    // The client went away meanwhile: nothing is left to keep usable.
  }
}

/**
 * The body's pieces, counted. A chunk refused part-way stops reading here; the body is left
 * undestroyed (a destroyed request would leave its unread rest on a connection kept alive) for
 * finishRefusedBody to read to its end.
 */
async function* counted(source: Readable, add: (bytes: number) => void): AsyncIterable<Uint8Array> {
  for await (const piece of undestroyed(source)) {
    add(piece.byteLength);
    yield piece;
  }
}

/** The body's pieces; a reader that stops early leaves the rest for finishRefusedBody (see counted). */
function undestroyed(source: Readable): AsyncIterable<Uint8Array> {
  return source.iterator({ destroyOnReturn: false }) as AsyncIterable<Uint8Array>;
}
