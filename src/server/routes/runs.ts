/** Run journals (raw, verified, live) and the node's public keys. */
import { Type } from "typebox";
import { ProblemResponse } from "../../api/problem.js";
import { ChangeBlobBody, ChangeBlobParams, ChangeStat, ChangesQuery, RunChangeSet } from "../../api/runs.js";
import type { Digest } from "../../core/digest.js";
import { AttestationEnvelope, EVENTS_CONTENT_TYPE, EventStreamBody, JOURNAL_CONTENT_TYPE, JournalBody, KeyList, OutputParams, OutputQuery, OutputTail, RunParams, Verification } from "../../api/runs.js";
import { LimitError } from "../../core/errors.js";
import { callerOf, type App, type RouteContext } from "../context.js";
import { principalOf } from "../auth.js";
import { journalEventStream, type JournalEventStream } from "../journal-events.js";

const DEFAULT_OUTPUT_TAIL = 16_384;

/**
 * The event streams one principal (a token's name and role) may hold: all but a quarter of the
 * node's, so that the others always keep a quarter (an observer once held all 256).
 */
export function eventStreamsPerPrincipal(limit: number): number {
  return Math.max(1, limit - Math.floor(limit / 4));
}

export function runRoutes(ctx: RouteContext) {
  const { warden } = ctx;
  /** Event streams open now (bounded by limits.eventStreams: each holds a connection and a file's reads). */
  let openStreams = 0;
  /** Streams open now per principal (eventStreamsPerPrincipal), so that one cannot take them all. */
  const streamsOf = new Map<string, number>();

  return async function runsPlugin(app: App): Promise<void> {
    app.get(
      "/v1/runs/:run_id/journal",
      { schema: { operationId: "getRunJournal", summary: "The run's signed journal, one entry per line", params: RunParams, produces: [JOURNAL_CONTENT_TYPE], response: { 200: JournalBody, "4xx": ProblemResponse } } },
      async (request, reply) => {
        const bytes = await warden.readJournal(request.params.run_id.toLowerCase());
        return reply.type(JOURNAL_CONTENT_TYPE).send(Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength));
      },
    );

    app.get(
      "/v1/runs/:run_id/verification",
      { schema: { operationId: "verifyRun", summary: "Verify the run's journal with the node's keys", params: RunParams, response: { 200: Verification, "4xx": ProblemResponse } } },
      async (request) => warden.verifyRun(request.params.run_id.toLowerCase()),
    );

    app.get(
      "/v1/runs/:run_id/events",
      { schema: { operationId: "streamRunEvents", summary: "The run's journal entries as they are appended (SSE)", params: RunParams, produces: [EVENTS_CONTENT_TYPE], response: { 200: EventStreamBody, "4xx": ProblemResponse } } },
      async (request, reply) => {
        const runId = request.params.run_id.toLowerCase();
        const limit = warden.limits.eventStreams;
        if (openStreams >= limit) {
          throw new LimitError("event-streams-exhausted", `${openStreams} event streams are open on this node, the limit is ${limit}; try again later`, {
            status: 429,
            details: { open: openStreams, limit },
          });
        }
        const principal = principalOf(callerOf(request));
        const own = streamsOf.get(principal) ?? 0;
        const share = eventStreamsPerPrincipal(limit);
        if (own >= share) {
          throw new LimitError("principal-event-streams-exhausted", `you hold ${own} event streams on this node, as many as one token may (the rest of ${limit} is kept for others); close one first`, {
            status: 429,
            details: { open: own, limit: share },
          });
        }
        // Counted from here, so that requests arriving together cannot all pass the check.
        openStreams++;
        streamsOf.set(principal, own + 1);
        const release = (): void => {
          openStreams--;
          const left = (streamsOf.get(principal) ?? 1) - 1;
          if (left === 0) streamsOf.delete(principal);
          else streamsOf.set(principal, left);
        };
        let events: JournalEventStream;
        try {
          await warden.readJournal(runId); // 404 before the stream starts
          const last = Number(request.headers["last-event-id"]);
          events = journalEventStream(warden, runId, Number.isSafeInteger(last) && last >= 0 ? last : -1);
        } catch (error) {
          release();
          throw error;
        }
        const close = (): void => events.end("shutdown");
        ctx.closers.add(close);
        events.stream.on("close", () => {
          release();
          ctx.closers.delete(close);
        });
        // The response's close (not the request's, which fires once its empty body is read) says the client left.
        reply.raw.on("close", () => events.stream.destroy());
        return reply
          .type(EVENTS_CONTENT_TYPE)
          .header("cache-control", "no-store")
          .header("x-accel-buffering", "no")
          .send(events.stream);
      },
    );

    app.get(
      "/v1/runs/:run_id/output/:stream",
      {
        schema: {
          operationId: "getRunOutput",
          summary: "The end of what the run's agent printed on stdout or stderr, as the node that ran it captured it",
          params: OutputParams,
          querystring: OutputQuery,
          response: { 200: OutputTail, "4xx": ProblemResponse },
        },
      },
      async (request) => warden.outputTail(request.params.run_id.toLowerCase(), request.params.stream, request.query.tail ?? DEFAULT_OUTPUT_TAIL),
    );

    app.get(
      "/v1/runs/:run_id/changes",
      {
        schema: {
          operationId: "getRunChanges",
          summary: "What the run changed in its git worktree: the change set's manifest and digest, or (?stat) its files and line counts",
          params: RunParams,
          querystring: ChangesQuery,
          response: { 200: Type.Union([RunChangeSet, ChangeStat]), "4xx": ProblemResponse },
        },
      },
      async (request) => {
        const runId = request.params.run_id.toLowerCase();
        const stat = request.query.stat;
        return stat !== undefined && stat !== "false" && stat !== "0" ? warden.changes.stat(runId) : warden.changes.read(runId);
      },
    );

    app.get(
      "/v1/runs/:run_id/changes/blobs/:digest",
      {
        schema: {
          operationId: "getRunChangeBlob",
          summary: "One blob of the run's change set (a new file's bytes, or the patch), checked against its digest",
          params: ChangeBlobParams,
          produces: ["application/octet-stream"],
          response: { 200: ChangeBlobBody, "4xx": ProblemResponse },
        },
      },
      async (request, reply) => {
        const bytes = await warden.changes.blob(request.params.run_id.toLowerCase(), request.params.digest as Digest);
        return reply.type("application/octet-stream").header("cache-control", "no-store").send(bytes);
      },
    );

    app.get(
      "/v1/runs/:run_id/attestation",
      {
        schema: {
          operationId: "getRunAttestation",
          summary: "The node's signed in-toto statement about the run's change set (a DSSE envelope)",
          params: RunParams,
          response: { 200: AttestationEnvelope, "4xx": ProblemResponse },
        },
      },
      async (request, reply) => {
        const { envelope } = await warden.attestRun(request.params.run_id.toLowerCase());
        return reply.header("cache-control", "no-store").send(envelope);
      },
    );

    app.get("/v1/keys", { schema: { operationId: "listKeys", summary: "The node's public keys", response: { 200: KeyList, "4xx": ProblemResponse } } }, async () => ({ keys: await warden.publicKeys() }));
  };
}
