import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { isWardenError } from "../../src/core/errors.js";
import { CLI_CREDENTIAL_VARS, checkProviderConfigured } from "../../src/providers/availability.js";
import { PROVIDER_NAMES } from "../../src/providers/types.js";

const refusedWith = (fn: () => void): string => {
  try {
    fn();
  } catch (e) {
    assert.ok(isWardenError(e) && e.code === "provider-not-configured" && e.status === 503, String(e));
    return e.message;
  }
  assert.fail("not refused");
};

describe("provider availability (checked before the claim)", () => {
  it("a configured provider runs, whatever the environment holds", () => {
    for (const p of PROVIDER_NAMES) checkProviderConfigured(p, true, {});
  });

  it("an unconfigured provider runs only with one of its CLI's own keys in the node's environment", () => {
    for (const p of PROVIDER_NAMES) {
      const message = refusedWith(() => checkProviderConfigured(p, false, { PATH: "/usr/bin", HOME: "/root" }));
      assert.match(message, new RegExp(`providers\\.${p}\\.model`));
      for (const name of CLI_CREDENTIAL_VARS[p]) {
        checkProviderConfigured(p, false, { [name]: "sk-1" });
        refusedWith(() => checkProviderConfigured(p, false, { [name]: "" }));
      }
    }
    // One CLI's key is not another's.
    refusedWith(() => checkProviderConfigured("codex", false, { ANTHROPIC_API_KEY: "sk-1" }));
    refusedWith(() => checkProviderConfigured("claude", false, { OPENAI_API_KEY: "sk-1" }));
  });
});
