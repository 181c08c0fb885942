/**
 * What Node's HTTP layer decides before fastify sees a request: how long a request may take to
 * arrive, and how a request Node's parser refuses (malformed framing, oversized headers, one that
 * took too long) is answered: as a problem document with a stable code, like every other refusal,
 * rather than fastify's own JSON; and how the rest of a body refused unread is dealt with.
 */
import { STATUS_CODES, type IncomingMessage, type ServerOptions } from "node:http";
import type { Duplex } from "node:stream";
import { PROBLEM_CONTENT_TYPE } from "../api/problem.js";
import { problemBody, type ProblemSpec } from "./problem.js";

/**
 * How long a request may take to arrive, headers and body (Node's own default; fastify turns it
 * off). Without it a body that stalls holds its connection forever, and a stalled chunk holds its
 * blob's lock: every resumed upload of that blob, and the stage's commit and abort, wait behind it.
 * Only the request's arrival is timed: a reply waiting on Prefer: wait or an event stream is not.
 */
export const REQUEST_ARRIVAL_MS = 300_000;
/** Node's bound on the headers alone (its default); never above the whole request's. */
const HEADERS_ARRIVAL_MS = 60_000;
/** How often Node looks for requests past their time (its default: 30 s). */
const CHECK_EVERY_MS = 30_000;

/** fastify's options for a node whose requests must arrive within `arrivalMs`. */
export function httpServerOptions(arrivalMs: number): { requestTimeout: number; http: ServerOptions } {
  return {
    requestTimeout: arrivalMs,
    http: {
      requestTimeout: arrivalMs,
      headersTimeout: Math.min(HEADERS_ARRIVAL_MS, arrivalMs),
      // A test's short bound is checked often enough to matter; a real one every 30 s.
      connectionsCheckingInterval: Math.min(CHECK_EVERY_MS, Math.max(50, Math.floor(arrivalMs / 4))),
    },
  };
}

/** Node's parser refusals by their error code; any other is a malformed request. */
const CLIENT_ERRORS: Readonly<Record<string, ProblemSpec>> = {
  ERR_HTTP_REQUEST_TIMEOUT: { status: 408, code: "request-timeout", detail: "the request did not arrive in time" },
  HPE_HEADER_OVERFLOW: { status: 431, code: "headers-too-large", detail: "the request headers are over the size limit" },
};
const MALFORMED: ProblemSpec = { status: 400, code: "request-malformed", detail: "the request is not valid HTTP/1.1" };

/** fastify's clientErrorHandler: answers on the raw socket, then closes it (its framing is lost). */
export function answerClientError(error: Error & { code?: string }, socket: Duplex): void {
  if (error.code === "ECONNRESET" || socket.destroyed) return;
  const spec = CLIENT_ERRORS[error.code ?? ""] ?? MALFORMED;
  const body = JSON.stringify(problemBody(spec));
  if (socket.writable) {
    socket.write(
      `HTTP/1.1 ${spec.status} ${STATUS_CODES[spec.status] ?? ""}\r\nContent-Type: ${PROBLEM_CONTENT_TYPE}\r\n` +
        `Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
    );
  }
  socket.destroy(error);
}

/**
 * True when a request names header `name` (lower case) more than once. Node keeps the first
 * Authorization of several without a word, where a proxy in front may read the last: a request
 * whose credentials two readers could take differently is refused instead.
 */
export function repeatedHeader(rawHeaders: readonly string[], name: string): boolean {
  let seen = 0;
  // Runs on every authenticated request: only names of the right length are lower-cased.
  for (let i = 0; i < rawHeaders.length; i += 2) {
    const header = rawHeaders[i]!;
    if (header.length === name.length && header.toLowerCase() === name && ++seen > 1) return true;
  }
  return false;
}

/**
 * Most bytes of a refused request's unread body the node reads and drops so that the client can
 * read the refusal: a few times the largest body any route takes (a chunk, `limits.chunkBytes`).
 */
export const DRAIN_MAX_BYTES = 64 * 1024 * 1024;

/** What keepForDrain needs of a fastify reply. */
export interface ConnectionHeader {
  getHeader(name: string): unknown;
  removeHeader(name: string): unknown;
}

/**
 * fastify answers a body its parser refuses before reading it (over the limit by its
 * Content-Length) with `Connection: close`. Node then closes the socket as soon as the answer is
 * written, while the client is still sending: its next write meets a reset, and a client that
 * has not read the answer yet reports a broken pipe instead of it (undici did for about one 3 MiB
 * body in twelve here). When the rest of the body is declared and at most DRAIN_MAX_BYTES, the
 * connection is kept instead: Node reads and drops whatever of the body nothing read (its own
 * `_dump` of a request), and the client sends all of it and reads the refusal. A body of unknown
 * or larger length is still cut off. (The chunk routes read a refused chunk's rest themselves:
 * routes/stages.ts, finishRefusedBody.)
 */
export function keepForDrain(request: IncomingMessage, reply: ConnectionHeader): void {
  // A request already destroyed (its client went away) has no connection left to keep.
  if (request.complete || request.destroyed || String(reply.getHeader("connection")).toLowerCase() !== "close") return;
  if (request.headers["transfer-encoding"] !== undefined) return;
  const declared = request.headers["content-length"];
  if (declared === undefined || !/^[0-9]{1,16}$/.test(declared) || Number(declared) > DRAIN_MAX_BYTES) return;
  reply.removeHeader("connection");
}
