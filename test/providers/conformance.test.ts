/**
 * Conformance with the real CLIs (DESIGN.md "Providers": a tree is correct when the real CLIs
 * accept it). The CLIs are the versions package.json pins as devDependencies (`npm ci` installs
 * them into node_modules/.bin); without them every test here fails, naming that command. Each runs
 * offline with a private HOME, and every network setting points at a closed loopback port.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as path from "node:path";
import { spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import { READY_MS } from "../support/wait.js";
import { Materializer } from "../../src/providers/materializer.js";
import { resolveProfiles } from "../../src/providers/profiles.js";
import { RunHomes } from "../../src/providers/run-home.js";
import type { Materialization } from "../../src/providers/types.js";
import { compileDirectory } from "../../src/delivery/compile/directory.js";
import { LINT_SKILL, MemorySource, REVIEW_SKILL, fullBundleFiles } from "./helpers.js";
import { tempDir } from "../support/temp.js";

const pinnedBin = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..", "..", "node_modules", ".bin");

/** The pinned CLI `name` from node_modules/.bin, or an error naming the command that installs it. */
function pinnedCli(name: "claude" | "codex"): string {
  const file = path.join(pinnedBin, name);
  if (!fs.existsSync(file)) {
    throw new Error(`${name} is not installed at ${file}: run \`npm ci\` (package.json pins @anthropic-ai/claude-code and @openai/codex as devDependencies)`);
  }
  return file;
}

const LOOPBACK = "http://127.0.0.1:9";
const EXAMPLE = fileURLToPath(new URL("../../examples/review-bundle/", import.meta.url));

interface Ran {
  status: number | null;
  stdout: string;
  stderr: string;
}

describe("real CLIs accept the materialized trees", () => {
  let dir: string;
  let home: string;
  let claude: Materialization;
  let codex: Materialization;
  let exampleClaude: Materialization;
  let exampleCodex: Materialization;
  /** what a codex run gets: its own home, whose CODEX_HOME holds the materialized config and links its skills */
  let codexEnv: Record<string, string>;

  const run = (command: "claude" | "codex", args: string[], extraEnv: Record<string, string> = {}): Ran => {
    const r = spawnSync(pinnedCli(command), args, {
      cwd: home,
      encoding: "utf8",
      timeout: READY_MS,
      stdio: ["ignore", "pipe", "pipe"],
      env: {
        PATH: process.env.PATH ?? "/usr/bin:/bin",
        HOME: home,
        XDG_CONFIG_HOME: path.join(home, ".config"),
        ANTHROPIC_BASE_URL: LOOPBACK,
        OPENAI_BASE_URL: `${LOOPBACK}/v1`,
        HTTPS_PROXY: LOOPBACK,
        HTTP_PROXY: LOOPBACK,
        https_proxy: LOOPBACK,
        http_proxy: LOOPBACK,
        NO_PROXY: "",
        DISABLE_AUTOUPDATER: "1",
        DISABLE_TELEMETRY: "1",
        CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: "1",
        ...extraEnv,
      },
    });
    const timedOut = r.error !== undefined ? `\n(${command} ${args.join(" ")}: ${String(r.error)}; waited ${READY_MS / 1000} s for it to end)` : "";
    return { status: r.status, stdout: r.stdout ?? "", stderr: (r.stderr ?? "") + timedOut };
  };

  before(async () => {
    dir = tempDir("providers-conformance");
    home = path.join(dir, "home");
    fs.mkdirSync(home, { mode: 0o700 });
    const source = new MemorySource();
    source.add("review-tools", "r1", fullBundleFiles());
    const mat = new Materializer({ root: path.join(dir, "mat"), source });
    const bundle = { bundle_id: "review-tools", revision: "r1" };
    claude = await mat.materialize({ provider: "claude", bundle, session: "conf-claude" });
    codex = await mat.materialize({ provider: "codex", bundle, session: "conf-codex" });
    // examples/review-bundle, as `warden push` compiles it: it claims claude and codex.
    const compiled = await compileDirectory(EXAMPLE, { bundleId: "review-bundle", revision: "r1" });
    source.add("review-bundle", "r1", compiled.files.map((f) => ({ path: f.component.relative_path, kind: f.component.kind, content: fs.readFileSync(f.absolutePath) })));
    const example = { bundle_id: "review-bundle", revision: "r1" };
    exampleClaude = await mat.materialize({ provider: "claude", bundle: example, session: "conf-example-claude" });
    exampleCodex = await mat.materialize({ provider: "codex", bundle: example, session: "conf-example-codex" });
    const runHome = await new RunHomes(path.join(dir, "run-homes")).create({
      run: "conf-codex",
      provider: "codex",
      profile: resolveProfiles().codex,
      workspace: home,
      trusted: false,
      materialization: codex,
    });
    codexEnv = { CODEX_HOME: runHome.env.CODEX_HOME as string };
  });
  after(() => fs.rmSync(dir, { recursive: true, force: true }));

  it("claude plugin validate --strict accepts <root>/bundle (manifest and skills)", () => {
    const bundleDir = claude.args[1] as string;
    const r = run("claude", ["plugin", "validate", "--strict", bundleDir]);
    assert.equal(r.status, 0, `${r.stdout}\n${r.stderr}`);
    assert.ok(r.stdout.includes(path.join(bundleDir, ".claude-plugin", "plugin.json")), r.stdout);
    assert.match(r.stdout, /✔ Validation passed\n/);
    assert.doesNotMatch(r.stdout, /Validation passed with warnings/);
    // Claude Code 2.1.3xx adds the plugin directory's submission checks (README, LICENSE, icon)
    // after its own; they "do not change the result". The plugin's own checks must be clean.
    const own = r.stdout.split("Plugin directory checks")[0] ?? "";
    assert.doesNotMatch(own, /warning|error/i, own);
    for (const line of ['mcpServers: files stdio files-mcp ["--root","."]', "mcpServers: web http http://127.0.0.1:9/mcp", "skills: review-tools:lint", "skills: review-tools:review"]) {
      assert.ok(own.includes(line), `validate does not list ${line}:\n${own}`);
    }
  });

  it("claude plugin validate reads the skills too: a broken SKILL.md in a copy of the tree fails it", () => {
    const copy = path.join(dir, "broken-copy");
    fs.cpSync(claude.args[1] as string, copy, { recursive: true });
    fs.writeFileSync(path.join(copy, "skills", "lint", "SKILL.md"), "---\nname: [broken\n---\n");
    // --strict: a skill's problem is a warning in 2.1.3xx, and strict fails on warnings.
    const r = run("claude", ["plugin", "validate", "--strict", copy]);
    assert.equal(r.status, 1, r.stdout);
    assert.ok(r.stdout.includes(`Validating skill: ${path.join(copy, "skills", "lint", "SKILL.md")}`), r.stdout);
    assert.match(r.stdout, /Validation failed/);
  });

  it("claude loads the plugin dir with both skills and both MCP servers", () => {
    const details = run("claude", [...claude.args, "plugin", "details", "review-tools"]);
    assert.equal(details.status, 0, `${details.stdout}\n${details.stderr}`);
    assert.match(details.stdout, /Source: review-tools@inline/);
    assert.match(details.stdout, /Skills \(2\)\s+lint, review/);
    assert.match(details.stdout, /MCP servers \(2\)\s+files, web/);

    const list = run("claude", [...claude.args, "plugin", "list", "--json"]);
    assert.equal(list.status, 0, list.stderr);
    const plugins = JSON.parse(list.stdout) as Array<{ id: string; installPath: string; enabled: boolean }>;
    const plugin = plugins.find((p) => p.id === "review-tools@inline");
    assert.ok(plugin, list.stdout);
    assert.equal(plugin.installPath, claude.args[1]);
    assert.equal(plugin.enabled, true);
  });

  it("codex debug prompt-input lists the skills of the run's CODEX_HOME (linked from the materialized tree)", () => {
    const r = run("codex", ["debug", "prompt-input"], codexEnv);
    assert.equal(r.status, 0, r.stderr);
    const text = r.stdout;
    for (const [name, skill] of [["lint", LINT_SKILL], ["review", REVIEW_SKILL]] as const) {
      const description = /description: (.*)/.exec(skill)?.[1] as string;
      assert.ok(text.includes(`${name}: ${description}`), `prompt input lacks skill ${name}`);
    }
  });

  it("examples/review-bundle: claude validates and loads it; codex lists its skills and both MCP servers", () => {
    const bundleDir = exampleClaude.args[1] as string;
    const validated = run("claude", ["plugin", "validate", "--strict", bundleDir]);
    assert.equal(validated.status, 0, `${validated.stdout}\n${validated.stderr}`);
    const details = run("claude", [...exampleClaude.args, "plugin", "details", "review-bundle"]);
    assert.equal(details.status, 0, `${details.stdout}\n${details.stderr}`);
    assert.match(details.stdout, /Skills \(2\)\s+code-review, commit-message/);
    assert.match(details.stdout, /MCP servers \(2\)\s+repo-notes, docs/);

    const prompt = run("codex", ["debug", "prompt-input"], { ...exampleCodex.env });
    assert.equal(prompt.status, 0, prompt.stderr);
    for (const name of ["code-review", "commit-message"]) assert.match(prompt.stdout, new RegExp(`${name}: `), `prompt input lacks skill ${name}`);
    const r = run("codex", ["mcp", "list", "--json"], { ...exampleCodex.env });
    assert.equal(r.status, 0, r.stderr);
    const servers = JSON.parse(r.stdout) as Array<{ name: string; transport: Record<string, unknown> }>;
    const notes = servers.find((s) => s.name === "repo-notes")?.transport;
    assert.deepEqual([notes?.command, notes?.args, notes?.env_vars], ["npx", ["-y", "@modelcontextprotocol/server-memory"], ["MEMORY_FILE_PATH"]]);
    const docs = servers.find((s) => s.name === "docs")?.transport;
    assert.deepEqual([docs?.type, docs?.url, docs?.bearer_token_env_var], ["streamable_http", "https://mcp.example.com/docs", "DOCS_TOKEN"]);
  });

  it("codex mcp list shows both servers exactly as translated", () => {
    const plain = run("codex", ["mcp", "list"], codexEnv);
    assert.equal(plain.status, 0, plain.stderr);
    assert.match(plain.stdout, /^files\s+files-mcp\s+--root \./m);
    assert.match(plain.stdout, /^web\s+http:\/\/127\.0\.0\.1:9\/mcp\s+WEB_TOKEN/m);

    const r = run("codex", ["mcp", "list", "--json"], codexEnv);
    assert.equal(r.status, 0, r.stderr);
    const servers = JSON.parse(r.stdout) as Array<{ name: string; enabled: boolean; transport: Record<string, unknown> }>;
    assert.deepEqual(servers.map((s) => s.name).sort(), ["files", "web"]);
    const files = servers.find((s) => s.name === "files")?.transport;
    assert.equal(files?.type, "stdio");
    assert.equal(files?.command, "files-mcp");
    assert.deepEqual(files?.args, ["--root", "."]);
    assert.deepEqual(files?.env, { LOG_LEVEL: "debug" });
    assert.deepEqual(files?.env_vars, ["FILES_TOKEN"]);
    const web = servers.find((s) => s.name === "web")?.transport;
    assert.equal(web?.type, "streamable_http");
    assert.equal(web?.url, "http://127.0.0.1:9/mcp");
    assert.equal(web?.bearer_token_env_var, "WEB_TOKEN");
    assert.deepEqual(web?.http_headers, { "X-Client": "warden" });
    assert.deepEqual(web?.env_http_headers, { "X-Tenant": "WEB_TENANT" });
  });
});
