/**
 * SSHSIG parsing and in-process verification against signatures the real `ssh-keygen -Y sign`
 * made, for each key type; fingerprints as `ssh-keygen -l` prints them; an sk-ssh-ed25519
 * signature built per PROTOCOL.u2f (no hardware token here) that OpenSSH itself accepts.
 */
import { describe, test } from "node:test";
import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { encodeArmor, parseSshsig, verifySshsig } from "../../src/signing/sshsig.js";
import { bundleStatement } from "../../src/signing/statement.js";
import { SshWriter } from "../../src/signing/ssh-wire.js";
import { codeOf, makeKey, opensshVerifies, skEd25519Signature, sshSignWith } from "./ssh-fixtures.js";
import { tempDir } from "../support/temp.js";

const subject = {
  bundle_id: "review-tools",
  revision: "r1",
  bundle_digest: "sha256:ba71773aa731bdc2e460cbde965db223f9fa8d499a1b97acc8ceeb376dcc432a",
  manifest_digest: "sha256:" + "1".repeat(64),
};
const statement = bundleStatement(subject);
const message = Buffer.from(statement, "utf8");

describe("SSHSIG by ssh-keygen -Y sign verifies in-process", () => {
  const dir = tempDir("sign");
  const cases = [
    { name: "ed25519", type: "ed25519" as const, wire: "ssh-ed25519", sigType: "ssh-ed25519" },
    { name: "ecdsa256", type: "ecdsa" as const, bits: 256, wire: "ecdsa-sha2-nistp256", sigType: "ecdsa-sha2-nistp256" },
    { name: "ecdsa384", type: "ecdsa" as const, bits: 384, wire: "ecdsa-sha2-nistp384", sigType: "ecdsa-sha2-nistp384" },
    { name: "ecdsa521", type: "ecdsa" as const, bits: 521, wire: "ecdsa-sha2-nistp521", sigType: "ecdsa-sha2-nistp521" },
    { name: "rsa", type: "rsa" as const, bits: 3072, wire: "ssh-rsa", sigType: "rsa-sha2-512" },
  ];
  for (const c of cases) {
    test(`${c.wire} (${c.sigType})`, () => {
      const key = makeKey(dir, c.name, c.type, c.bits);
      const armored = sshSignWith(key.path, statement);
      const sig = parseSshsig(armored);
      assert.equal(sig.publicKey.type, c.wire);
      assert.equal(sig.namespace, "warden-bundle");
      assert.equal(sig.publicKey.key.fingerprint, key.fingerprint, "fingerprint as ssh-keygen -l prints it");
      const wire = Buffer.from(sig.signature);
      const sigType = wire.subarray(4, 4 + wire.readUInt32BE(0)).toString();
      assert.equal(sigType, c.sigType);
      verifySshsig(sig, message, "warden-bundle");
      // Another revision, another digest, another namespace: refused.
      assert.equal(codeOf(() => verifySshsig(sig, Buffer.from(bundleStatement({ ...subject, revision: "r2" })), "warden-bundle")), "bundle-signature-invalid");
      assert.equal(codeOf(() => verifySshsig(sig, Buffer.from(bundleStatement({ ...subject, bundle_digest: "sha256:" + "0".repeat(64) })), "warden-bundle")), "bundle-signature-invalid");
      assert.equal(codeOf(() => verifySshsig(parseSshsig(sshSignWith(key.path, statement, "file")), message, "warden-bundle")), "bundle-signature-invalid");
      // One flipped bit in the signature value.
      const blob = Buffer.from(sig.blob);
      blob[blob.length - 3]! ^= 0x01;
      const flipped = codeOf(() => verifySshsig(parseSshsig(encodeArmor(blob)), message, "warden-bundle"));
      assert.ok(flipped === "bundle-signature-invalid" || flipped === "bundle-signature-malformed", flipped);
    });
  }

  test("armor and blob damage is refused with a code", () => {
    const key = makeKey(dir, "damage", "ed25519");
    const armored = sshSignWith(key.path, statement);
    assert.equal(codeOf(() => parseSshsig(armored.slice(0, armored.length - 12))), "bundle-signature-malformed");
    assert.equal(codeOf(() => parseSshsig(armored.replace(/\n(.)/, "\n!"))), "bundle-signature-malformed");
    assert.equal(codeOf(() => parseSshsig("hello")), "bundle-signature-malformed");
    assert.equal(codeOf(() => parseSshsig(encodeArmor(Buffer.from("SSHSIG")))), "bundle-signature-malformed");
    const blob = Buffer.from(parseSshsig(armored).blob);
    assert.equal(codeOf(() => parseSshsig(encodeArmor(blob.subarray(0, blob.length - 1)))), "bundle-signature-malformed");
    const v2 = Buffer.from(blob);
    v2.writeUInt32BE(2, 6);
    assert.equal(codeOf(() => parseSshsig(encodeArmor(v2))), "bundle-signature-malformed");
    // A key type warden does not know.
    const unknown = new SshWriter().raw("SSHSIG").uint32(1).string(new SshWriter().string("ssh-dss").string("x").bytes()).string("warden-bundle").string("").string("sha512").string("sig").bytes();
    assert.equal(codeOf(() => parseSshsig(encodeArmor(unknown))), "bundle-signature-key-unsupported");
    assert.equal(codeOf(() => parseSshsig("x".repeat(70_000))), "bundle-signature-malformed");
  });
});

test("sk-ssh-ed25519: a signature built per PROTOCOL.u2f verifies here and in OpenSSH", () => {
  const dir = tempDir("sign");
  const { armored, publicLine } = skEd25519Signature(statement);
  const sig = parseSshsig(armored);
  assert.equal(sig.publicKey.type, "sk-ssh-ed25519@openssh.com");
  assert.deepEqual(verifySshsig(sig, message, "warden-bundle"), { flags: 1, counter: 7 });
  assert.equal(codeOf(() => verifySshsig(sig, Buffer.from("other"), "warden-bundle")), "bundle-signature-invalid");
  const allowed = join(dir, "allowed_signers");
  writeFileSync(allowed, `alice@example.com ${publicLine}\n`);
  const openssh = opensshVerifies(allowed, "alice@example.com", statement, armored, dir);
  assert.ok(openssh.ok, openssh.output);
  // The application's hash is part of what the key signed: the same signature under another
  // application does not verify.
  const blob = Buffer.from(sig.blob);
  const at = blob.indexOf("ssh:");
  blob[at + 3] = ";".charCodeAt(0);
  assert.equal(codeOf(() => verifySshsig(parseSshsig(encodeArmor(blob)), message, "warden-bundle")), "bundle-signature-invalid");
});

test("the statement is byte for byte DESIGN.md's vector", () => {
  assert.equal(
    bundleStatement({ ...subject, manifest_digest: "sha256:" + "0".repeat(64) }),
    '{"bundle_digest":"sha256:ba71773aa731bdc2e460cbde965db223f9fa8d499a1b97acc8ceeb376dcc432a","bundle_id":"review-tools","manifest_digest":"sha256:0000000000000000000000000000000000000000000000000000000000000000","revision":"r1","v":1}',
  );
});
