/** Reads untrusted configuration JSON and checks it against its schema, naming the broken rule and field. */
import type { TSchema, Static } from "typebox";
import { Compile } from "typebox/compile";
import { ValidationError } from "../core/errors.js";
import { firstDuplicateName } from "../core/json-duplicates.js";
import { schemaErrors, schemaFinding } from "../api/validation.js";

/**
 * The file's text as a value of its schema. A member named twice in one object is refused, as in
 * a request body: JSON.parse keeps the last, so `{"ws": "read-only", "ws": "full"}` granted what
 * an operator reviewing the file from the top would not read as granted.
 */
export function parseConfigText<T extends TSchema>(schema: T, text: string, code: string, path: string): Static<T> {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    throw new ValidationError(code, `${path}: not valid JSON`);
  }
  const twice = firstDuplicateName(text);
  if (twice !== undefined) {
    throw new ValidationError(code, `${path}: the name ${JSON.stringify(twice)} appears twice in one object; keep one`, { details: { rule: "duplicate-name", name: twice } });
  }
  return checkAgainst(schema, json, code, path);
}

function checkAgainst<T extends TSchema>(schema: T, value: unknown, code: string, what: string): Static<T> {
  const compiled = Compile(schema);
  if (compiled.Check(value)) return value as Static<T>;
  const finding = schemaFinding(schemaErrors(compiled, value));
  throw new ValidationError(code, `${what}: ${finding.message}`, { details: { field: finding.field, rule: finding.rule } });
}
