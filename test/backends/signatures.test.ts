/**
 * Bundle signatures through the Delivery service, identical on every backend: signatures stored
 * with the commit and named in its receipt; each refusal of the trust policy with its code and
 * nothing stored; a signature added later; the policy checked again at use, where a key removed
 * from allowed_signers stops an already committed revision; stored signatures outlive a restart
 * and a tampered one is refused.
 */
import { before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { chmodSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { TrustPolicy } from "../../src/signing/policy.js";
import { bundleStatement } from "../../src/signing/statement.js";
import { rejectsWith, uploadMissing } from "../delivery/store-harness.js";
import { makeKey, opensshVerifies, sshSignWith, type TestKey } from "../signing/ssh-fixtures.js";
import { backendsUnderTest, uniqueBundle } from "./harness.js";
import { tempDir } from "../support/temp.js";

const dir = tempDir("sign");
const allowed = join(dir, "allowed_signers");
let alice: TestKey;
let bob: TestKey;
let mallory: TestKey;
const writeSigners = (keys: readonly [string, TestKey][]): void => {
  writeFileSync(allowed, keys.map(([p, k]) => `${p} ${k.publicLine}\n`).join(""));
  chmodSync(allowed, 0o644);
};

before(() => {
  alice = makeKey(dir, "alice", "ed25519");
  bob = makeKey(dir, "bob", "ecdsa", 256);
  mallory = makeKey(dir, "mallory", "ed25519");
  writeSigners([
    ["alice@example.com", alice],
    ["bob@example.com", bob],
  ]);
});

const policy = (): TrustPolicy => new TrustPolicy({ rules: [{ bundles: "bundle-*", allowed_signers: allowed, any_of: ["alice@example.com"] }] });

for (const backend of backendsUnderTest()) {
  describe(`bundle signatures on ${backend.name}`, () => {
    backend.hooks();

    test("refusals store nothing; a signed commit names its signers; later signatures; revocation at use", async (t) => {
      const state = await backend.state(t);
      const first = await state.open({ trust: policy() });
      const { delivery } = first;
      const built = uniqueBundle([3_000]);
      const m = built.manifest;
      const statement = bundleStatement(m);
      const begun = await delivery.begin(m);
      await uploadMissing(delivery, begun, built.blobs, 7_000);
      await rejectsWith(delivery.commit(begun.stage_id), "bundle-signature-required");
      await rejectsWith(delivery.commit(begun.stage_id, [sshSignWith(mallory.path, statement)]), "bundle-signer-untrusted");
      await rejectsWith(delivery.commit(begun.stage_id, [sshSignWith(bob.path, statement)]), "bundle-signer-untrusted");
      await rejectsWith(delivery.commit(begun.stage_id, [sshSignWith(alice.path, bundleStatement({ ...m, revision: "r2" }))]), "bundle-signature-invalid");
      await rejectsWith(delivery.commit(begun.stage_id, [sshSignWith(alice.path, statement, "git")]), "bundle-signature-invalid");
      await rejectsWith(delivery.commit(begun.stage_id, ["-----BEGIN SSH SIGNATURE-----\nAAAA"]), "bundle-signature-malformed");
      // Nothing was stored: the revision is not in the catalog, the stage is still open.
      await rejectsWith(delivery.catalog.show(m.bundle_id), "bundle-not-found");
      assert.equal((await delivery.status(begun.stage_id)).committed, undefined);

      const signature = sshSignWith(alice.path, statement);
      const receipt = await delivery.commit(begun.stage_id, [signature]);
      assert.deepEqual(receipt.signers?.map((s) => [s.principals, s.fingerprint]), [[["alice@example.com"], alice.fingerprint]]);
      assert.deepEqual(await delivery.commit(begun.stage_id), receipt, "a replayed commit answers the same receipt");
      const shown = (await delivery.catalog.show(m.bundle_id)).revisions[0]!;
      assert.equal(shown.signatures.length, 1);
      // The stored signature is the one OpenSSH checks.
      assert.ok(opensshVerifies(allowed, "alice@example.com", statement, shown.signatures[0]!.signature!, dir).ok);

      // A second signer later; the same key again adds nothing; an untrusted one is refused.
      const withBob = await delivery.catalog.addSignature(m.bundle_id, m.revision, sshSignWith(bob.path, statement));
      assert.deepEqual(withBob.signatures.map((s) => s.fingerprint), [alice.fingerprint, bob.fingerprint]);
      assert.deepEqual(withBob.receipt, receipt, "the receipt keeps the commit's signers");
      assert.equal((await delivery.catalog.addSignature(m.bundle_id, m.revision, sshSignWith(alice.path, statement))).signatures.length, 2);
      await rejectsWith(delivery.catalog.addSignature(m.bundle_id, m.revision, sshSignWith(mallory.path, statement)), "bundle-signer-untrusted");
      await rejectsWith(delivery.catalog.addSignature(m.bundle_id, "nope", signature), "revision-not-found");

      assert.equal((await delivery.reads.getManifest(m.bundle_id, m.revision)).manifest_digest, m.manifest_digest);
      assert.deepEqual((await delivery.reads.signersOf(m.bundle_id, m.revision)).map((s) => s.principals), [["alice@example.com"], ["bob@example.com"]]);
      // alice's key leaves the file: bob's signature does not meet "any of alice", the revision stops.
      writeSigners([["bob@example.com", bob]]);
      await rejectsWith(delivery.reads.getManifest(m.bundle_id, m.revision), "bundle-signer-revoked");
      await rejectsWith(delivery.reads.signersOf(m.bundle_id, m.revision), "bundle-signer-revoked");
      assert.equal((await delivery.catalog.show(m.bundle_id)).revisions.length, 1, "nothing deleted");
      writeSigners([
        ["alice@example.com", alice],
        ["bob@example.com", bob],
      ]);
      await delivery.reads.getManifest(m.bundle_id, m.revision);

      // Stored signatures outlive a restart, and a tampered one is refused at use.
      await first.close();
      const reopened = await state.open({ trust: policy() });
      const again = (await reopened.delivery.catalog.show(m.bundle_id)).revisions[0]!;
      assert.deepEqual(again.receipt, receipt);
      assert.deepEqual(again.signatures.map((s) => s.fingerprint), [alice.fingerprint, bob.fingerprint]);
      const other = sshSignWith(alice.path, bundleStatement({ ...m, revision: "other" }));
      assert.equal(await state.editRows("commit_signatures", { fingerprint: alice.fingerprint, manifest_digest: m.manifest_digest }, { signature: other }), 1);
      await reopened.close();
      const fresh = await state.open({ trust: policy() });
      await rejectsWith(fresh.delivery.reads.getManifest(m.bundle_id, m.revision), "bundle-signature-invalid");
    });

    test("without a rule: signatures are verified and stored, nothing is required", async (t) => {
      const { delivery } = await (await backend.state(t)).open();
      const built = uniqueBundle([2_000]);
      const begun = await delivery.begin(built.manifest);
      await uploadMissing(delivery, begun, built.blobs, 7_000);
      await rejectsWith(delivery.commit(begun.stage_id, [sshSignWith(mallory.path, "something else")]), "bundle-signature-invalid");
      const receipt = await delivery.commit(begun.stage_id, [sshSignWith(mallory.path, bundleStatement(built.manifest))]);
      assert.deepEqual(receipt.signers?.map((s) => [s.principals, s.fingerprint]), [[[], mallory.fingerprint]]);
      const unsigned = uniqueBundle([1_000]);
      const b2 = await delivery.begin(unsigned.manifest);
      await uploadMissing(delivery, b2, unsigned.blobs, 7_000);
      const plain = await delivery.commit(b2.stage_id);
      assert.equal(plain.signers, undefined, "an unsigned receipt is the receipt as before signatures");
    });
  });
}
