import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { parse as parseToml } from "smol-toml";
import { codexConfigToml } from "../../src/providers/codex-config.js";
import { modelLaunch } from "../../src/providers/model-endpoint.js";
import { DEFAULT_PROVIDER_PROFILES, expandRunLaunch, resolveProfiles } from "../../src/providers/profiles.js";
import { isWardenError } from "../../src/core/errors.js";

function refused(fn: () => unknown, code: string, text?: RegExp): void {
  assert.throws(fn, (e: unknown) => isWardenError(e) && e.code === code && (text === undefined || text.test(e.message)));
}

const MODEL = { baseUrl: "https://gateway.internal/v1", apiKeyEnv: "GATEWAY_KEY", name: "m-1", retries: 2 };

describe("permission modes", () => {
  it("workspace is the default: claude acceptEdits, codex workspace-write, non-essential traffic off", () => {
    const p = resolveProfiles();
    assert.equal(p.claude.permission, "workspace");
    assert.deepEqual(expandRunLaunch(p.claude, "workspace"), { args: ["--permission-mode", "acceptEdits"], env: { CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: "1" } });
    assert.deepEqual(expandRunLaunch(p.codex, "workspace"), { args: ["--sandbox", "workspace-write"], env: {} });
    assert.deepEqual(expandRunLaunch(p.claude, "full").env, { CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: "1", IS_SANDBOX: "1" });
    assert.deepEqual(expandRunLaunch(p.codex, "read-only").args, ["--sandbox", "read-only"]);
    assert.deepEqual(expandRunLaunch(p.kimi, "full"), { args: [], env: {} });
  });

  it("confined in warden's sandbox, codex's own sandbox is replaced (bubblewrap cannot nest); unconfined and claude's unchanged", () => {
    const p = resolveProfiles();
    assert.deepEqual(expandRunLaunch(p.codex, "read-only", true), { args: ["--sandbox", "danger-full-access"], env: {} });
    assert.deepEqual(expandRunLaunch(p.codex, "workspace", true), { args: ["--sandbox", "danger-full-access"], env: {} });
    assert.deepEqual(expandRunLaunch(p.codex, "full", true).args, ["--dangerously-bypass-approvals-and-sandbox"]);
    assert.deepEqual(expandRunLaunch(p.codex, "workspace", false).args, ["--sandbox", "workspace-write"]);
    assert.deepEqual(expandRunLaunch(p.claude, "workspace", true), expandRunLaunch(p.claude, "workspace"));
    refused(() => resolveProfiles({ codex: { confinedPermissions: { yolo: { args: [], env: {} } } as never } }), "provider-profile-invalid", /not a permission mode/);
    refused(() => resolveProfiles({ codex: { confinedPermissions: { workspace: { args: ["{bundle}"], env: {} } } } }), "provider-profile-invalid", /no placeholders/);
  });

  it("an operator's mode or variable replaces the default's; the others stay", () => {
    const p = resolveProfiles({ claude: { permission: "read-only", permissions: { "read-only": { args: ["--permission-mode", "plan"], env: {} } } as never, env: { EXTRA: "1" } } });
    assert.equal(p.claude.permission, "read-only");
    assert.deepEqual(expandRunLaunch(p.claude, "read-only").args, ["--permission-mode", "plan"]);
    assert.deepEqual(expandRunLaunch(p.claude, "workspace").args, ["--permission-mode", "acceptEdits"]);
    assert.deepEqual(p.claude.env, { CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: "1", EXTRA: "1" });
  });

  it("refuses an unknown mode, a placeholder in permission args, a bad variable name", () => {
    refused(() => resolveProfiles({ codex: { permission: "yolo" as never } }), "provider-profile-invalid", /permission must be one of/);
    refused(() => resolveProfiles({ codex: { permissions: { full: { args: ["{prompt}"], env: {} } } as never } }), "provider-profile-invalid", /no placeholders/);
    refused(() => resolveProfiles({ claude: { env: { "BAD NAME": "1" } } }), "provider-profile-invalid", /not a variable name/);
  });
});

describe("model endpoint", () => {
  it("claude: base URL, model and retries in the environment; the key apart, as the secret it is", () => {
    const profile = { ...DEFAULT_PROVIDER_PROFILES.claude, model: { ...MODEL, baseUrl: "https://gateway.internal" } };
    const launch = modelLaunch("claude", profile, { GATEWAY_KEY: "sk-live-123" });
    assert.deepEqual(launch.env, { ANTHROPIC_BASE_URL: "https://gateway.internal", ANTHROPIC_MODEL: "m-1", CLAUDE_CODE_MAX_RETRIES: "2" });
    assert.deepEqual(launch.secretEnv, { ANTHROPIC_API_KEY: "sk-live-123" });
    assert.ok(!JSON.stringify(launch.env).includes("sk-live-123"));
  });

  it("codex: nothing in the environment (the key stays in the node's variable, named by env_key)", () => {
    const launch = modelLaunch("codex", { ...DEFAULT_PROVIDER_PROFILES.codex, model: MODEL }, { GATEWAY_KEY: "sk-live-123" });
    assert.deepEqual(launch, { env: {}, secretEnv: {} });
    const toml = codexConfigToml({ model: MODEL });
    assert.ok(!toml.includes("sk-live-123"));
    assert.deepEqual(JSON.parse(JSON.stringify(parseToml(toml))), {
      model_provider: "warden",
      model: "m-1",
      analytics: { enabled: false },
      features: { plugins: false },
      model_providers: {
        warden: { name: "warden", base_url: "https://gateway.internal/v1", wire_api: "responses", env_key: "GATEWAY_KEY", request_max_retries: 2, stream_max_retries: 2 },
      },
    });
  });

  it("an unset key variable is refused with its own code, naming the variable, not a value", () => {
    for (const env of [{}, { GATEWAY_KEY: "" }]) {
      refused(() => modelLaunch("codex", { ...DEFAULT_PROVIDER_PROFILES.codex, model: MODEL }, env), "provider-model-key-missing", /GATEWAY_KEY/);
    }
    // No endpoint configured: the CLI's own defaults, nothing required.
    assert.deepEqual(modelLaunch("claude", DEFAULT_PROVIDER_PROFILES.claude, {}), { env: {}, secretEnv: {} });
  });

  it("refuses a URL that is not http(s), one that carries credentials, and a model for kimi", () => {
    refused(() => resolveProfiles({ claude: { model: { baseUrl: "ftp://x" } } }), "provider-profile-invalid", /http\(s\) URL/);
    refused(() => resolveProfiles({ claude: { model: { baseUrl: "https://user:sk-1@gw" } } }), "provider-profile-invalid", /credentials/);
    refused(() => resolveProfiles({ codex: { model: { baseUrl: "https://gw", retries: -1 } } }), "provider-profile-invalid", /retries/);
    refused(() => resolveProfiles({ kimi: { model: { baseUrl: "https://gw" } } }), "provider-profile-invalid", /kimi/);
  });
});
