/**
 * Errors on the wire: RFC 9457 `application/problem+json` with a stable machine `code`. Domain
 * failures keep the code of the WardenError that caused them (src/core/errors.ts); the codes below
 * are the ones the HTTP layer itself answers. Codes are a contract: never rename, only add.
 */
import { Type, type Static } from "typebox";

export const PROBLEM_CONTENT_TYPE = "application/problem+json";

/** `type` of a problem: one URI per code. */
export function problemType(code: string): string {
  return `urn:warden:problem:${code}`;
}

export const Problem = Type.Object(
  {
    type: Type.String({ description: "urn:warden:problem:<code>" }),
    title: Type.String(),
    status: Type.Integer({ minimum: 400, maximum: 599 }),
    detail: Type.String(),
    code: Type.String({ description: "stable machine code of the rule broken" }),
    request_id: Type.Optional(Type.String()),
    expected_offset: Type.Optional(Type.Integer({ minimum: 0 })),
  },
  { additionalProperties: true, description: "RFC 9457 problem; extra members carry the details of the failure" },
);
export type Problem = Static<typeof Problem>;

/** The error responses of a route, as OpenAPI shows them: a problem document. */
export const ProblemResponse = {
  description: "RFC 9457 problem (application/problem+json) with a stable `code`",
  content: { [PROBLEM_CONTENT_TYPE]: { schema: Problem } },
} as const;

/** Codes answered by the HTTP layer (request framing, auth, routing, idempotency). */
export const HTTP_ERROR_CODES = {
  unauthorized: 401,
  forbidden: 403,
  "route-not-found": 404,
  "method-not-allowed": 405,
  "unsupported-media-type": 415,
  "body-too-large": 413,
  "json-malformed": 400,
  "json-body-empty": 400,
  "content-length-invalid": 400,
  "url-invalid": 400,
  "url-too-long": 414,
  "request-malformed": 400,
  "request-timeout": 408,
  "headers-too-large": 431,
  "request-unknown-field": 400,
  "request-missing-field": 400,
  "request-field-type": 400,
  "request-field-invalid": 400,
  "request-invalid": 400,
  "query-unknown-field": 400,
  "query-invalid": 400,
  "header-invalid": 400,
  "idempotency-key-missing": 400,
  "idempotency-key-invalid": 400,
  "upload-offset-missing": 400,
  "upload-offset-invalid": 400,
  "digest-invalid": 400,
  "stage-id-invalid": 400,
  "run-id-invalid": 400,
  "scope-invalid": 400,
  "invocation-id-invalid": 400,
  "bundle-id-invalid": 400,
  "revision-invalid": 400,
  "in-progress": 409,
  unresolved: 409,
  reconciled: 409,
  "run-not-found": 404,
  "node-shutting-down": 503,
  "not-ready": 503,
  "internal-error": 500,
  // the operator console (DESIGN.md "Operator console")
  "login-link-invalid": 401,
  "csrf-token-invalid": 403,
  "origin-refused": 403,
  "console-not-built": 404,
  "console-asset-not-found": 404,
  "console-logins-exhausted": 429,
} as const satisfies Record<string, number>;
export type HttpErrorCode = keyof typeof HTTP_ERROR_CODES;

/**
 * Body schema violations are `<prefix>-<rule>`: the prefix names the body (`invoke-request`,
 * `review`, `materialization`; `manifest` bodies are checked by the delivery module's parser,
 * whose `manifest-*` codes follow the same scheme), the rule what broke.
 */
export const BODY_CODE_PREFIXES = ["request", "invoke-request", "review", "materialization", "signature", "session"] as const;
export const BODY_CODE_RULES = ["unknown-field", "missing-field", "field-type", "field-invalid"] as const;
export type BodyCodePrefix = (typeof BODY_CODE_PREFIXES)[number];
export type BodyCodeRule = (typeof BODY_CODE_RULES)[number];
/**
 * Every body violation code, as a type: the error-code reference (scripts/error-codes.mjs) reads
 * the codes of a problem from its `code`'s type, so each combination is listed without being
 * written out by hand.
 */
export type BodyErrorCode = `${BodyCodePrefix}-${BodyCodeRule}`;

/** The code of a body schema violation: always answered 400, like every schema violation. */
export function bodyErrorCode(prefix: BodyCodePrefix, rule: BodyCodeRule): BodyErrorCode {
  return `${prefix}-${rule}`;
}
