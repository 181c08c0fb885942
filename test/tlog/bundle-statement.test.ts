/**
 * A bundle commit's leaf names who signed it: the signers in the commit receipt are part of the
 * logged statement, so a signer list rewritten later with the node's key disagrees with the log.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { bundleStatement } from "../../src/warden/transparency.js";
import { leafOf } from "../../src/tlog/statements.js";

const receipt = {
  bundle_id: "review-tools",
  revision: "r1",
  bundle_digest: `sha256:${"a".repeat(64)}`,
  manifest_digest: `sha256:${"b".repeat(64)}`,
  blobs: [{ digest: `sha256:${"c".repeat(64)}`, byte_len: 3 }],
} as const;
const alice = { principals: ["alice@example.com"], fingerprint: "SHA256:UE8yAbCdEfGhIjKlMnOpQrStUvWxYz0123456789abc", key_type: "ssh-ed25519", signed_at: "2026-12-01T00:00:00.000Z" };

test("an unsigned commit's leaf has no signers member; a signed one names each signer", () => {
  const unsigned = bundleStatement(receipt);
  assert.equal("signers" in unsigned, false);
  const signed = bundleStatement({ ...receipt, signers: [alice] });
  assert.deepEqual((signed as { signers?: unknown }).signers, [alice]);
  const leaf = leafOf(signed).body.toString("utf8");
  assert.match(leaf, /"signers":\[\{"fingerprint":"SHA256:UE8y/);
  assert.equal(leafOf(signed).key, leafOf(unsigned).key, "one leaf per bundle@revision, signed or not");
  assert.notEqual(leaf, leafOf(unsigned).body.toString("utf8"));
});
