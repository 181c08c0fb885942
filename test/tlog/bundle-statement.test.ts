/**
 * A bundle commit's leaf names who signed it: the signers in the commit receipt are part of the
 * logged statement, so a signer list rewritten later with the node's key disagrees with the log.
 * A signature added after the commit is a `bundle.signed` leaf of its own.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { bundleStatement } from "../../src/warden/transparency.js";
import { leafOf } from "../../src/tlog/statements.js";
import { createHash } from "node:crypto";
import * as fs from "node:fs";
import * as path from "node:path";
import { canonicalJson } from "../../src/core/canonical.js";
import { bundleStatement as signingStatement } from "../../src/signing/statement.js";
import { parseCheckpointText } from "../../src/tlog/checkpoint.js";
import { leafHash, verifyInclusion } from "../../src/tlog/merkle.js";
import { parseNote } from "../../src/tlog/note.js";
import { parseHashes } from "../../src/tlog/verify.js";
import { openWarden } from "../../src/warden/facade.js";
import { uniqueBundle } from "../backends/harness.js";
import { uploadMissing } from "../delivery/store-harness.js";

import { makeKey, sshSignWith } from "../signing/ssh-fixtures.js";
import { entryLeaves } from "./entries.js";
import { tempDir } from "../support/temp.js";

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

test("a signature added after the commit is its own leaf, with the armored signature's sha256, and its inclusion proof verifies", async () => {
  const root = tempDir("tlog-signed");
  const keys = tempDir("sign");
  const warden = await openWarden({ home: path.join(root, "home"), log: { origin: "warden.test/signed", checkpointIntervalMs: 3_600_000 } });
  try {
    const signer = makeKey(keys, "release", "ed25519");
    const built = uniqueBundle([1_000]);
    const m = built.manifest;
    const begun = await warden.beginStage(m);
    await uploadMissing(warden, begun, built.blobs);
    await warden.commitStage(begun.stage_id);
    const signature = sshSignWith(signer.path, signingStatement(m));
    const view = await warden.addSignature(m.bundle_id, m.revision, signature);
    const stored = view.signatures.find((s) => s.fingerprint === signer.fingerprint)!;
    // The same key again keeps the stored signature and logs nothing new.
    const size = (await warden.log!.status()).size;
    await warden.addSignature(m.bundle_id, m.revision, sshSignWith(signer.path, signingStatement(m)));
    assert.equal((await warden.log!.status()).size, size);

    const checkpoint = parseCheckpointText(parseNote((await warden.log!.checkpoint()).note).text);
    const leaves = (await warden.log!.tile({ level: "entries", index: 0, width: checkpoint.size }))!;
    const bodies = entryLeaves(leaves);
    const index = bodies.findIndex((b) => (JSON.parse(b.toString("utf8")) as { type: string }).type === "bundle.signed");
    assert.ok(index >= 0, "the later signature is a leaf");
    assert.equal(
      bodies[index]!.toString("utf8"),
      canonicalJson({
        v: 1,
        type: "bundle.signed",
        bundle_id: m.bundle_id,
        revision: m.revision,
        manifest_digest: m.manifest_digest,
        fingerprint: signer.fingerprint,
        key_type: "ssh-ed25519",
        principals: [],
        signed_at: stored.signed_at,
        signature_sha256: `sha256:${createHash("sha256").update(signature).digest("hex")}`,
      }),
    );
    const proof = await warden.log!.inclusion(index, checkpoint.size);
    assert.ok(verifyInclusion(index, checkpoint.size, leafHash(bodies[index]!), parseHashes(proof.proof), checkpoint.root));
  } finally {
    await warden.close();
    fs.rmSync(root, { recursive: true, force: true });
    fs.rmSync(keys, { recursive: true, force: true });
  }
});
