/**
 * Signed bundles at run start: run.started names the revision's signers (principals and key
 * fingerprints); a key removed from allowed_signers refuses the next run of an already committed
 * revision before any claim (the id stays free) and before anything is materialized.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as path from "node:path";
import { randomUUID } from "node:crypto";
import { isWardenError } from "../../src/core/errors.js";
import { TrustPolicy } from "../../src/signing/policy.js";
import { fullBundleFiles } from "../providers/helpers.js";
import { makeKey, sshSignWith, type TestKey } from "../signing/ssh-fixtures.js";
import { SCOPE, journalOf, openRunnerEnv, pushBundle, starts, type RunnerEnv } from "./helpers.js";
import { tempDir } from "../support/temp.js";

const BUNDLE = { bundle_id: "signed-tools", revision: "r1" };

describe("runner with a signed bundle", () => {
  let root: string;
  let env: RunnerEnv;
  let alice: TestKey;
  let allowed: string;

  before(async () => {
    root = tempDir("signed-runner");
    alice = makeKey(root, "alice", "ed25519");
    allowed = path.join(root, "allowed_signers");
    fs.writeFileSync(allowed, `alice@example.com ${alice.publicLine}\n`, { mode: 0o644 });
    env = await openRunnerEnv(root, { trust: new TrustPolicy({ rules: [{ bundles: "signed-*", allowed_signers: allowed, any_of: ["alice@example.com"] }] }) });
    await pushBundle(env.delivery, BUNDLE.bundle_id, BUNDLE.revision, fullBundleFiles(), (statement) => [sshSignWith(alice.path, statement)]);
  });
  after(async () => {
    await env.close();
    fs.rmSync(root, { recursive: true, force: true });
  });

  it("run.started carries the signers; a revoked signer refuses the run before its claim", async () => {
    const outcome = await env.runner.invoke({ scope: SCOPE, id: randomUUID(), request: { provider: "claude", prompt: "review", bundle: BUNDLE } });
    assert.equal(outcome.status, "recorded", JSON.stringify(outcome));
    const runId = (outcome as { audit: { run_id: string } }).audit.run_id;
    const journal = await journalOf(env, runId);
    const started = journal.entries[0]!.event as { type: string; bundle?: { signers?: { principals: string[]; fingerprint: string }[] } };
    assert.equal(started.type, "run.started");
    assert.deepEqual(started.bundle?.signers?.map((s) => [s.principals, s.fingerprint]), [[["alice@example.com"], alice.fingerprint]]);
    const launched = starts(env.startsFile).length;

    fs.writeFileSync(allowed, "# alice left the team\n");
    const id = randomUUID();
    await assert.rejects(
      env.runner.invoke({ scope: SCOPE, id, request: { provider: "claude", prompt: "review", bundle: BUNDLE } }),
      (e: unknown) => isWardenError(e) && e.code === "bundle-signer-revoked",
    );
    assert.equal(await env.invocations.lookup(SCOPE, id), undefined, "no claim: the id stays free");
    assert.equal(starts(env.startsFile).length, launched, "no agent launched");
    await assert.rejects(
      env.materializer.materialize({ provider: "claude", bundle: BUNDLE, session: randomUUID() }),
      (e: unknown) => isWardenError(e) && e.code === "bundle-signer-revoked",
    );
  });
});
