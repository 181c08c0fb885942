import { test, after } from "node:test";
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as net from "node:net";
import * as os from "node:os";
import * as path from "node:path";
import { execFileSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import { IntegrityError, LimitError, ValidationError, WardenError } from "../../src/core/errors.js";
import { sha256Digest } from "../../src/core/digest.js";
import { resolveLimits, UNITS } from "../../src/core/limits.js";
import { bundleDigestOf } from "../../src/delivery/manifest-types.js";
import { parseManifest } from "../../src/delivery/manifest.js";
import { compileDirectory, readCompiledFile, type CompileOptions } from "../../src/delivery/compile/directory.js";
import { readStable } from "../../src/delivery/compile/read.js";

const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const FIXTURES = path.join(REPO, "test/fixtures/bundles");
const OPTIONS: CompileOptions = { bundleId: "review-tools", revision: "r1" };

const scratch = fs.mkdtempSync(path.join(os.tmpdir(), "warden-compile-"));
after(() => fs.rmSync(scratch, { recursive: true, force: true }));
let counter = 0;

/** A fresh copy of a fixture bundle (or an empty directory) that a test may change. */
function workdir(fixture?: string): string {
  const dir = path.join(scratch, `case-${++counter}`);
  if (fixture === undefined) fs.mkdirSync(dir);
  else fs.cpSync(path.join(FIXTURES, fixture), dir, { recursive: true });
  return dir;
}

function write(dir: string, relative: string, content: string | Uint8Array): string {
  const file = path.join(dir, relative);
  fs.mkdirSync(path.dirname(file), { recursive: true });
  fs.writeFileSync(file, content);
  return file;
}

async function assertRefused(
  promise: Promise<unknown>,
  code: string,
  details: Record<string, unknown> = {},
  cls: typeof ValidationError | typeof LimitError | typeof IntegrityError = ValidationError,
): Promise<void> {
  await assert.rejects(promise, (error: unknown) => {
    assert.ok(error instanceof WardenError, `expected a WardenError, got ${String(error)}`);
    assert.equal(error.code, code, `wrong code; message: ${error.message}`);
    assert.ok(error instanceof cls, `expected ${cls.name}, got ${error.name}`);
    for (const [k, v] of Object.entries(details)) assert.equal(error.details[k], v, `details.${k}`);
    return true;
  });
}

/** Files of `dir` as the compiler should see them, for an independent expectation. */
function expectedFiles(dir: string, paths: readonly string[]): Array<{ path: string; content: Buffer }> {
  return paths.map((p) => ({ path: p, content: fs.readFileSync(path.join(dir, p)) }));
}

test("the review-tools fixture compiles to the expected manifest: order, kinds, digests", async () => {
  const dir = path.join(FIXTURES, "review-tools");
  const compiled = await compileDirectory(dir, OPTIONS);
  const expected: Array<[string, string]> = [
    [".claude-plugin/plugin.json", "plugin-manifest"],
    [".mcp.json", "mcp-declaration"],
    ["README.md", "file"],
    ["plugin.json", "plugin-manifest"],
    ["skills/review/SKILL.md", "skill"],
    ["skills/review/references/checklist.md", "skill"],
    ["skills/summarize/SKILL.md", "skill"],
  ];
  const m = compiled.manifest;
  assert.deepEqual(m.components.map((c) => [c.relative_path, c.kind]), expected);
  assert.ok(m.components.every((c) => c.scope === "session"));
  const files = expectedFiles(dir, expected.map(([p]) => p));
  m.components.forEach((c, i) => {
    assert.equal(c.blob.digest, sha256Digest(files[i]!.content));
    assert.equal(c.blob.byte_len, files[i]!.content.byteLength);
  });
  assert.equal(m.bundle_digest, bundleDigestOf(files));
  assert.equal(m.components[4]!.blob.byte_len, 57, "the SKILL.md of DESIGN.md's example");
  assert.deepEqual(parseManifest(JSON.parse(JSON.stringify(m))), m);
  assert.deepEqual(compiled.files.map((f) => f.absolutePath), expected.map(([p]) => path.join(dir, p)));
  assert.deepEqual(compiled.skipped, []);
  for (const f of compiled.files) {
    assert.deepEqual(Buffer.from(await readCompiledFile(f)), fs.readFileSync(f.absolutePath));
  }
});

test("DESIGN.md vector: a directory holding definition.md = \"review\\n\"", async () => {
  const options: CompileOptions = { ...OPTIONS, kinds: { "definition.md": "agent-definition" }, scope: "workspace" };
  const compiled = await compileDirectory(path.join(FIXTURES, "vector"), options);
  assert.equal(
    compiled.manifest.bundle_digest,
    "sha256:ba71773aa731bdc2e460cbde965db223f9fa8d499a1b97acc8ceeb376dcc432a",
  );
  assert.deepEqual(compiled.manifest.components, [
    {
      kind: "agent-definition",
      scope: "workspace",
      relative_path: "definition.md",
      blob: { digest: "sha256:452b7b642e325cb2b5b20ac28536ada8b0ad312217a98ab7ff23330603b63126", byte_len: 7 },
    },
  ]);
  assert.equal(
    compiled.manifest.manifest_digest,
    "sha256:4e77a5f5324e4b9fb5550532941bdacc8819005a186a571991ddec21982e8db3",
  );
});

test("examples/review-bundle compiles: two skills, a plugin manifest, stdio + http MCP servers", async () => {
  const example = path.join(REPO, "examples/review-bundle");
  const compiled = await compileDirectory(example, { bundleId: "review-bundle", revision: "r1" });
  assert.deepEqual(
    compiled.manifest.components.map((c) => [c.relative_path, c.kind]),
    [
      [".claude-plugin/plugin.json", "plugin-manifest"],
      [".mcp.json", "mcp-declaration"],
      ["README.md", "file"],
      ["skills/code-review/SKILL.md", "skill"],
      ["skills/code-review/checklist.md", "skill"],
      ["skills/commit-message/SKILL.md", "skill"],
    ],
  );
  const mcpText = fs.readFileSync(path.join(example, ".mcp.json"), "utf8");
  const mcp = JSON.parse(mcpText) as { mcpServers: Record<string, { type?: string }> };
  assert.deepEqual(Object.values(mcp.mcpServers).map((s) => s.type ?? "stdio").sort(), ["http", "stdio"]);
});

test("kinds can be overridden per path; an override naming no file or breaking the contract is refused", async () => {
  const dir = path.join(FIXTURES, "review-tools");
  const options: CompileOptions = { ...OPTIONS, kinds: { "README.md": "instructions" }, scope: "workspace" };
  const compiled = await compileDirectory(dir, options);
  assert.equal(compiled.manifest.components.find((c) => c.relative_path === "README.md")!.kind, "instructions");
  assert.ok(compiled.manifest.components.every((c) => c.scope === "workspace"));
  await assertRefused(compileDirectory(dir, { ...OPTIONS, kinds: { "READ.md": "prompt" } }), "compile-kind-override-unknown-path", {
    path: "READ.md",
  });
  await assertRefused(
    compileDirectory(dir, { ...OPTIONS, kinds: { "skills/review/SKILL.md": "file" } }),
    "contract-kind-path-mismatch",
  );
  await assertRefused(
    compileDirectory(dir, { ...OPTIONS, kinds: { "README.md": "script" as never } }),
    "manifest-kind-unknown",
  );
  await assertRefused(compileDirectory(dir, { ...OPTIONS, scope: "global" as never }), "manifest-scope-unknown");
  await assertRefused(compileDirectory(dir, { ...OPTIONS, bundleId: "a/b" }), "manifest-identifier-separator");
});

test("a symlink is refused, to a file or to a directory, even pointing inside the tree", async () => {
  const a = workdir("review-tools");
  fs.symlinkSync(path.join(a, "README.md"), path.join(a, "LINK.md"));
  await assertRefused(compileDirectory(a, OPTIONS), "compile-symlink", { path: "LINK.md" });
  const b = workdir("review-tools");
  fs.symlinkSync("/etc", path.join(b, "skills", "review", "etc"));
  await assertRefused(compileDirectory(b, OPTIONS), "compile-symlink", { path: "skills/review/etc" });
});

test("the root itself may be reached through a symlink (as macOS's /tmp is)", async () => {
  const dir = workdir("review-tools");
  const link = path.join(scratch, `root-link-${++counter}`);
  fs.symlinkSync(dir, link);
  const compiled = await compileDirectory(link, OPTIONS);
  assert.equal(compiled.manifest.components.length, 7);
});

test("a fifo and a socket are refused as special files", async () => {
  const a = workdir("review-tools");
  execFileSync("mkfifo", [path.join(a, "pipe")]);
  await assertRefused(compileDirectory(a, OPTIONS), "compile-special-file", { path: "pipe", type: "fifo" });

  const b = workdir("review-tools");
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(path.join(b, "sock"), resolve));
  try {
    await assertRefused(compileDirectory(b, OPTIONS), "compile-special-file", { path: "sock", type: "socket" });
  } finally {
    await new Promise((resolve) => server.close(resolve));
  }
});

/** Compiles a copy of review-tools, calling `change` on README.md between its stat and its read. */
async function assertChangedWhileRead(change: (absolutePath: string) => void): Promise<void> {
  const dir = workdir("review-tools");
  const hooks = {
    beforeRead: ({ relativePath, absolutePath }: { relativePath: string; absolutePath: string }) => {
      if (relativePath === "README.md") change(absolutePath);
    },
  };
  await assertRefused(
    compileDirectory(dir, { ...OPTIONS, hooks }),
    "compile-file-changed",
    { path: "README.md" },
    IntegrityError,
  );
}

test("a file changing while it is read is refused (grown, or replaced by another inode)", async () => {
  await assertChangedWhileRead((file) => fs.appendFileSync(file, "appended while read\n"));
  await assertChangedWhileRead((file) => {
    fs.writeFileSync(`${file}.new`, fs.readFileSync(file));
    fs.renameSync(`${file}.new`, file); // same bytes, new inode
  });
});

test("a file changed between the walk and its read is refused", async () => {
  const dir = workdir("review-tools");
  let first = true;
  await assertRefused(
    compileDirectory(dir, {
      ...OPTIONS,
      hooks: {
        beforeRead: () => {
          // While the first file is read, a later one (already walked) changes size.
          if (first) fs.appendFileSync(path.join(dir, "skills/summarize/SKILL.md"), "more\n");
          first = false;
        },
      },
    }),
    "compile-file-changed", { path: "skills/summarize/SKILL.md" }, IntegrityError,
  );
});

test("a directory swapped for a symlink during the walk cannot bring an outside file in", { skip: process.platform !== "linux" && "checks /proc/self/fd" }, async () => {
  // What the walk records when `d` is swapped after its parent was listed: the lstat of d/secret.md
  // goes through the swapped-in link, and names the outside file. The read must refuse it.
  const root = fs.mkdtempSync(path.join(scratch, "swap-"));
  const outside = fs.mkdtempSync(path.join(scratch, "outside-"));
  fs.writeFileSync(path.join(outside, "secret.md"), "not for the bundle\n");
  const tree = fs.realpathSync(root);
  fs.symlinkSync(outside, path.join(tree, "d"));
  const walked = path.join(tree, "d", "secret.md");
  const stat = fs.lstatSync(walked, { bigint: true });
  await assert.rejects(readStable(walked, "d/secret.md", stat), (e: unknown) => e instanceof IntegrityError && e.code === "compile-file-changed");
  // The same read of a file that is where its path says is accepted.
  fs.rmSync(path.join(tree, "d"));
  fs.mkdirSync(path.join(tree, "d"));
  fs.writeFileSync(walked, "in the tree\n");
  assert.equal((await readStable(walked, "d/secret.md", fs.lstatSync(walked, { bigint: true }))).toString(), "in the tree\n");
});

test("a read into a slot of a shared slab stays in its slot: a file that grew is refused, its neighbours' bytes untouched", async () => {
  const dir = fs.mkdtempSync(path.join(scratch, "slot-"));
  const file = path.join(dir, "grows.md");
  fs.writeFileSync(file, "12345678");
  const stat = fs.lstatSync(file, { bigint: true });
  const slab = new Uint8Array(new SharedArrayBuffer(32)).fill(0xee);
  const slot = new Uint8Array(slab.buffer, 4, 9);
  // It grows by far more than the spare byte after its walk.
  const grow = (): void => fs.appendFileSync(file, "x".repeat(4096));
  await assert.rejects(readStable(file, "grows.md", stat, { into: slot, beforeRead: grow }), (e: unknown) => e instanceof IntegrityError && e.code === "compile-file-changed");
  assert.deepEqual([...slab.subarray(0, 4)], [0xee, 0xee, 0xee, 0xee], "nothing was read before the slot");
  assert.deepEqual([...slab.subarray(13)], new Array(19).fill(0xee), "nothing was read past the slot");
  // A file that keeps its walked identity is read into its slot, and the result is a view on it.
  fs.writeFileSync(file, "abcdefgh");
  const read = await readStable(file, "grows.md", fs.lstatSync(file, { bigint: true }), { into: slot });
  assert.equal(read.toString(), "abcdefgh");
  assert.equal(read.buffer, slab.buffer);
  assert.equal(read.byteOffset, 4);
  // A slot of any other size than the walked one and its spare byte is a caller's error.
  await assert.rejects(readStable(file, "grows.md", fs.lstatSync(file, { bigint: true }), { into: new Uint8Array(8) }), RangeError);
});

test("secrets are refused: .env (file or dir, any case, .env.*), .ssh, .aws", async () => {
  for (const [relative, reported] of [
    [".env", ".env"],
    [".ENV", ".ENV"],
    [".env.local", ".env.local"],
    ["config/.env/x", "config/.env"],
    [".ssh/id_ed25519", ".ssh"],
    ["home/.aws/credentials", "home/.aws"],
  ] as const) {
    const dir = workdir("review-tools");
    write(dir, relative, "SECRET=1\n");
    await assertRefused(compileDirectory(dir, OPTIONS), "compile-secret-path", { path: reported });
  }
});

test(".git and node_modules are skipped, reported, and never even looked into", async () => {
  const dir = workdir("review-tools");
  write(dir, ".git/config", "[core]\n");
  write(dir, "skills/review/node_modules/x/index.js", "module.exports = 1\n");
  // A fifo inside would be refused if the walk entered these directories.
  execFileSync("mkfifo", [path.join(dir, ".git", "pipe")]);
  fs.symlinkSync("/etc", path.join(dir, "skills/review/node_modules/etc"));
  const compiled = await compileDirectory(dir, OPTIONS);
  assert.deepEqual(compiled.skipped, [".git", "skills/review/node_modules"]);
  assert.equal(compiled.manifest.components.length, 7);
  const paths = compiled.manifest.components.map((c) => c.relative_path);
  assert.ok(paths.every((p) => !p.includes(".git") && !p.includes("node_modules")));
});

test("executables are refused: by extension before any read, by magic bytes after", async () => {
  const reads: string[] = [];
  const hooks = { beforeRead: ({ relativePath }: { relativePath: string }) => void reads.push(relativePath) };
  const a = workdir("review-tools");
  write(a, "tools/install.sh", "echo hi\n");
  await assertRefused(
    compileDirectory(a, { ...OPTIONS, hooks }),
    "contract-executable-extension",
    { path: "tools/install.sh" },
  );
  assert.deepEqual(reads, [], "refused before reading any file");

  const b = workdir("review-tools");
  write(b, "notes.md", "#!/bin/sh\nrm -rf /\n");
  await assertRefused(compileDirectory(b, OPTIONS), "contract-executable-content", { path: "notes.md" });
  const c = workdir("review-tools");
  write(c, "data.bin", Uint8Array.from([0x7f, 0x45, 0x4c, 0x46, 2, 1, 1, 0]));
  await assertRefused(compileDirectory(c, OPTIONS), "contract-executable-content", { path: "data.bin" });
});

test("the executable mode bit alone does not refuse a file (a manifest carries no mode)", async () => {
  const dir = workdir("review-tools");
  fs.chmodSync(path.join(dir, "README.md"), 0o755);
  const compiled = await compileDirectory(dir, OPTIONS);
  assert.equal(compiled.manifest.components.length, 7);
});

test("oversized directories are refused before any file is read", async () => {
  const reads: string[] = [];
  const hooks = { beforeRead: ({ relativePath }: { relativePath: string }) => void reads.push(relativePath) };

  const big = workdir("review-tools");
  write(big, "big.bin", Buffer.alloc(UNITS.MiB + 1, 0x61));
  await assertRefused(
    compileDirectory(big, { ...OPTIONS, hooks }),
    "manifest-file-too-large",
    { path: "big.bin" },
    LimitError,
  );

  const many = workdir();
  write(many, "skills/x/SKILL.md", "---\nname: x\ndescription: d\n---\n");
  for (let i = 0; i < 128; i++) write(many, `files/${String(i).padStart(3, "0")}.md`, `${i}\n`);
  await assertRefused(compileDirectory(many, { ...OPTIONS, hooks }), "manifest-too-many-components", {}, LimitError);

  const total = workdir("review-tools");
  await assertRefused(
    compileDirectory(total, { ...OPTIONS, hooks, limits: resolveLimits({ bundleBytes: 300 }) }),
    "manifest-bundle-too-large",
    {},
    LimitError,
  );

  const dirs = workdir();
  write(dirs, "z.md", "one file\n");
  for (let i = 0; i < 9; i++) fs.mkdirSync(path.join(dirs, `empty-${i}`));
  await assertRefused(
    compileDirectory(dirs, { ...OPTIONS, hooks, limits: resolveLimits({ bundleComponents: 2 }) }),
    "compile-too-many-directories",
    {},
    LimitError,
  );
  assert.deepEqual(reads, []);

  const exact = workdir();
  write(exact, "exact.bin", Buffer.alloc(UNITS.MiB, 0x61));
  assert.equal((await compileDirectory(exact, OPTIONS)).manifest.components[0]!.blob.byte_len, UNITS.MiB);
});

test("path rules apply to file names on disk", async () => {
  for (const [name, code] of [
    ["con.txt", "manifest-path-device-name"],
    ["a:b.md", "manifest-path-reserved-char"],
    ["trailing.", "manifest-path-trailing-dot-or-space"],
    ["tab\there.md", "manifest-path-control-char"],
    ["back\\slash.md", "manifest-path-backslash"],
  ] as const) {
    const dir = workdir("review-tools");
    write(dir, `docs/${name}`, "x\n");
    await assertRefused(compileDirectory(dir, OPTIONS), code, { path: `docs/${name}` });
  }
  const deep = workdir("review-tools");
  write(deep, `${"d".repeat(200)}/${"e".repeat(200)}/${"f".repeat(120)}.md`, "x\n");
  await assertRefused(compileDirectory(deep, OPTIONS), "manifest-path-length");
});

test("a file name that is not UTF-8 is refused", async () => {
  const dir = workdir("review-tools");
  fs.writeFileSync(Buffer.concat([Buffer.from(`${dir}/bad-`), Buffer.from([0xff, 0xfe]), Buffer.from(".md")]), "x\n");
  await assertRefused(compileDirectory(dir, OPTIONS), "compile-path-not-utf8");
});

test("case collisions between files are refused (case-sensitive filesystems allow them)", async () => {
  const dir = workdir("review-tools");
  write(dir, "readme.md", "lower\n");
  await assertRefused(compileDirectory(dir, OPTIONS), "manifest-path-case-collision", { path: "readme.md" });
});

test("bundle contract is checked before returning: bad SKILL.md, plugin.json, .mcp.json, missing SKILL.md", async () => {
  const cases: Array<[string, string, string]> = [
    ["skills/review/SKILL.md", "---\nname: reviewer\ndescription: d\n---\n", "contract-skill-name-mismatch"],
    ["skills/review/SKILL.md", "no frontmatter\n", "contract-skill-frontmatter"],
    ["skills/review/SKILL.md", `---\nname: review\ndescription: ${"d".repeat(1025)}\n---\n`, "contract-skill-description"],
    ["plugin.json", '{"name":"Review Tools"}', "contract-plugin-manifest-name"],
    [".mcp.json", '{"mcpServers":{"x":{"type":"http","url":"ftp://x"}}}', "contract-mcp-declaration"],
    ["skills/Bad_Name/SKILL.md", "---\nname: Bad_Name\ndescription: d\n---\n", "contract-skill-name"],
  ];
  for (const [relative, content, code] of cases) {
    const dir = workdir("review-tools");
    write(dir, relative, content);
    await assertRefused(compileDirectory(dir, OPTIONS), code, { path: relative });
  }
  const missing = workdir("review-tools");
  fs.rmSync(path.join(missing, "skills/summarize/SKILL.md"));
  write(missing, "skills/summarize/notes.md", "x\n");
  await assertRefused(compileDirectory(missing, OPTIONS), "contract-skill-missing-skill-md");
});

test("an empty directory and a root that is not a directory are refused", async () => {
  const empty = workdir();
  fs.mkdirSync(path.join(empty, "only-dirs"));
  await assertRefused(compileDirectory(empty, OPTIONS), "compile-empty-directory");
  await assertRefused(
    compileDirectory(path.join(FIXTURES, "vector", "definition.md"), OPTIONS),
    "compile-root-not-directory",
  );
  await assertRefused(compileDirectory(path.join(scratch, "does-not-exist"), OPTIONS), "compile-root-missing");
});

test("readCompiledFile re-verifies: a file edited after compile is refused, restored it reads again", async () => {
  const dir = workdir("review-tools");
  const compiled = await compileDirectory(dir, OPTIONS);
  const readme = compiled.files.find((f) => f.component.relative_path === "README.md")!;
  const original = fs.readFileSync(readme.absolutePath);
  const tampered = Buffer.from(original);
  tampered[0] = tampered[0]! ^ 1; // same length, different bytes
  fs.writeFileSync(readme.absolutePath, tampered);
  await assertRefused(readCompiledFile(readme), "compile-file-changed", { path: "README.md" }, IntegrityError);
  fs.writeFileSync(readme.absolutePath, Buffer.concat([original, Buffer.from("x")]));
  await assertRefused(readCompiledFile(readme), "compile-file-changed", {}, IntegrityError);
  fs.writeFileSync(readme.absolutePath, original);
  assert.deepEqual(Buffer.from(await readCompiledFile(readme)), original);
  fs.rmSync(readme.absolutePath);
  fs.symlinkSync(path.join(dir, "plugin.json"), readme.absolutePath);
  await assertRefused(readCompiledFile(readme), "compile-file-changed", {}, IntegrityError);
});
