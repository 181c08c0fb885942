/**
 * What a refused value is told (src/api/validation.ts): every allowed value, or none when TypeBox
 * stopped collecting before the end (never a list cut short); a pattern by its description; the
 * error of the union branch the value chose; and TypeBox's process-wide limit left as found.
 */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { Type } from "typebox";
import { Compile } from "typebox/compile";
import { Settings } from "typebox/system";
import { schemaErrors, schemaFinding } from "../../src/api/validation.js";
import * as api from "../../src/api/index.js";
import * as config from "../../src/config/schema.js";

const literals = (count: number): string[] => Array.from({ length: count }, (_, i) => `v${i}`);
const objectOf = (values: readonly string[]) => Type.Object({ pick: Type.Union(values.map((v) => Type.Literal(v))) }, { additionalProperties: false });

describe("allowed values of a refused field", () => {
  it("lists every literal of a union past TypeBox's default of 8 errors", () => {
    const values = literals(20);
    const finding = schemaFinding(schemaErrors(Compile(objectOf(values)), { pick: "nope" }));
    assert.equal(finding.field, "pick");
    assert.equal(finding.message, `"pick" must be one of ${values.map((v) => `"${v}"`).join(", ")}`);
  });

  it("lists none when the union has more literals than errors are collected", () => {
    const finding = schemaFinding(schemaErrors(Compile(objectOf(literals(100))), { pick: "nope" }));
    assert.equal(finding.field, "pick");
    assert.doesNotMatch(finding.message, /must be one of/);
  });

  it("tells a refused pattern by the schema's description of it, where it has one", () => {
    const schema = Type.Object({ a: Type.String({ pattern: "^x+$", description: "one or more x" }), b: Type.Object({ c: Type.String({ pattern: "^y$" }) }) });
    assert.equal(schemaFinding(schemaErrors(Compile(schema), { a: "z", b: { c: "y" } })).message, '"a" must be one or more x');
    assert.match(schemaFinding(schemaErrors(Compile(schema), { a: "x", b: { c: "z" } })).message, /^"b\.c" must match pattern/);
  });

  it("tells an empty string or list that it must not be empty", () => {
    const compiled = Compile(Type.Object({ a: Type.Optional(Type.String({ minLength: 1 })), b: Type.Optional(Type.Array(Type.String(), { minItems: 1 })), c: Type.Optional(Type.String({ minLength: 2 })) }));
    assert.equal(schemaFinding(schemaErrors(compiled, { a: "" })).message, '"a" must not be empty');
    assert.equal(schemaFinding(schemaErrors(compiled, { b: [] })).message, '"b" must not be empty');
    assert.equal(schemaFinding(schemaErrors(compiled, { c: "x" })).message, '"c" must not have fewer than 2 characters');
  });

  it("tells a value that chose a union's branch the error within that branch", () => {
    const provider = Type.Union([Type.String(), Type.Object({ command: Type.Optional(Type.String()), model: Type.Optional(Type.Object({ url: Type.String() })) }, { additionalProperties: false })]);
    const compiled = Compile(Type.Object({ claude: provider }));
    const told = (value: unknown): string => schemaFinding(schemaErrors(compiled, value)).message;
    assert.equal(told({ claude: { command: 5 } }), '"claude.command" must be string');
    assert.equal(told({ claude: { model: { url: 3 } } }), '"claude.model.url" must be string');
    assert.equal(told({ claude: 5 }), '"claude" must be string or object');
    assert.equal(told({ claude: { comand: "x" } }), 'unknown field "claude.comand"');
  });

  it("leaves TypeBox's process-wide limit as it found it, even when collecting throws", () => {
    const before = Settings.Get().maxErrors;
    schemaErrors(Compile(objectOf(literals(3))), { pick: 1 });
    assert.equal(Settings.Get().maxErrors, before);
    const failing = (): never => {
      throw new Error("boom");
    };
    const throwing = { Errors: failing } as unknown as Parameters<typeof schemaErrors>[0];
    assert.throws(() => schemaErrors(throwing, {}), /boom/);
    assert.equal(Settings.Get().maxErrors, before);
  });

  it("every pattern of the API's and the configuration's schemas has a description to be told by", () => {
    const undescribed: string[] = [];
    const seen = new Set<object>();
    const walk = (node: unknown, where: string): void => {
      if (typeof node !== "object" || node === null || seen.has(node)) return;
      seen.add(node);
      const record = node as Record<string, unknown>;
      if (typeof record.pattern === "string" && typeof record.description !== "string") undescribed.push(`${where}: ${record.pattern}`);
      for (const [key, value] of Object.entries(record)) walk(value, `${where}/${key}`);
    };
    for (const [name, value] of [...Object.entries(api), ...Object.entries(config)]) walk(value, name);
    assert.ok(seen.size > 500, `walked ${seen.size} schema nodes: the exports were not found`);
    assert.deepEqual(undescribed, []);
  });
});
