/**
 * Every failure leaves the server as an RFC 9457 problem with a stable `code`: WardenErrors keep
 * their own code and status, fastify's framing errors (bad JSON, wrong media type, body too
 * large…) and schema violations get codes of their own, and anything unexpected is a 500
 * `internal-error` whose detail names only the request id (the stack goes to the log, never to
 * the client). The server keeps serving after any of them.
 */
import type { FastifyError, FastifyReply, FastifyRequest } from "fastify";
import { isWardenError } from "../core/errors.js";
import { PROBLEM_CONTENT_TYPE, problemType, type BodyCodePrefix, type Problem } from "../api/problem.js";
import type { ProblemSpec } from "./problem-spec.js";
import { validationProblem, type ValidationFailure } from "./validation.js";

export type { ProblemSpec };

/** fastify's own error codes, each mapped to a stable warden code. */
const FASTIFY_CODES: Readonly<Record<string, { status: number; code: string; detail: string }>> = {
  FST_ERR_CTP_INVALID_MEDIA_TYPE: { status: 415, code: "unsupported-media-type", detail: "this route does not accept that Content-Type" },
  FST_ERR_CTP_INVALID_TYPE: { status: 415, code: "unsupported-media-type", detail: "the Content-Type header is malformed" },
  FST_ERR_CTP_BODY_TOO_LARGE: { status: 413, code: "body-too-large", detail: "the request body is over the limit" },
  FST_ERR_CTP_INVALID_CONTENT_LENGTH: { status: 400, code: "content-length-invalid", detail: "the Content-Length does not match the body" },
  FST_ERR_CTP_EMPTY_JSON_BODY: { status: 400, code: "json-body-empty", detail: "the JSON body is empty" },
  FST_ERR_CTP_INVALID_JSON_BODY: { status: 400, code: "json-malformed", detail: "the body is not valid JSON" },
  FST_ERR_BAD_URL: { status: 400, code: "url-invalid", detail: "the URL is malformed" },
  FST_ERR_INVALID_URL: { status: 400, code: "url-invalid", detail: "the URL is malformed" },
  FST_ERR_MAX_PARAM_LENGTH: { status: 414, code: "url-too-long", detail: "a path segment of the URL is over the length limit" },
};

function titleOf(code: string): string {
  const words = code.replace(/-/g, " ");
  return words.charAt(0).toUpperCase() + words.slice(1);
}

const RESERVED = new Set(["type", "title", "status", "detail", "code", "request_id"]);

export function problemBody(spec: ProblemSpec, requestId?: string): Problem {
  const body: Record<string, unknown> = {
    type: problemType(spec.code),
    title: titleOf(spec.code),
    status: spec.status,
    detail: spec.detail,
    code: spec.code,
  };
  if (requestId !== undefined) body.request_id = requestId;
  for (const [key, value] of Object.entries(spec.extra ?? {})) {
    if (value !== undefined && !RESERVED.has(key)) body[key] = value;
  }
  return body as Problem;
}

/** What a thrown error means on the wire. */
export function problemOf(error: unknown, bodyCodes: BodyCodePrefix | undefined): ProblemSpec {
  if (isWardenError(error)) return { status: error.status, code: error.code, detail: error.message, extra: error.details };
  const e = error as Partial<FastifyError> & { validation?: ValidationFailure["errors"]; validationContext?: string };
  if (Array.isArray(e.validation)) {
    return validationProblem({ errors: e.validation, context: e.validationContext ?? "body" }, bodyCodes);
  }
  const known = typeof e.code === "string" ? FASTIFY_CODES[e.code] : undefined;
  if (known !== undefined) return known;
  const status = typeof e.statusCode === "number" ? e.statusCode : 500;
  if (status >= 400 && status < 500) return { status, code: "request-invalid", detail: "the request could not be processed" };
  return { status: 500, code: "internal-error", detail: "internal error; the node's log has the details under this request id" };
}

export function sendProblem(reply: FastifyReply, spec: ProblemSpec, request: FastifyRequest): FastifyReply {
  if (spec.status === 401) reply.header("www-authenticate", 'Bearer realm="warden"');
  return reply.code(spec.status).type(PROBLEM_CONTENT_TYPE).send(problemBody(spec, request.id));
}
