/**
 * docs/errors.md lists every code src/ can answer with: a code thrown (or answered by the HTTP
 * layer, or found by journal verification) that the reference does not list fails here, and so does
 * a reference that is not what `npm run docs:errors` generates today.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { repo } from "../support/node.js";
// @ts-expect-error: a plain .mjs script, without type declarations
import { collectCodes, readCatalog, renderReference } from "../../scripts/error-codes.mjs";

interface Found {
  readonly statuses: Set<number>;
  readonly places: Set<string>;
}
const { codes, unresolved } = collectCodes() as { codes: Map<string, Found>; unresolved: string[] };
const catalog = readCatalog() as Record<string, { means: string; do: string }>;

test("every code thrown in src/ resolves to a literal code and status", () => {
  assert.deepEqual([...new Set(unresolved)], []);
  assert.ok(codes.size > 250, `found ${codes.size} codes`);
});

test("the evaluator follows helpers, subclasses, tables and literal types to each code's status", () => {
  const statuses = (code: string): number[] => [...(codes.get(code)?.statuses ?? [])].sort();
  // AuthError picks its status from its code.
  assert.deepEqual(statuses("unauthorized"), [401]);
  assert.deepEqual(statuses("forbidden"), [403]);
  // contractError(code, …, status = 400) called with and without a status.
  assert.deepEqual(statuses("contract-skill-name"), [400]);
  assert.deepEqual(statuses("contract-json-syntax"), [422]);
  // A code from a table indexed by provider and kind, with a default.
  assert.deepEqual(statuses("kimi-mcp-unsupported"), [422]);
  assert.deepEqual(statuses("provider-component-kind-unsupported"), [422]);
  // storageFull() builds a LimitError with an explicit 507.
  assert.deepEqual(statuses("capacity-exhausted"), [507]);
  // A lifecycle violation, typed as a union of literals, thrown as a ConflictError.
  assert.deepEqual(statuses("journal-not-started"), [409]);
  // A finding of journal verification only: no HTTP status.
  assert.deepEqual(statuses("journal-wrong-prev"), []);
  assert.ok(codes.has("journal-wrong-prev"));
});

test("every body violation code is listed, with the status it is answered with", async () => {
  const { BODY_CODE_PREFIXES, BODY_CODE_RULES } = await import("../../src/api/problem.js");
  for (const prefix of BODY_CODE_PREFIXES) {
    for (const rule of BODY_CODE_RULES) assert.deepEqual([...(codes.get(`${prefix}-${rule}`)?.statuses ?? [])], [400], `${prefix}-${rule}`);
  }
  // The invocation route's schema answers an unknown field before the runner's own check: 400 both.
  assert.deepEqual([...(codes.get("invoke-request-unknown-field")?.statuses ?? [])], [400]);
});

test("a code thrown by a class loaded with await import() is found", () => {
  assert.ok(codes.get("witness-name-invalid")?.places.has("src/cli/commands/witness.ts:43") ?? false, "witness-name-invalid");
  assert.ok(codes.has("witness-log-invalid"), "witness-log-invalid");
});

test("an earlier name of a code is listed with the statuses of the code it names", () => {
  assert.deepEqual([...(codes.get("invalid-invocation-id")?.statuses ?? [])], [400]);
  assert.deepEqual([...(codes.get("invocation-id-invalid")?.places ?? [])].filter((p) => p.startsWith("src/invocations/")).length, 2);
});

test("docs/errors.md lists every code, and is what npm run docs:errors generates", () => {
  const { text, problems } = renderReference(codes, catalog) as { text: string; problems: string[] };
  assert.deepEqual(problems, [], "each code has an entry in docs/errors.yaml, and each entry a code");
  assert.equal(readFileSync(join(repo, "docs", "errors.md"), "utf8"), text, "docs/errors.md is stale: run npm run docs:errors");
  for (const code of codes.keys()) assert.match(text, new RegExp(`^\\| \`${code}\` \\|`, "m"));
});

test("a code with no entry in the catalog is reported, not silently left out", () => {
  const { ["unauthorized"]: _dropped, ...rest } = catalog;
  const { text, problems } = renderReference(codes, rest) as { text: string; problems: string[] };
  assert.deepEqual(problems, ["unauthorized: no entry (means, do) in docs/errors.yaml"]);
  assert.doesNotMatch(text, /`unauthorized`/);
});

test("an earlier name stays accepted: hasCode matches it, and the client reads it as today's code", async () => {
  const { ValidationError } = await import("../../src/core/errors.js");
  const { WardenHttpError } = await import("../../src/client/errors.js");
  const e = new ValidationError("invocation-id-invalid", "invocation id must be a UUID");
  assert.ok(e.hasCode("invalid-invocation-id") && e.hasCode("invocation-id-invalid") && !e.hasCode("invalid-scope"));
  const fromOlderNode = new WardenHttpError(400, { code: "invalid-invocation-id", status: 400, detail: "x" }, { method: "GET", path: "/" });
  assert.equal(fromOlderNode.code, "invocation-id-invalid");
});
