/**
 * Request validation with the TypeBox schemas of src/api (no coercion of bodies; header, param
 * and query strings converted as TypeBox does), and the stable codes of schema violations: a
 * header or a path parameter names its own code (`idempotency-key-missing`, `digest-invalid`);
 * a body violation is `<prefix>-unknown-field`, `-missing-field`, `-field-type` or
 * `-field-invalid`, where the route picks the prefix (e.g. `invoke-request`, `review`).
 */
import type { FastifySchemaCompiler, FastifySchemaValidationError } from "fastify";
import type { TSchema } from "typebox";
import { Compile } from "typebox/compile";
import { Value } from "typebox/value";
import { schemaErrors, schemaFinding, type SchemaErrorLike } from "../api/validation.js";
import type { ProblemSpec } from "./problem-spec.js";
import { bodyErrorCode, type BodyCodePrefix } from "../api/problem.js";

/**
 * TypeBox validation as @fastify/type-provider-typebox does it (bodies as sent; headers, params
 * and query strings converted to the schema's types), except that a value already valid as sent
 * is accepted untouched. Converting it would change nothing (no schema of src/api accepts both a
 * string and what the string converts to), but it allocates a copy on every request, and a
 * replaced `request.headers` makes fastify copy the headers again on every later read.
 */
export const validatorCompiler: FastifySchemaCompiler<TSchema> = ({ schema, httpPart }) => {
  const compiled = Compile(schema);
  if (httpPart === "body") return (value: unknown) => (compiled.Check(value) ? true : { error: schemaErrors(compiled, value) });
  return (value: unknown) => {
    if (compiled.Check(value)) return true;
    // Convert changes the object it is given: the strings as sent are kept aside to compare.
    const sent: unknown = typeof value === "object" && value !== null ? { ...(value as Record<string, unknown>) } : value;
    const converted = convert(schema, value);
    if (converted === undefined) return { error: schemaErrors(compiled, value) };
    if (!compiled.Check(converted)) return { error: schemaErrors(compiled, converted) };
    const altered = alteredField(sent, converted);
    return altered === undefined ? { value: converted } : { error: [altered] };
  };
};

/**
 * The value converted to the schema's types, or undefined when TypeBox cannot convert it: its
 * converter builds a regular expression from each property name, and fastify's wildcard
 * parameter `*` is no pattern (`GET /v1/log/tile/<over 64 characters>` threw a SyntaxError and
 * answered 500). A value that cannot be converted is reported as sent, as the client's fault.
 */
function convert(schema: TSchema, value: unknown): unknown {
  try {
    return Value.Convert(schema, value);
  } catch {
    return undefined;
  }
}

/**
 * A field whose string the conversion changed rather than read: TypeBox takes `limit=1.5` as 1,
 * `limit=true` as 1, and `1e1`, `0x10`, ` 1` or `01` as numbers, where a client that sent them
 * meant something else or made a mistake. A converted value must print back as the very string
 * that was sent.
 */
function alteredField(sent: unknown, converted: unknown): FastifySchemaValidationError | undefined {
  if (typeof sent !== "object" || sent === null || typeof converted !== "object" || converted === null) return undefined;
  for (const [name, value] of Object.entries(converted)) {
    const original = (sent as Record<string, unknown>)[name];
    if (typeof original === "string" && (typeof value === "number" || typeof value === "boolean") && String(value) !== original) {
      const message = `must be written as ${typeof value === "number" ? "a plain decimal number" : "true or false"}`;
      return { keyword: "type", instancePath: `/${name}`, schemaPath: `#/properties/${name}/type`, params: {}, message };
    }
  }
  return undefined;
}

export interface ValidationFailure {
  readonly errors: readonly SchemaErrorLike[];
  /** fastify's httpPart: body, params, querystring, headers */
  readonly context: string;
}

/** Headers with codes of their own: `<header>-missing`, `<header>-invalid`. */
const CODED_HEADERS = ["idempotency-key", "upload-offset"] as const;
type HeaderCode = `${(typeof CODED_HEADERS)[number]}-${"missing" | "invalid"}`;

function codedHeader(field: string): (typeof CODED_HEADERS)[number] | undefined {
  return CODED_HEADERS.find((h) => h === field);
}

const PARAM_CODES: Readonly<Record<string, string>> = {
  digest: "digest-invalid",
  stage_id: "stage-id-invalid",
  run_id: "run-id-invalid",
  scope: "scope-invalid",
  id: "invocation-id-invalid",
  bundle_id: "bundle-id-invalid",
  revision: "revision-invalid",
};

export function validationProblem(failure: ValidationFailure, bodyCodes: BodyCodePrefix = "request"): ProblemSpec {
  const finding = schemaFinding(failure.errors);
  const extra = { field: finding.field };
  switch (failure.context) {
    case "headers": {
      const base = codedHeader(finding.field);
      if (base === undefined) return { status: 400, code: "header-invalid", detail: `header ${finding.message}`, extra };
      const missing = finding.rule === "missing-field";
      const code: HeaderCode = `${base}-${missing ? "missing" : "invalid"}`;
      return {
        status: 400,
        code,
        detail: missing ? `the ${finding.field} header is required` : `the ${finding.field} header is malformed`,
        extra,
      };
    }
    case "params": {
      const code = PARAM_CODES[finding.field] ?? "url-invalid";
      return { status: 400, code, detail: `path parameter ${finding.message}`, extra };
    }
    case "querystring": {
      const unknown = finding.rule === "unknown-field";
      return {
        status: 400,
        code: unknown ? "query-unknown-field" : "query-invalid",
        detail: unknown ? `unknown query parameter ${JSON.stringify(finding.field)}` : `query parameter ${finding.message}`,
        extra,
      };
    }
    default:
      return { status: 400, code: bodyErrorCode(bodyCodes, finding.rule), detail: finding.message, extra };
  }
}
