import { test } from "node:test";
import assert from "node:assert/strict";
import { ValidationError, WardenError } from "../../src/core/errors.js";
import { checkContractAtBegin, checkContractContent, inferKind } from "../../src/delivery/contract/check.js";
import { parseMcpDeclaration } from "../../src/delivery/contract/mcp.js";
import type { Component } from "../../src/delivery/manifest-types.js";
import { buildManifest, reviewToolsFiles, type FileSpec } from "./manifest-fixtures.js";

/** Builds the bundle, then runs begin and content checks as a node would. */
async function check(files: readonly FileSpec[]): Promise<void> {
  const { manifest, blobs } = buildManifest(files);
  checkContractAtBegin(manifest);
  await checkContractContent(manifest, async (c: Component) => blobs.get(c.blob.digest)!);
}

function withFile(file: FileSpec): FileSpec[] {
  return [...reviewToolsFiles().filter((f) => f.path !== file.path), file];
}

async function assertRefused(
  files: readonly FileSpec[],
  code: string,
  details: Record<string, unknown> = {},
  status?: number,
): Promise<void> {
  await assert.rejects(check(files), (error: unknown) => {
    assert.ok(error instanceof WardenError, `expected a WardenError, got ${String(error)}`);
    assert.equal(error.code, code, `wrong code; message: ${error.message}`);
    assert.ok(error instanceof ValidationError);
    for (const [k, v] of Object.entries(details)) assert.equal(error.details[k], v, `details.${k}`);
    if (status !== undefined) assert.equal(error.status, status);
    return true;
  });
}

/** Begin-time rules must fire without reading a single byte. */
function assertRefusedAtBegin(files: readonly FileSpec[], code: string, details: Record<string, unknown> = {}): void {
  const { manifest } = buildManifest(files);
  assert.throws(() => checkContractAtBegin(manifest), (error: unknown) => {
    assert.ok(error instanceof ValidationError, String(error));
    assert.equal(error.code, code, error.message);
    assert.equal(error.status, 400);
    for (const [k, v] of Object.entries(details)) assert.equal(error.details[k], v, `details.${k}`);
    return true;
  });
}

test("the review-tools bundle satisfies the contract; kinds are inferred from paths", async () => {
  await check(reviewToolsFiles());
  assert.equal(inferKind("skills/review/SKILL.md"), "skill");
  assert.equal(inferKind("skills/review/references/a.md"), "skill");
  assert.equal(inferKind(".claude-plugin/plugin.json"), "plugin-manifest");
  assert.equal(inferKind("plugin.json"), "plugin-manifest");
  assert.equal(inferKind(".mcp.json"), "mcp-declaration");
  assert.equal(inferKind("skills/README.md"), "file");
  assert.equal(inferKind("docs/plugin.json"), "file");
});

test("executable extensions are refused at begin, in any case", () => {
  for (const path of ["tools/run.SH", "x.py", "lib/a.Mjs", "setup.exe", "b.cjs", "c.ps1", "d.fish", ".bash"]) {
    assertRefusedAtBegin(withFile({ path, content: "text" }), "contract-executable-extension", { path });
  }
});

test("files that are not executable by extension pass begin", () => {
  for (const path of ["notes.shell", "a.json", "b.ts", "run.sh.md", "Makefile"]) {
    assert.doesNotThrow(() => checkContractAtBegin(buildManifest(withFile({ path, content: "x" })).manifest));
  }
});

test("executable magic bytes are refused on content (#!, MZ, ELF, Mach-O, fat, Java class)", async () => {
  const magics: Array<[string, number[]]> = [
    ["shebang", [0x23, 0x21, 0x2f]],
    ["MZ", [0x4d, 0x5a, 0x90, 0]],
    ["ELF", [0x7f, 0x45, 0x4c, 0x46, 2]],
    ["Mach-O 32", [0xfe, 0xed, 0xfa, 0xce]],
    ["Mach-O 64", [0xfe, 0xed, 0xfa, 0xcf]],
    ["Mach-O 32 LE", [0xce, 0xfa, 0xed, 0xfe]],
    ["Mach-O 64 LE", [0xcf, 0xfa, 0xed, 0xfe]],
    ["fat / Java class", [0xca, 0xfe, 0xba, 0xbe, 0, 0]],
    ["fat LE", [0xbe, 0xba, 0xfe, 0xca]],
  ];
  for (const [, bytes] of magics) {
    await assertRefused(
      withFile({ path: "notes/data.bin", content: Uint8Array.from(bytes) }),
      "contract-executable-content",
      { path: "notes/data.bin" },
      422,
    );
  }
  await check(withFile({ path: "notes/data.bin", content: Uint8Array.from([0x7f, 0x45, 0x4c]) })); // too short for ELF
  await check(withFile({ path: "notes/data.bin", content: "# not #! at the start\n" }));
});

test("a SKILL.md whose bytes are a script is refused as executable before its frontmatter is read", async () => {
  await assertRefused(
    withFile({ path: "skills/review/SKILL.md", content: "#!/bin/sh\n---\nname: review\n" }),
    "contract-executable-content",
  );
});

test("kinds that contradict their paths are refused at begin", () => {
  const cases: FileSpec[] = [
    { path: "docs/x.md", content: "x", kind: "skill" },
    { path: "skills/x.md", content: "x", kind: "skill" },
    { path: ".mcp.json", content: "{}", kind: "file" },
    { path: "mcp.json", content: "{}", kind: "mcp-declaration" },
    { path: "docs/plugin.json", content: "{}", kind: "plugin-manifest" },
    { path: "plugin.json", content: "{}", kind: "file" },
    { path: ".claude-plugin/plugin.json", content: "{}", kind: "template" },
    { path: "skills/review/SKILL.md", content: "x", kind: "prompt" },
  ];
  for (const file of cases) {
    assertRefusedAtBegin(withFile(file), "contract-kind-path-mismatch", { path: file.path, field: "kind" });
  }
});

test("other files in a skill directory may carry other kinds", async () => {
  await check(withFile({ path: "skills/review/templates/pr.md", content: "template", kind: "template" }));
});

test("skill directory names follow the Agent Skills name rule", () => {
  for (const name of ["Review", "a--b", "-a", "a-", "a_b", "a.b", "x".repeat(65), "\u00E4"]) {
    const path = `skills/${name}/SKILL.md`;
    assertRefusedAtBegin(
      withFile({ path, content: `---\nname: ${name}\ndescription: d\n---\n` }),
      "contract-skill-name",
      { path },
    );
  }
  const longest = buildManifest([{ path: `skills/${"x".repeat(64)}/SKILL.md`, content: "" }]).manifest;
  assert.doesNotThrow(() => checkContractAtBegin(longest));
});

test("every skills/<name>/ directory needs its SKILL.md", () => {
  assertRefusedAtBegin(
    [{ path: "skills/lint/notes.md", content: "x" }],
    "contract-skill-missing-skill-md",
    { path: "skills/lint/notes.md" },
  );
  // skill.md in lower case is not SKILL.md
  assertRefusedAtBegin([{ path: "skills/lint/skill.md", content: "x" }], "contract-skill-missing-skill-md");
});

function skill(frontmatter: string, body = "Body.\n"): FileSpec[] {
  return withFile({ path: "skills/review/SKILL.md", content: `---\n${frontmatter}\n---\n${body}` });
}

test("SKILL.md frontmatter: missing, unterminated, invalid YAML, not a mapping → contract-skill-frontmatter", async () => {
  const where = { path: "skills/review/SKILL.md" };
  await assertRefused(
    withFile({ path: "skills/review/SKILL.md", content: "# Review\nname: review\n" }),
    "contract-skill-frontmatter",
    where,
    422,
  );
  await assertRefused(
    withFile({ path: "skills/review/SKILL.md", content: "---\nname: review\ndescription: d\n" }),
    "contract-skill-frontmatter",
    where,
  );
  await assertRefused(skill("name: review\ndescription: [unclosed"), "contract-skill-frontmatter", where);
  await assertRefused(skill("name: review\nname: review\ndescription: d"), "contract-skill-frontmatter", where);
  await assertRefused(skill("- name\n- review"), "contract-skill-frontmatter", where);
  await assertRefused(skill("just a string"), "contract-skill-frontmatter", where);
});

test("SKILL.md frontmatter: an alias bomb is refused, not expanded", async () => {
  const lines = ["name: review", "description: d", "a0: &a0 [x, x, x, x, x, x, x, x]"];
  for (let i = 1; i < 12; i++) lines.push(`a${i}: &a${i} [${Array(8).fill(`*a${i - 1}`).join(", ")}]`);
  await assertRefused(skill(lines.join("\n")), "contract-skill-frontmatter");
});

test("SKILL.md name must equal the directory name", async () => {
  await assertRefused(skill("name: reviewer\ndescription: d"), "contract-skill-name-mismatch", { field: "name" }, 422);
  await assertRefused(skill("description: d"), "contract-skill-name-mismatch", { field: "name" });
  await assertRefused(skill("name: Review\ndescription: d"), "contract-skill-name-mismatch");
  await assertRefused(skill("name: [review]\ndescription: d"), "contract-skill-name-mismatch");
});

test("SKILL.md description: 1–1024 characters", async () => {
  await assertRefused(skill("name: review"), "contract-skill-description", { field: "description" }, 422);
  await assertRefused(skill("name: review\ndescription: ''"), "contract-skill-description");
  await assertRefused(skill("name: review\ndescription: '   '"), "contract-skill-description");
  await assertRefused(skill("name: review\ndescription: 42"), "contract-skill-description");
  await assertRefused(skill(`name: review\ndescription: ${"d".repeat(1025)}`), "contract-skill-description");
  await check(skill(`name: review\ndescription: ${"d".repeat(1024)}`));
  await check(skill(`name: review\ndescription: ${"\u00E9".repeat(1024)}`)); // characters, not bytes
  await check(skill(`name: review\ndescription: ${"\u{1F600}".repeat(1024)}`)); // code points, not UTF-16 units
});

test("SKILL.md optional keys of the specification are type-checked; other keys pass", async () => {
  await check(skill("name: review\ndescription: d\nlicense: MIT\ncompatibility: node >= 20\nallowed-tools: Read Grep\nmetadata:\n  author: me\nargument-hint: '[file]'\nmodel: sonnet"));
  await check(skill("name: review\ndescription: d\nallowed-tools: [Read, Grep]"));
  await check(withFile({ path: "skills/review/SKILL.md", content: "\uFEFF---\r\nname: review\r\ndescription: d\r\n---\r\nCRLF body\r\n" }));
  const bad: Array<[string, string]> = [
    ["license: 5", "license"],
    ["compatibility: ''", "compatibility"],
    [`compatibility: ${"c".repeat(501)}`, "compatibility"],
    ["metadata:\n  version: 1", "metadata"],
    ["metadata: text", "metadata"],
    ["allowed-tools: 3", "allowed-tools"],
    ["allowed-tools: [Read, 3]", "allowed-tools"],
  ];
  for (const [line, field] of bad) {
    await assertRefused(skill(`name: review\ndescription: d\n${line}`), "contract-skill-frontmatter", { field });
  }
});

test("SKILL.md must be UTF-8", async () => {
  const bytes = Uint8Array.from([...new TextEncoder().encode("---\nname: review\ndescription: "), 0xff, 0x0a, ...new TextEncoder().encode("---\n")]);
  await assertRefused(withFile({ path: "skills/review/SKILL.md", content: bytes }), "contract-not-utf8", {}, 422);
});

test("plugin manifests: JSON object with a kebab-case name", async () => {
  for (const path of [".claude-plugin/plugin.json", "plugin.json"]) {
    await assertRefused(withFile({ path, content: "{name: review}" }), "contract-json-syntax", { path }, 422);
    await assertRefused(withFile({ path, content: "[]" }), "contract-plugin-manifest", { path });
    await assertRefused(withFile({ path, content: "null" }), "contract-plugin-manifest", { path });
    await assertRefused(withFile({ path, content: "{}" }), "contract-plugin-manifest-name", { path, field: "name" });
    for (const name of ["Review Tools", "review_tools", "-review", "review--tools", "", 7]) {
      await assertRefused(
        withFile({ path, content: JSON.stringify({ name }) }),
        "contract-plugin-manifest-name",
        { path },
      );
    }
  }
  await check(withFile({ path: "plugin.json", content: '{"name":"a1-b2","version":"2","commands":["./x"]}' }));
});

function mcp(servers: unknown): FileSpec[] {
  return withFile({ path: ".mcp.json", content: JSON.stringify(servers) });
}

test(".mcp.json: stdio and http/sse servers in the allowed shape pass", async () => {
  await check(
    mcp({
      mcpServers: {
        local: { command: "node", args: ["server.mjs"], env: { LEVEL: "debug" } },
        typed: { type: "stdio", command: "x" },
        remote: { type: "http", url: "https://mcp.example.com/v1", headers: { Authorization: "Bearer ${TOKEN}" } },
        events: { type: "sse", url: "http://localhost:8080/sse" },
      },
    }),
  );
  await check(mcp({ mcpServers: {} }));
});

test(".mcp.json: every shape violation is refused with the field that broke it", async () => {
  const cases: Array<[unknown, string | undefined]> = [
    [[], undefined],
    [{}, "mcpServers"],
    [{ mcpServers: [] }, "mcpServers"],
    [{ mcpServers: {}, extra: 1 }, "extra"],
    [{ mcpServers: { s: "node" } }, "mcpServers.s"],
    [{ mcpServers: { s: {} } }, "mcpServers.s.command"],
    [{ mcpServers: { s: { command: "" } } }, "mcpServers.s.command"],
    [{ mcpServers: { s: { command: "x", args: "a b" } } }, "mcpServers.s.args"],
    [{ mcpServers: { s: { command: "x", args: [1] } } }, "mcpServers.s.args"],
    [{ mcpServers: { s: { command: "x", env: { A: 1 } } } }, "mcpServers.s.env"],
    [{ mcpServers: { s: { command: "x", cwd: "/" } } }, "mcpServers.s.cwd"],
    [{ mcpServers: { s: { type: "ws", command: "x" } } }, "mcpServers.s.type"],
    [{ mcpServers: { s: { url: "https://a.example" } } }, "mcpServers.s.type"],
    [{ mcpServers: { s: { type: "http" } } }, "mcpServers.s.url"],
    [{ mcpServers: { s: { type: "http", url: "not a url" } } }, "mcpServers.s.url"],
    [{ mcpServers: { s: { type: "http", url: "ftp://a.example/x" } } }, "mcpServers.s.url"],
    [{ mcpServers: { s: { type: "http", url: "file:///etc/passwd" } } }, "mcpServers.s.url"],
    [{ mcpServers: { s: { type: "sse", url: "https://user:secret@a.example/" } } }, "mcpServers.s.url"],
    [{ mcpServers: { s: { type: "http", url: "https://a.example", headers: ["x"] } } }, "mcpServers.s.headers"],
    [{ mcpServers: { s: { type: "http", url: "https://a.example", command: "x" } } }, "mcpServers.s.command"],
    [{ mcpServers: { "bad name": { command: "x" } } }, "mcpServers.bad name"],
    [{ mcpServers: { _hidden: { command: "x" } } }, "mcpServers._hidden"],
  ];
  for (const [value, field] of cases) {
    await assertRefused(mcp(value), "contract-mcp-declaration", { path: ".mcp.json", field }, 422);
  }
  // "__proto__" from JSON text is an own key, refused as a server name.
  await assertRefused(withFile({ path: ".mcp.json", content: '{"mcpServers":{"__proto__":{"command":"x"}}}' }), "contract-mcp-declaration", {
    field: "mcpServers.__proto__",
  });
  await assertRefused(withFile({ path: ".mcp.json", content: "{" }), "contract-json-syntax", { path: ".mcp.json" });
});

test("parseMcpDeclaration returns the checked servers, typed", () => {
  const bytes = new TextEncoder().encode('{"mcpServers":{"a":{"command":"x","args":["1"]},"b":{"type":"http","url":"https://b.example"}}}');
  const decl = parseMcpDeclaration(bytes, { component: 0, path: ".mcp.json" });
  assert.deepEqual(Object.keys(decl.mcpServers), ["a", "b"]);
  assert.deepEqual(decl.mcpServers.a, { command: "x", args: ["1"] });
  assert.equal(decl.mcpServers.b!.type, "http");
});

test("content checks read each component once, in manifest order", async () => {
  const { manifest, blobs } = buildManifest(reviewToolsFiles());
  const seen: string[] = [];
  await checkContractContent(manifest, async (c) => {
    seen.push(c.relative_path);
    return blobs.get(c.blob.digest)!;
  });
  assert.deepEqual(seen, manifest.components.map((c) => c.relative_path));
});
