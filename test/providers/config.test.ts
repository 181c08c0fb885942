import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { parse as parseToml } from "smol-toml";
import { codexConfigFromMcpJson } from "../../src/providers/codex-config.js";
import { DEFAULT_PROVIDER_PROFILES, expandBundleLaunch, expandLaunchArgs, resolveProfiles } from "../../src/providers/profiles.js";
import { isWardenError } from "../../src/core/errors.js";

/** The config.toml of a `.mcp.json`, without warden's fixed settings (analytics, features; asserted below). */
const toml = (servers: unknown): unknown => {
  const { analytics: _a, features: _f, ...rest } = JSON.parse(JSON.stringify(parseToml(codexConfigFromMcpJson(Buffer.from(JSON.stringify({ mcpServers: servers })), 0)))) as Record<string, unknown>;
  return rest;
};

function refused(fn: () => unknown, code: string): void {
  assert.throws(fn, (e: unknown) => isWardenError(e) && e.code === code);
}

describe("codex config from .mcp.json", () => {
  it("maps stdio servers: literal env, forwarded variables, no args when none", () => {
    assert.deepEqual(toml({ a: { command: "srv" }, b: { type: "stdio", command: "srv2", args: [], env: { K: "v", HOME: "${HOME}" } } }), {
      mcp_servers: { a: { command: "srv" }, b: { command: "srv2", args: [], env: { K: "v" }, env_vars: ["HOME"] } },
    });
  });

  it("maps http headers: literal, whole-variable and bearer-token forms", () => {
    assert.deepEqual(
      toml({ h: { type: "http", url: "https://127.0.0.1/mcp", headers: { Authorization: "Bearer ${TOK}", "X-A": "${A}", "X-B": "b" } } }),
      { mcp_servers: { h: { url: "https://127.0.0.1/mcp", bearer_token_env_var: "TOK", env_http_headers: { "X-A": "A" }, http_headers: { "X-B": "b" } } } },
    );
    // A literal Authorization header stays literal.
    assert.deepEqual(toml({ h: { type: "http", url: "https://127.0.0.1/mcp", headers: { Authorization: "Basic abc" } } }), {
      mcp_servers: { h: { url: "https://127.0.0.1/mcp", http_headers: { Authorization: "Basic abc" } } },
    });
  });

  it("refuses what Codex cannot express", () => {
    refused(() => toml({ s: { type: "sse", url: "http://127.0.0.1/sse" } }), "codex-mcp-sse-unsupported");
    refused(() => toml({ s: { command: "srv", args: ["--root=${PWD}"] } }), "codex-mcp-unexpandable");
    refused(() => toml({ s: { command: "srv", env: { A: "${A:-x}" } } }), "codex-mcp-unexpandable");
    refused(() => toml({ s: { type: "http", url: "http://127.0.0.1/${PATH_PART}" } }), "codex-mcp-unexpandable");
    refused(() => toml({ s: { type: "http", url: "http://127.0.0.1/", headers: { "X-A": "pre ${A}" } } }), "codex-mcp-unexpandable");
  });

  it("refuses a declaration the bundle contract refuses (its own rule, reused)", () => {
    refused(() => codexConfigFromMcpJson(Buffer.from('{"mcpServers":{"bad name":{"command":"x"}}}'), 0), "contract-mcp-declaration");
    refused(() => codexConfigFromMcpJson(Buffer.from("{not json"), 0), "contract-json-syntax");
  });
});

describe("provider profiles", () => {
  it("defaults launch each CLI in its non-interactive mode", () => {
    const options = ["--mode", "m"];
    assert.deepEqual(expandLaunchArgs(DEFAULT_PROVIDER_PROFILES.claude, "hi", options), ["-p", "--output-format", "stream-json", "--verbose", "--mode", "m", "--", "hi"]);
    assert.deepEqual(expandLaunchArgs(DEFAULT_PROVIDER_PROFILES.codex, "hi", options), ["exec", "--json", "--skip-git-repo-check", "--mode", "m", "--", "hi"]);
    assert.deepEqual(expandLaunchArgs(DEFAULT_PROVIDER_PROFILES.kimi, "hi", options), ["--print", "--mode", "m", "-p", "hi"]);
    const paths = { root: "/m/s", bundle: "/m/s/bundle", home: "/m/s/home", skills: "/m/s/bundle/skills" };
    assert.deepEqual(expandBundleLaunch(DEFAULT_PROVIDER_PROFILES.codex, paths), { args: [], env: { CODEX_HOME: "/m/s/home" } });
    assert.deepEqual(expandBundleLaunch(DEFAULT_PROVIDER_PROFILES.kimi, paths), { args: ["--skills-dir", "/m/s/bundle/skills"], env: {} });
  });

  it("a prompt is always one whole argument, whatever it contains", () => {
    const p = resolveProfiles({ claude: { promptArgs: ["--print", "--", "{prompt}"] } });
    assert.deepEqual(expandLaunchArgs(p.claude, "a {bundle} b", ["--x"]), ["--print", "--x", "--", "a {bundle} b"]);
    // A prompt that looks like an option or a subcommand still comes after every option, as the
    // value of the option before it or after `--` (test/runner/prompt-placement.test.ts runs it).
    for (const prompt of ["review", "--help", "-m x", "resume"]) {
      assert.deepEqual(expandLaunchArgs(DEFAULT_PROVIDER_PROFILES.codex, prompt, ["--sandbox", "read-only"]).slice(-3), ["read-only", "--", prompt]);
    }
    const kimi = resolveProfiles({ kimi: { promptArgs: ["--print", "--prompt", "{prompt}"] } });
    assert.deepEqual(expandLaunchArgs(kimi.kimi, "-p", ["--x"]), ["--print", "--x", "--prompt", "-p"]);
  });

  for (const [name, override] of [
    ["no {prompt}", { promptArgs: ["-p"] }],
    ["{prompt} twice", { promptArgs: ["{prompt}", "{prompt}"] }],
    ["{prompt} spliced", { promptArgs: ["--prompt={prompt}"] }],
    ["{prompt} before an option", { promptArgs: ["-p", "{prompt}", "--verbose"] }],
    ["{prompt} a bare positional", { promptArgs: ["-p", "--verbose", "run", "{prompt}"] }],
    ["{prompt} alone", { promptArgs: ["{prompt}"] }],
    ["{prompt} in bundle args", { bundleArgs: ["{prompt}"] }],
    ["a path in prompt args", { promptArgs: ["{prompt}", "--dir", "{bundle}"] }],
    ["an unknown placeholder", { bundleArgs: ["{secret}"] }],
    ["a bad env name", { bundleEnv: { "A-B": "{home}" } }],
    ["an empty command", { command: "" }],
  ] as const) {
    it(`refuses a template with ${name}`, () => {
      refused(() => resolveProfiles({ claude: override as never }), "provider-profile-invalid");
    });
  }

  it("refuses an unknown provider", () => {
    refused(() => resolveProfiles({ gemini: {} } as never), "provider-profile-invalid");
  });
});
