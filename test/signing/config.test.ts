/** `signing.rules` in warden.json: relative allowed_signers paths resolve in the home; bad rules are refused with a code. */
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { loadServeConfig } from "../../src/config/serve-config.js";
import { codeOf } from "./ssh-fixtures.js";
import { tempDir } from "../support/temp.js";

function homeWith(config: unknown): string {
  const home = join(tempDir("sign-config"), "home");
  mkdirSync(home, { mode: 0o700 });
  writeFileSync(join(home, "warden.json"), JSON.stringify(config), { mode: 0o600 });
  return home;
}

test("signing rules: paths resolved in the home, one requirement per rule, k within its principals", () => {
  const home = homeWith({ signing: { rules: [{ bundles: "team-*", allowed_signers: "allowed_signers", any_of: ["alice@example.com"] }] } });
  const config = loadServeConfig({ home }, { WARDEN_TOKEN: "t".repeat(32) }, "/");
  assert.deepEqual(config.warden.signing, { rules: [{ bundles: "team-*", allowed_signers: join(home, "allowed_signers"), any_of: ["alice@example.com"] }] });
  const load = (rule: unknown): string => codeOf(() => loadServeConfig({ home: homeWith({ signing: { rules: [rule] } }) }, { WARDEN_TOKEN: "t".repeat(32) }, "/"));
  assert.equal(load({ bundles: "*", allowed_signers: "f", any_of: ["a"], all_of: ["b"] }), "config-signing-invalid");
  assert.equal(load({ bundles: "*", allowed_signers: "f", k_of: { k: 3, principals: ["a", "b"] } }), "config-signing-invalid");
  assert.equal(load({ bundles: "*", allowed_signers: "f", some_of: ["a"] }), "config-file-invalid");
  assert.equal(load({ bundles: "*" }), "config-file-invalid");
});
