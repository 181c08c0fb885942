/** Checks untrusted configuration JSON against its schema, naming the broken rule and field. */
import type { TSchema, Static } from "typebox";
import { Compile } from "typebox/compile";
import { ValidationError } from "../core/errors.js";
import { schemaErrors, schemaFinding } from "../api/validation.js";

export function checkAgainst<T extends TSchema>(schema: T, value: unknown, code: string, what: string): Static<T> {
  const compiled = Compile(schema);
  if (compiled.Check(value)) return value as Static<T>;
  const finding = schemaFinding(schemaErrors(compiled, value));
  throw new ValidationError(code, `${what}: ${finding.message}`, { details: { field: finding.field, rule: finding.rule } });
}
