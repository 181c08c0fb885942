/**
 * Turns JSON Schema validation errors (TypeBox's, which follow Ajv's shape) into one finding a
 * person can act on: what kind of rule broke and at which field. Shared by the server (request
 * validation) and the configuration loader, so both name failures the same way.
 */
import type { Validator } from "typebox/compile";
import { Settings } from "typebox/system";

export interface SchemaErrorLike {
  readonly keyword: string;
  readonly instancePath: string;
  readonly params?: Readonly<Record<string, unknown>>;
  readonly message?: string;
}

export type SchemaRule = "unknown-field" | "missing-field" | "field-type" | "field-invalid";

export interface SchemaFinding {
  readonly rule: SchemaRule;
  /** dotted path of the offending field ("" for the whole value) */
  readonly field: string;
  readonly message: string;
}

/**
 * How many errors `schemaErrors` collects. TypeBox keeps 8 by default (a bound against values made
 * to produce many), and a union of literals reports one error per literal: the ninth allowed
 * `status` of an invocation list was left out of the list of allowed values a person was shown.
 */
const ERRORS_KEPT = 64;

/**
 * The errors of a value its validator refused, up to ERRORS_KEPT. TypeBox reads its limit from a
 * process-wide setting as it collects, so it is raised for this synchronous call only (what the
 * embedding program set is back before anything else runs); only refused values pay for it.
 */
export function schemaErrors(validator: Validator, value: unknown): ReturnType<Validator["Errors"]> {
  const before = Settings.Get().maxErrors;
  Settings.Set({ maxErrors: ERRORS_KEPT });
  let errors: ReturnType<Validator["Errors"]>;
  try {
    errors = validator.Errors(value);
  } finally {
    Settings.Set({ maxErrors: before });
  }
  return errors.map((error) => {
    // "must not have fewer than 1 characters": TypeBox's words for an empty string (or list).
    if ((error.keyword === "minLength" || error.keyword === "minItems") && error.params.limit === 1) return { ...error, message: "must not be empty" };
    if (error.keyword !== "pattern") return error;
    // "must match pattern ^[!-.0-\[\]-~]{1,128}$" tells a person little; the schema's own
    // description of what it takes ("a UUID") tells them what to send.
    const description = (schemaAt(validator.Type(), error.schemaPath) as { description?: unknown } | undefined)?.description;
    return typeof description === "string" ? { ...error, message: `must be ${description}` } : error;
  });
}

/** The part of a schema a JSON pointer ("#/properties/id") names, if any. */
function schemaAt(schema: unknown, pointer: string): unknown {
  let node = schema;
  for (const part of pointer.split("/").slice(1)) {
    if (typeof node !== "object" || node === null) return undefined;
    node = (node as Record<string, unknown>)[unescaped(part)];
  }
  return node;
}

/** The keyword TypeBox reports for a property that `additionalProperties: false` forbids. */
const SHADOW_KEYWORDS = new Set(["boolean", "anyOf", "oneOf"]);

function fieldOf(pointer: string): string {
  return pointer.split("/").slice(1).map(unescaped).join(".");
}

/** A JSON pointer's part as the name it stands for (RFC 6901: ~1 is '/', ~0 is '~'). */
function unescaped(part: string): string {
  return part.replace(/~1/g, "/").replace(/~0/g, "~");
}

function join(base: string, name: string): string {
  return base === "" ? name : `${base}.${name}`;
}

/** The most telling error: unknown field, then missing field, then the first other one. */
export function schemaFinding(errors: readonly SchemaErrorLike[]): SchemaFinding {
  const unknown = errors.find((e) => e.keyword === "additionalProperties");
  if (unknown !== undefined) {
    const names = unknown.params?.additionalProperties;
    const name = Array.isArray(names) && typeof names[0] === "string" ? names[0] : "?";
    const field = join(fieldOf(unknown.instancePath), name);
    return { rule: "unknown-field", field, message: `unknown field ${JSON.stringify(field)}` };
  }
  const missing = errors.find((e) => e.keyword === "required");
  if (missing !== undefined) {
    const names = missing.params?.requiredProperties ?? missing.params?.missingProperty;
    const name = Array.isArray(names) && typeof names[0] === "string" ? names[0] : typeof names === "string" ? names : "?";
    const field = join(fieldOf(missing.instancePath), name);
    return { rule: "missing-field", field, message: `missing field ${JSON.stringify(field)}` };
  }
  const first = withinUnion(errors, errors.find((e) => !SHADOW_KEYWORDS.has(e.keyword)) ?? errors[0]);
  if (first === undefined) return { rule: "field-invalid", field: "", message: "invalid value" };
  const field = fieldOf(first.instancePath);
  const rule: SchemaRule = first.keyword === "type" ? "field-type" : "field-invalid";
  const where = field === "" ? "value" : JSON.stringify(field);
  const allowed = allowedValues(errors, first.instancePath);
  if (allowed !== undefined) return { rule, field, message: `${where} must be one of ${allowed.map((v) => JSON.stringify(v)).join(", ")}` };
  const types = allowedTypes(errors, first.instancePath);
  if (types !== undefined) return { rule, field, message: `${where} must be ${types.join(" or ")}` };
  return { rule, field, message: `${where} ${first.message ?? "is invalid"}` };
}

/**
 * A union (a provider as a command string, or as an object of settings) reports each branch's
 * failure: the string branch's "must be string" at the field itself comes first, and the object
 * branch's at the member actually wrong below it. A value whose shape chose a branch is told that
 * branch's error: the deepest one below the field, when there is one.
 */
function withinUnion(errors: readonly SchemaErrorLike[], first: SchemaErrorLike | undefined): SchemaErrorLike | undefined {
  if (first === undefined) return undefined;
  let best = first;
  for (const e of errors) {
    if (SHADOW_KEYWORDS.has(e.keyword) || !e.instancePath.startsWith(`${first.instancePath}/`)) continue;
    if (e.instancePath.split("/").length > best.instancePath.split("/").length) best = e;
  }
  return best;
}

/** The types a field may take when each branch of its union wants another ("string or object"). */
function allowedTypes(errors: readonly SchemaErrorLike[], instancePath: string): string[] | undefined {
  const here = errors.filter((e) => e.instancePath === instancePath && !SHADOW_KEYWORDS.has(e.keyword));
  const types = here.map((e) => (e.keyword === "type" ? e.params?.type : undefined));
  if (here.length < 2 || !types.every((t): t is string => typeof t === "string")) return undefined;
  return [...new Set(types)];
}

/**
 * The values a field may take when its schema is a list of them (an enum, or a union of literals,
 * which TypeBox reports as one "must be equal to constant" per literal): a person who typed a
 * wrong one needs to see the right ones. Undefined when anything else is allowed there too.
 */
function allowedValues(errors: readonly SchemaErrorLike[], instancePath: string): unknown[] | undefined {
  // Collection stopped at its limit: the literals past it are missing, and a short list misleads.
  if (errors.length >= ERRORS_KEPT) return undefined;
  const here = errors.filter((e) => e.instancePath === instancePath && !SHADOW_KEYWORDS.has(e.keyword));
  if (here.length === 0 || !here.every((e) => e.keyword === "const" || e.keyword === "enum")) return undefined;
  const values: unknown[] = [];
  for (const e of here) {
    const listed = e.keyword === "enum" ? e.params?.allowedValues : [e.params?.allowedValue];
    if (!Array.isArray(listed) || listed.length === 0) return undefined;
    values.push(...(listed as unknown[]));
  }
  return values;
}
