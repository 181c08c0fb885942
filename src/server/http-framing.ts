/**
 * What Node's HTTP layer decides before fastify sees a request: how long a request may take to
 * arrive, and how a request Node's parser refuses (malformed framing, oversized headers, one that
 * took too long) is answered: as a problem document with a stable code, like every other refusal,
 * rather than fastify's own JSON.
 */
import { STATUS_CODES, type ServerOptions } from "node:http";
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
