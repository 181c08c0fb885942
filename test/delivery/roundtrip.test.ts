/**
 * Round trip through everything delivery has: compile a directory (skills, plugin manifests,
 * .mcp.json) → begin → upload → commit → restart → read back, byte for byte; and DESIGN.md's
 * gate4agent vector through the store.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { fileURLToPath } from "node:url";
import { compileDirectory, readCompiledFile } from "../../src/delivery/compile/directory.js";
import { openStore, tempHome } from "./store-harness.js";

const FIXTURES = fileURLToPath(new URL("../fixtures/bundles/", import.meta.url));

test("compile → begin → upload → commit → reopen of a bundle with skills, plugin manifests and .mcp.json", async (t) => {
  const compiled = await compileDirectory(`${FIXTURES}review-tools`, { bundleId: "review-tools", revision: "r1" });
  const paths = compiled.manifest.components.map((c) => c.relative_path);
  for (const expected of [".claude-plugin/plugin.json", ".mcp.json", "plugin.json", "skills/review/SKILL.md"]) {
    assert.ok(paths.includes(expected), `fixture has ${expected}`);
  }
  const kinds = new Map(compiled.manifest.components.map((c) => [c.relative_path, c.kind]));
  assert.equal(kinds.get(".mcp.json"), "mcp-declaration");
  assert.equal(kinds.get(".claude-plugin/plugin.json"), "plugin-manifest");

  const home = tempHome(t, "roundtrip");
  const first = await openStore(t, home);
  const begun = await first.delivery.begin(compiled.manifest);
  const byDigest = new Map(compiled.files.map((f) => [f.component.blob.digest, f]));
  let sent = 0;
  for (const missing of begun.missing) {
    const bytes = await readCompiledFile(byDigest.get(missing.digest)!);
    // Upload as a stream of small pieces, the way an HTTP body arrives.
    const pieces = async function* (): AsyncIterable<Uint8Array> {
      for (let i = 0; i < bytes.byteLength; i += 100) yield bytes.subarray(i, i + 100);
    };
    const accepted = await first.delivery.putChunk(begun.stage_id, missing.digest, 0, pieces());
    assert.equal(accepted.next_offset, missing.byte_len);
    sent += bytes.byteLength;
  }
  assert.equal(sent, begun.missing.reduce((sum, m) => sum + m.byte_len, 0));
  const receipt = await first.delivery.commit(begun.stage_id);
  await first.delivery.close();

  const second = await openStore(t, home);
  const [bundle] = await second.delivery.catalog.list();
  assert.equal(bundle?.bundle_id, "review-tools");
  assert.deepEqual(bundle?.revisions[0]?.receipt, receipt);
  const manifest = await second.delivery.reads.getManifest("review-tools", "r1");
  assert.deepEqual(manifest, compiled.manifest);
  for (const file of compiled.files) {
    const stored = await second.delivery.reads.openBlob(file.component.blob);
    assert.deepEqual(new Uint8Array(stored), new Uint8Array(await readCompiledFile(file)), file.component.relative_path);
  }
  const again = await second.delivery.begin(compiled.manifest);
  assert.equal(again.committed, true);
  assert.equal(again.stage_id, begun.stage_id);
});

test("DESIGN.md's gate4agent vector goes through the store with the same digests", async (t) => {
  const compiled = await compileDirectory(`${FIXTURES}vector`, { bundleId: "vector", revision: "r1", kinds: { "definition.md": "file" } });
  assert.equal(compiled.manifest.components[0]!.blob.digest, "sha256:452b7b642e325cb2b5b20ac28536ada8b0ad312217a98ab7ff23330603b63126");
  assert.equal(compiled.manifest.bundle_digest, "sha256:ba71773aa731bdc2e460cbde965db223f9fa8d499a1b97acc8ceeb376dcc432a");
  const { delivery } = await openStore(t, tempHome(t, "vector"));
  const begun = await delivery.begin(compiled.manifest);
  await delivery.putChunk(begun.stage_id, begun.missing[0]!.digest, 0, new TextEncoder().encode("review\n"));
  const receipt = await delivery.commit(begun.stage_id);
  assert.deepEqual(receipt.blobs, [{ digest: "sha256:452b7b642e325cb2b5b20ac28536ada8b0ad312217a98ab7ff23330603b63126", byte_len: 7 }]);
  assert.equal(receipt.bundle_digest, "sha256:ba71773aa731bdc2e460cbde965db223f9fa8d499a1b97acc8ceeb376dcc432a");
});
