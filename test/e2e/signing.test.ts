/**
 * Signed bundles end to end through the real CLI and a real node: `warden push --sign` with a
 * passphrase-protected key (the passphrase through SSH_ASKPASS, as ssh-keygen asks for it),
 * `warden bundles sign --agent` through a real ssh-agent, the node's trust policy from warden.json,
 * every stored signature checked by OpenSSH's own `ssh-keygen -Y verify`, and malformed input
 * answered with its code while the node keeps serving.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { chmodSync, mkdirSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { WardenClient } from "../../src/client/index.js";
import { bundleStatement } from "../../src/signing/statement.js";
import { httpCall, removeHome, startNode, warden, type NodeProcess } from "../support/node.js";
import { makeKey, opensshVerifies, sshAdd, startAgent, type TestKey } from "../signing/ssh-fixtures.js";
import { tempDir } from "../support/temp.js";

function bundleDir(root: string, name: string, text: string): string {
  const dir = join(root, name);
  mkdirSync(join(dir, "skills", "review"), { recursive: true });
  writeFileSync(join(dir, "skills", "review", "SKILL.md"), `---\nname: review\ndescription: ${text}\n---\nReview the diff.\n`);
  return dir;
}

describe("signed bundles through the CLI", () => {
  const root = tempDir("signing-e2e");
  const allowed = join(root, "allowed_signers");
  let node: NodeProcess;
  let alice: TestKey;
  let bob: TestKey;
  let env: Record<string, string>;

  before(async () => {
    alice = makeKey(root, "alice", "ed25519", undefined, "correct horse");
    bob = makeKey(root, "bob", "ecdsa", 256);
    writeFileSync(allowed, `alice@example.com ${alice.publicLine}\nbob@example.com ${bob.publicLine}\n`);
    chmodSync(allowed, 0o644);
    const askpass = join(root, "askpass.sh");
    writeFileSync(askpass, "#!/bin/sh\necho 'correct horse'\n", { mode: 0o700 });
    node = await startNode({ config: { signing: { rules: [{ bundles: "signed-*", allowed_signers: allowed, any_of: ["alice@example.com"] }] } } });
    env = { WARDEN_URL: node.url, WARDEN_TOKEN: node.token, SSH_ASKPASS: askpass, SSH_ASKPASS_REQUIRE: "force", DISPLAY: ":0" };
  });
  after(async () => {
    await node?.stop();
    removeHome(node);
    rmSync(root, { recursive: true, force: true });
  });

  it("push --sign with a passphrase-protected key; bundles sign --agent; OpenSSH verifies what the node stored", async () => {
    const unsigned = await warden(["push", bundleDir(root, "u", "unsigned"), "--bundle-id", "signed-unsigned", "--no-progress"], { env });
    assert.equal(unsigned.code, 1);
    assert.match(unsigned.stderr, /\(bundle-signature-required\)/);
    assert.doesNotMatch(unsigned.stderr, /\n\s+at /, "one line, no stack");
    const byBob = await warden(["push", bundleDir(root, "b", "by bob"), "--bundle-id", "signed-bob", "--no-progress", "--sign", bob.path], { env });
    assert.equal(byBob.code, 1);
    assert.match(byBob.stderr, /\(bundle-signer-untrusted\)/);

    const pushed = await warden(["push", bundleDir(root, "a", "by alice"), "--bundle-id", "signed-tools", "--no-progress", "--sign", alice.path, "--json"], { env });
    assert.equal(pushed.code, 0, pushed.stderr);
    const result = JSON.parse(pushed.stdout) as { receipt: { revision: string; signers: { principals: string[]; fingerprint: string }[] } };
    assert.deepEqual(result.receipt.signers.map((s) => [s.principals, s.fingerprint]), [[["alice@example.com"], alice.fingerprint]]);
    const revision = result.receipt.revision;

    const agent = await startAgent(root);
    try {
      sshAdd(agent.env, bob.path);
      const signed = await warden(["bundles", "sign", `signed-tools@${revision}`, "--agent"], { env: { ...env, SSH_AUTH_SOCK: agent.sock } });
      assert.equal(signed.code, 0, signed.stderr);
      assert.match(signed.stdout, new RegExp(`signed by bob@example.com  ${bob.fingerprint.replace(/[+/]/g, "\\$&")}`));
    } finally {
      agent.stop();
    }

    const shown = await warden(["bundles", "show", "signed-tools"], { env });
    assert.match(shown.stdout, /signed by alice@example.com/);
    assert.match(shown.stdout, /signed by bob@example.com/);
    const client = new WardenClient({ url: node.url, token: node.token });
    const view = (await client.getBundle("signed-tools")).revisions[0]!;
    const statement = bundleStatement(view.receipt);
    for (const s of view.signatures) {
      const check = opensshVerifies(allowed, s.principals[0]!, statement, s.signature!, root);
      assert.ok(check.ok, check.output);
    }
  });

  it("malformed signatures and commit bodies are refused with a code; the node keeps serving", async () => {
    const revision = (await new WardenClient({ url: node.url, token: node.token }).getBundle("signed-tools")).revisions[0]!.revision;
    const bad = async (route: string, json: unknown): Promise<string> => {
      const reply = await httpCall(node.url, node.token, "POST", route, { body: json });
      return `${reply.status} ${String(reply.body.code)}`;
    };
    const route = `/v1/bundles/signed-tools/${revision}/signatures`;
    assert.equal(await bad(route, { signature: "-----BEGIN SSH SIGNATURE-----\nU1NI\n" }), "400 bundle-signature-malformed");
    assert.equal(await bad(route, { signature: "-----BEGIN SSH SIGNATURE-----\n%%%%\n-----END SSH SIGNATURE-----" }), "400 bundle-signature-malformed");
    assert.equal(await bad(route, { signature: "x".repeat(70_000) }), "400 signature-field-invalid");
    assert.equal(await bad(route, { nope: 1 }), "400 signature-unknown-field");
    assert.equal(await bad("/v1/stages/" + "0".repeat(32) + "/commit", { signatures: "x" }), "400 commit-body-invalid");
    const health = await httpCall(node.url, node.token, "GET", "/healthz");
    assert.equal(health.status, 200);
  });
});
