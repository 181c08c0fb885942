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
