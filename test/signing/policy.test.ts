/**
 * The trust policy over allowed_signers files: each refusal with its own code, any-of / all-of /
 * k-of with distinct keys, valid-after / valid-before, namespaces=, cert-authority with an SSH user
 * certificate signed through ssh-agent, revocation seen at use without a restart; every accepted
 * case also accepted by OpenSSH's own `ssh-keygen -Y verify` for the same principal.
 */
import { before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { chmodSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { isWardenError } from "../../src/core/errors.js";
import { parseAllowedSigners } from "../../src/signing/allowed-signers.js";
import { TrustPolicy, type TrustRuleConfig } from "../../src/signing/policy.js";
import { bundleStatement } from "../../src/signing/statement.js";
import { certify, codeOf, makeKey, opensshVerifies, skEd25519Signature, sshAdd, sshSignWith, startAgent, type TestKey } from "./ssh-fixtures.js";
import { tempDir } from "../support/temp.js";

const subject = (revision = "r1") => ({
  bundle_id: "team-tools",
  revision,
  bundle_digest: "sha256:" + "a".repeat(64),
  manifest_digest: "sha256:" + "b".repeat(64),
});

const refusal = codeOf;

describe("trust policy", () => {
  const dir = tempDir("sign");
  let alice: TestKey, bob: TestKey, carol: TestKey, dave: TestKey, old: TestKey, future: TestKey, ca: TestKey, cert: TestKey;
  const file = join(dir, "allowed_signers");
  let lines: string[];
  const write = (content: readonly string[]): void => {
    writeFileSync(file, content.join("\n") + "\n");
    chmodSync(file, 0o644);
  };
  const policy = (rule: Partial<TrustRuleConfig>): TrustPolicy => new TrustPolicy({ rules: [{ bundles: "team-*", allowed_signers: file, ...rule }] });
  const sign = (key: TestKey, revision = "r1"): string => sshSignWith(key.path, bundleStatement(subject(revision)));

  before(() => {
    alice = makeKey(dir, "alice", "ed25519");
    bob = makeKey(dir, "bob", "ecdsa", 256);
    carol = makeKey(dir, "carol", "rsa", 2048);
    dave = makeKey(dir, "dave", "ed25519");
    old = makeKey(dir, "old", "ed25519");
    future = makeKey(dir, "future", "ed25519");
    ca = makeKey(dir, "ca", "ed25519");
    cert = makeKey(dir, "certuser", "ed25519");
    lines = [
      "# team signers",
      `alice@example.com ${alice.publicLine} alice`,
      `bob@example.com namespaces="warden-bundle,git" ${bob.publicLine}`,
      `"carol@example.com" ${carol.publicLine}`,
      `old@example.com valid-before="20200101Z" ${old.publicLine}`,
      `future@example.com valid-after="29990101Z" ${future.publicLine}`,
      `dave@example.com namespaces="git" ${dave.publicLine}`,
      `*@ca.example.com cert-authority ${ca.publicLine}`,
    ];
    write(lines);
  });

  test("any signer of the file; refusals each with their code; OpenSSH agrees", () => {
    const p = policy({});
    assert.equal(refusal(() => p.accept(subject(), [], Date.now())), "bundle-signature-required");
    const accepted = p.accept(subject(), [sign(alice)], Date.now());
    assert.deepEqual(accepted.map((s) => [s.fingerprint, s.principals]), [[alice.fingerprint, ["alice@example.com"]]]);
    assert.ok(opensshVerifies(file, "alice@example.com", bundleStatement(subject()), accepted[0]!.signature, dir).ok);
    // dave's line only allows namespace git: untrusted here, and OpenSSH refuses too.
    assert.equal(refusal(() => p.accept(subject(), [sign(dave)], Date.now())), "bundle-signer-untrusted");
    assert.equal(opensshVerifies(file, "dave@example.com", bundleStatement(subject()), sign(dave), dir).ok, false);
    assert.equal(refusal(() => p.accept(subject(), [sign(old)], Date.now())), "bundle-signer-expired");
    assert.equal(opensshVerifies(file, "old@example.com", bundleStatement(subject()), sign(old), dir).ok, false);
    assert.equal(refusal(() => p.accept(subject(), [sign(future)], Date.now())), "bundle-signer-not-yet-valid");
    // A signature over another revision.
    assert.equal(refusal(() => p.accept(subject(), [sign(alice, "r2")], Date.now())), "bundle-signature-invalid");
    const stranger = makeKey(dir, "stranger", "ed25519");
    assert.equal(refusal(() => p.accept(subject(), [sign(stranger)], Date.now())), "bundle-signer-untrusted");
  });

  test("any of, all of, k of: each principal by a different key", () => {
    assert.equal(refusal(() => policy({ any_of: ["bob@example.com"] }).accept(subject(), [sign(alice)], Date.now())), "bundle-signer-untrusted");
    assert.equal(refusal(() => policy({ any_of: ["bob@example.com", "alice@example.com"] }).accept(subject(), [sign(alice)], Date.now())), "accepted");
    const all = policy({ all_of: ["alice@example.com", "bob@example.com"] });
    assert.equal(refusal(() => all.accept(subject(), [sign(alice)], Date.now())), "bundle-signer-untrusted");
    const both = all.accept(subject(), [sign(alice), sign(bob)], Date.now());
    assert.deepEqual(both.map((s) => s.principals[0]).sort(), ["alice@example.com", "bob@example.com"]);
    assert.ok(opensshVerifies(file, "bob@example.com", bundleStatement(subject()), both.find((s) => s.fingerprint === bob.fingerprint)!.signature, dir).ok);
    const kOf = policy({ k_of: { k: 2, principals: ["alice@example.com", "bob@example.com", "carol@example.com"] } });
    assert.equal(refusal(() => kOf.accept(subject(), [sign(carol), sign(alice)], Date.now())), "accepted");
    assert.equal(refusal(() => kOf.accept(subject(), [sign(carol), sign(carol)], Date.now())), "bundle-signer-untrusted");
    // One key listed under two principals still counts once.
    write([...lines, `bob@example.com ${alice.publicLine}`]);
    assert.equal(refusal(() => kOf.accept(subject(), [sign(alice)], Date.now())), "bundle-signer-untrusted");
    write(lines);
  });

  test("cert-authority: an SSH user certificate signed through ssh-agent", async () => {
    const certFile = certify(ca.path, cert, ["erin@ca.example.com", "ops"]);
    const agent = await startAgent(dir);
    try {
      sshAdd(agent.env, cert.path);
      const armored = sshSignWith(certFile, bundleStatement(subject()), "warden-bundle", agent.env);
      const [record] = policy({ any_of: ["erin@ca.example.com"] }).accept(subject(), [armored], Date.now());
      assert.equal(record!.key_type, "ssh-ed25519-cert-v01@openssh.com");
      assert.equal(record!.fingerprint, cert.fingerprint, "a certificate is identified by its key's fingerprint, as ssh-keygen -l prints it");
      assert.deepEqual(record!.principals, ["erin@ca.example.com"], "the certificate's principals the line admits ('ops' is not)");
      assert.ok(opensshVerifies(file, "erin@ca.example.com", bundleStatement(subject()), armored, dir).ok);
      assert.equal(refusal(() => policy({ any_of: ["ops"] }).accept(subject(), [armored], Date.now())), "bundle-signer-untrusted");
      // An expired certificate.
      const expiredCert = makeKey(dir, "expiredcert", "ed25519");
      const expiredFile = certify(ca.path, expiredCert, ["erin@ca.example.com"], "20200101:20200102");
      sshAdd(agent.env, expiredCert.path);
      const late = sshSignWith(expiredFile, bundleStatement(subject()), "warden-bundle", agent.env);
      assert.equal(refusal(() => policy({}).accept(subject(), [late], Date.now())), "bundle-signer-expired");
      assert.equal(opensshVerifies(file, "erin@ca.example.com", bundleStatement(subject()), late, dir).ok, false);
    } finally {
      agent.stop();
    }
  });

  test("sk-ssh-ed25519 signer listed in allowed_signers", () => {
    const sk = skEd25519Signature(bundleStatement(subject()));
    write([...lines, `sk@example.com ${sk.publicLine}`]);
    const [record] = policy({ any_of: ["sk@example.com"] }).accept(subject(), [sk.armored], Date.now());
    assert.equal(record!.key_type, "sk-ssh-ed25519@openssh.com");
    write(lines);
  });

  test("revocation: removing a key from the file stops use at once; restoring it allows it again", () => {
    const p = policy({ any_of: ["alice@example.com"] });
    const stored = p.accept(subject(), [sign(alice)], Date.now());
    assert.deepEqual(p.checkAtUse(subject(), stored).map((s) => s.principals), [["alice@example.com"]]);
    write(lines.filter((l) => !l.startsWith("alice@")));
    assert.equal(refusal(() => p.checkAtUse(subject(), stored)), "bundle-signer-revoked");
    write(lines);
    assert.equal(refusal(() => p.checkAtUse(subject(), stored)), "accepted");
    assert.equal(refusal(() => p.checkAtUse(subject(), [])), "bundle-signature-required");
    // A stored signature moved to another revision does not verify there.
    assert.equal(refusal(() => p.checkAtUse(subject("r9"), stored)), "bundle-signature-invalid");
  });

  test("a damaged allowed_signers file fails closed, naming the line", () => {
    const bad = (text: string): string => {
      try {
        parseAllowedSigners(text, "f");
      } catch (error) {
        if (isWardenError(error)) return `${error.code}:${String(error.details.line)}`;
        throw error;
      }
      return "parsed";
    };
    assert.equal(bad(`a ${alice.publicLine}\n`), "parsed");
    assert.equal(bad(`\n# c\na frobnicate ${alice.publicLine}\n`), "allowed-signers-invalid:3");
    assert.equal(bad(`a ssh-dss AAAAB3NzaC1kc3M=\n`), "allowed-signers-invalid:1");
    assert.equal(bad(`a ssh-ed25519 %%%\n`), "allowed-signers-invalid:1");
    assert.equal(bad(`a valid-after="2020" ${alice.publicLine}\n`), "allowed-signers-invalid:1");
    assert.equal(bad(`a namespaces="x ${alice.publicLine}\n`), "allowed-signers-invalid:1");
    assert.equal(bad(`a\n`), "allowed-signers-invalid:1");
    assert.equal(bad(`a ${bob.publicLine.split(" ")[0]} ${alice.publicLine.split(" ")[1]}\n`), "allowed-signers-invalid:1");
    writeFileSync(file, "a ssh-ed25519 %%%\n");
    assert.equal(refusal(() => policy({}).accept(subject(), [sign(alice)], Date.now())), "allowed-signers-invalid");
    write(lines);
    chmodSync(file, 0o666);
    assert.equal(refusal(() => policy({}).accept(subject(), [sign(alice)], Date.now())), "allowed-signers-invalid");
    chmodSync(file, 0o644);
  });

});
