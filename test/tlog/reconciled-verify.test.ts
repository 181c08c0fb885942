/**
 * `warden journal verify RUN --policy` of a run that was killed and then reconciled: it was never
 * recorded, so the log holds no seal of it, but the operator's receipt is logged (`run.reconciled`).
 * The auditor checks that leaf, into a checkpoint a witness cosigned, instead of failing with
 * `log-leaf-not-found` after printing OK.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { createHash, randomUUID } from "node:crypto";
import * as fs from "node:fs";
import * as path from "node:path";
import type { AddressInfo } from "node:net";
import { EmbeddedKeyStore } from "../../src/backends/embedded/journal/key-store.js";
import { ensurePrivateDirSync } from "../../src/storage/secure-fs.js";
import { verifierFor } from "../../src/tlog/cosignature.js";
import { formatVkey, parseVkey, SIG_ED25519 } from "../../src/tlog/note.js";
import type { ReconciliationReceipt } from "../../src/client/wire.js";
import { parsePolicy } from "../../src/tlog/policy.js";
import { verifyLoggedReconciliation, type RunProofDocument } from "../../src/tlog/verify.js";
import { waitFor } from "../support/wait.js";
import { OBSERVER, OBSERVER_TOKEN, OPERATOR, json, openTestNode, type TestNode } from "../support/app-node.js";
import { startWitness, type RunningWitness } from "./witness-fixture.js";
import { tempDir } from "../support/temp.js";
import { wardenInProcess } from "../support/cli.js";

const ORIGIN = "warden.test/reconciled";

describe("journal verify --policy of a reconciled run", () => {
  let root: string;
  let node: TestNode;
  let witness: RunningWitness;
  let url: string;
  let logVkey: string;
  before(async () => {
    root = tempDir("tlog-reconciled");
    // The node's key first, so the witness can be told which log it witnesses.
    const home = path.join(root, "home");
    ensurePrivateDirSync(home, { create: true });
    const nodeKey = await new EmbeddedKeyStore(path.join(home, "keys")).active();
    logVkey = formatVkey(ORIGIN, SIG_ED25519, nodeKey.public_key);
    witness = await startWitness(path.join(root, "witness"), logVkey);
    node = await openTestNode(root, {
      warden: { log: { origin: ORIGIN, checkpointIntervalMs: 10, witnesses: [{ name: "witness.test/w1", url: witness.url, verifier: parseVkey(witness.vkey, verifierFor) }] } },
    });
    await node.app.listen({ host: "127.0.0.1", port: 0 });
    url = `http://127.0.0.1:${(node.app.server.address() as AddressInfo).port}`;
  });
  after(async () => {
    await node.close();
    await witness.stop();
    fs.rmSync(root, { recursive: true, force: true });
  });

  async function cli(...argv: string[]): Promise<{ code: number | null; out: string; err: string }> {
    const run = await wardenInProcess(argv, { env: { WARDEN_URL: url, WARDEN_TOKEN: OBSERVER_TOKEN }, cwd: root });
    return { code: run.code, out: run.stdout, err: run.stderr };
  }
  const get = (u: string) => node.app.inject({ url: u, headers: OBSERVER });

  it("checks the receipt's leaf (there is no seal) in a witnessed checkpoint; a receipt the log does not hold fails", async () => {
    const id = randomUUID();
    const started = await node.app.inject({ method: "POST", url: "/v1/invocations", headers: { ...OPERATOR, "idempotency-key": id }, payload: { provider: "claude", prompt: "fix it #kill" } });
    assert.equal(started.statusCode, 202, started.payload);
    const runId = json(started.payload).run_id as string;
    await waitFor("the killed run to be unresolved", async () => (json((await get(`/v1/invocations/api:alice/${id}`)).payload).status === "unresolved" ? true : undefined));
    const inspection = json((await get(`/v1/invocations/api:alice/${id}/inspection`)).payload);
    const review = {
      snapshot_hash: inspection.snapshot_hash,
      outcome: "no_effects",
      rationale: "the agent was killed before it wrote anything",
      evidence: [{ reference: "OPS-27", sha256: `sha256:${createHash("sha256").update("operator notes: workspace unchanged\n").digest("hex")}` }],
      effects_stopped: true,
    };
    const reconciled = await node.app.inject({ method: "POST", url: `/v1/invocations/api:alice/${id}/reconciliation`, headers: OPERATOR, payload: review });
    assert.equal(reconciled.statusCode, 201, reconciled.payload);
    // The receipt's leaf, in a checkpoint the witness cosigned.
    await waitFor("the receipt's leaf in a cosigned checkpoint", async () => {
      const proof = await get(`/v1/log/reconciliations/${runId}`);
      return proof.statusCode === 200 && (json(proof.payload).checkpoint as string).includes("— witness.test/w1 ") ? true : undefined;
    });

    const policy = path.join(root, "policy.txt");
    fs.writeFileSync(policy, `log ${logVkey}\nwitness w1 ${witness.vkey}\nquorum w1\n`);
    const verified = await cli("journal", "verify", runId, "--policy", policy);
    assert.equal(verified.code, 0, verified.out + verified.err);
    assert.match(verified.out, /^OK /m);
    assert.match(verified.out, /^reconciled: no_effects by alice at .*; its signed receipt covers this journal$/m);
    assert.match(verified.out, new RegExp(`^NO SEAL run ${runId}: it was never recorded`, "m"));
    assert.match(verified.out, new RegExp(`^LOGGED reconciliation of run ${runId} by alice: leaf \\d+ of ${ORIGIN} at size \\d+, cosigned by w1$`, "m"));

    // A policy whose quorum the checkpoint does not meet (another witness) is refused.
    const other = path.join(root, "other-policy.txt");
    const stranger = formatVkey("witness.test/w2", 0x04, Buffer.alloc(32, 7).toString("base64"));
    fs.writeFileSync(other, `log ${logVkey}\nwitness w2 ${stranger}\nquorum w2\n`);
    const unwitnessed = await cli("journal", "verify", runId, "--policy", other);
    assert.equal(unwitnessed.code, 1, unwitnessed.out);
    assert.match(unwitnessed.out, new RegExp(`^NOT LOGGED run ${runId}: note-not-verified`, "m"));

    // The leaf must be this receipt's: a receipt with its rationale rewritten (and re-signed or
    // not, the leaf holds the stored receipt's sha256) is refused.
    const receipt = json((await get(`/v1/invocations/api:alice/${id}`)).payload).receipt as ReconciliationReceipt;
    const document = json((await get(`/v1/log/reconciliations/${runId}`)).payload) as unknown as RunProofDocument;
    const rules = parsePolicy(fs.readFileSync(policy, "utf8"));
    assert.equal(verifyLoggedReconciliation(receipt, runId, document, rules).statement.operator, "alice");
    const rewritten = { ...receipt, review: { ...receipt.review, rationale: "nothing to see" } };
    assert.throws(() => verifyLoggedReconciliation(rewritten, runId, document, rules), { code: "log-receipt-mismatch" });
    assert.throws(() => verifyLoggedReconciliation(receipt, randomUUID(), document, rules), { code: "log-receipt-mismatch" });
  });
});
