/**
 * The transparency log on a real node (embedded backend, HTTP routes by inject): a run's seal, a
 * reconciliation receipt, a bundle commit and the node's key each become a leaf; their proofs
 * verify; the attacks done with the node's own key are caught; a leaf survives kill -9 before its
 * checkpoint.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as path from "node:path";
import { randomUUID } from "node:crypto";
import { EmbeddedKeyStore } from "../../src/backends/embedded/journal/key-store.js";
import { verifyJournal } from "../../src/journal/verify.js";
import type { JournalEvent } from "../../src/journal/types.js";
import { parseCheckpointText } from "../../src/tlog/checkpoint.js";
import { leafHash, verifyConsistency, verifyInclusion } from "../../src/tlog/merkle.js";
import { parseNote } from "../../src/tlog/note.js";
import { parsePolicy } from "../../src/tlog/policy.js";
import { parseHashes, verifyCheckpointConsistency, verifyLoggedRun, type RunProofDocument } from "../../src/tlog/verify.js";
import { buildLines, entryOf } from "../journal/helpers.js";
import { OBSERVER, OPERATOR, compileTestBundle, json, openTestNode, pushThroughApp, type TestNode } from "../support/app-node.js";
import { ValidationError } from "../../src/core/errors.js";
import { parseVkey } from "../../src/tlog/note.js";
import { verifierFor } from "../../src/tlog/cosignature.js";
import { entryLeaves } from "./entries.js";
import { READY_MS, waitFor } from "../support/wait.js";
import { tempDir } from "../support/temp.js";

describe("transparency log on a node", () => {
  let root: string;
  let node: TestNode;
  before(async () => {
    root = tempDir("tlog-node");
    node = await openTestNode(root, { warden: { log: { origin: "warden.test/log", checkpointIntervalMs: 10 } } });
  });
  after(async () => {
    await node.close();
    fs.rmSync(root, { recursive: true, force: true });
  });

  const get = (url: string) => node.app.inject({ url, headers: OBSERVER });
  const status = async () => json((await get("/v1/log")).payload) as { size: number; checkpoint_size: number; vkey: string };
  async function runToEnd(prompt: string, want: string): Promise<string> {
    const key = randomUUID();
    const res = await node.app.inject({ method: "POST", url: "/v1/invocations", headers: { ...OPERATOR, "idempotency-key": key }, payload: { provider: "claude", prompt, timeout_s: 1 } });
    assert.equal(res.statusCode, 202, res.payload);
    const view = await waitFor(`invocation ${key} to become ${want}`, async () => {
      const seen = json((await get(`/v1/invocations/api:alice/${key}`)).payload);
      return seen.status === want ? seen : undefined;
    }, READY_MS, 25);
    // A lookup can read `recorded` a moment before the seal's leaf is appended (the run's
    // owner appends it right after the record): wait for the leaf, which later steps count on.
    if (want === "recorded") await sealLogged(view.run_id as string);
    return `${view.run_id as string}|${key}`;
  }
  async function sealLogged(runId: string): Promise<void> {
    await waitFor(`the seal of run ${runId} in the log`, async () => ((await get(`/v1/log/runs/${runId}`)).statusCode === 200 ? true : undefined), READY_MS, 10);
  }
  async function checkpointCovering(size: number): Promise<string> {
    return waitFor(`a checkpoint of size ${size}`, async () => {
      const note = (await get("/v1/log/checkpoint")).payload;
      return parseCheckpointText(parseNote(note).text).size >= size ? note : undefined;
    }, READY_MS, 10);
  }
  const policy = async () => parsePolicy(`log ${(await status()).vkey}\nquorum none\n`);

  it("a run's seal, a bundle commit, a reconciliation receipt and the node's key are leaves whose inclusion proofs verify", async () => {
    const [runId] = (await runToEnd("logged run", "recorded")).split("|") as [string];
    await pushThroughApp(node.app, await compileTestBundle(root, "logged-tools", "r1"));
    const [cutRun, cutKey] = (await runToEnd("#hang", "unresolved")).split("|") as [string, string];
    const inspection = json((await node.app.inject({ url: `/v1/invocations/api:alice/${cutKey}/inspection`, headers: OPERATOR })).payload);
    const signed = await node.app.inject({
      method: "POST",
      url: `/v1/invocations/api:alice/${cutKey}/reconciliation`,
      headers: OPERATOR,
      payload: { snapshot_hash: inspection.snapshot_hash, outcome: "no_effects", rationale: "hung before any tool call", evidence: [{ reference: "journal", sha256: `sha256:${"1f".repeat(32)}` }], effects_stopped: true },
    });
    assert.equal(signed.statusCode, 201, signed.payload);

    const { size } = await status();
    const note = await checkpointCovering(size);
    const checkpoint = parseCheckpointText(parseNote(note).text);
    assert.equal(checkpoint.origin, "warden.test/log");
    // Read every leaf from the entry bundles, as a monitor does.
    const leaves: string[] = [];
    for (let tile = 0; tile * 256 < checkpoint.size; tile++) {
      const width = Math.min(256, checkpoint.size - tile * 256);
      const res = await get(`/v1/log/tile/entries/${String(tile).padStart(3, "0")}${width === 256 ? "" : `.p/${width}`}`);
      assert.equal(res.statusCode, 200, res.payload);
      leaves.push(...entryLeaves(res.rawPayload).map((leaf) => leaf.toString("utf8")));
    }
    assert.equal(leaves.length, checkpoint.size);
    const types = leaves.map((l) => JSON.parse(l) as { type: string; run_id?: string; bundle_id?: string });
    assert.ok(types.some((t) => t.type === "run.sealed" && t.run_id === runId), "the recorded run's seal");
    assert.ok(types.some((t) => t.type === "run.reconciled" && t.run_id === cutRun), "the reconciliation receipt");
    assert.ok(types.some((t) => t.type === "bundle.committed" && t.bundle_id === "logged-tools"), "the bundle commit");
    assert.ok(types.some((t) => t.type === "key.published"), "the node's key");
    for (const [index, leaf] of leaves.entries()) {
      const proof = json((await get(`/v1/log/proof/inclusion/${index}/${checkpoint.size}`)).payload) as { proof: string[] };
      assert.ok(verifyInclusion(index, checkpoint.size, leafHash(Buffer.from(leaf)), parseHashes(proof.proof), checkpoint.root), `leaf ${index}`);
    }
    // The sealed run's proof document verifies against its journal under a policy of the node's key.
    const document = json((await get(`/v1/log/runs/${runId}`)).payload) as unknown as RunProofDocument;
    const journal = (await get(`/v1/runs/${runId}/journal`)).rawPayload;
    const logged = verifyLoggedRun(journal, runId, document, await policy());
    assert.equal(logged.statement.run_id, runId);
    const missing = await get(`/v1/log/runs/${randomUUID()}`);
    assert.equal(missing.statusCode, 404);
    assert.equal(json(missing.payload).code, "log-leaf-not-found");
  });

  it("a journal rewritten and re-signed end to end with the node's own key verifies as a journal, but not against the log", async () => {
    const [runId] = (await runToEnd("to be rewritten", "recorded")).split("|") as [string];
    await checkpointCovering((await status()).size);
    const document = json((await get(`/v1/log/runs/${runId}`)).payload) as unknown as RunProofDocument;
    const journalPath = path.join(node.home, "journals", `${runId}.ndjson`);
    const original = fs.readFileSync(journalPath);
    const events = original.toString("utf8").trimEnd().split("\n").map((l) => entryOf(Buffer.from(l)).event) as JournalEvent[];
    // The attacker holds the node's key: change what the agent was asked, re-sign every line.
    const key = await new EmbeddedKeyStore(path.join(node.home, "keys")).active();
    const rewritten = Buffer.concat(buildLines(events.map((e) => (e.type === "run.started" ? ({ ...e, provider: "codex" } as JournalEvent) : e)), key, { runId }));
    const asJournal = verifyJournal(rewritten, [{ key_id: key.key_id, public_key: key.public_key }], { runId });
    assert.equal(asJournal.ok, true, "the node's key alone cannot tell");
    const trusted = await policy();
    assert.throws(
      () => verifyLoggedRun(rewritten, runId, document, trusted),
      (e: unknown) => e instanceof ValidationError && e.code === "log-seal-mismatch" && /sha256/.test(e.message),
    );
    assert.equal(verifyLoggedRun(original, runId, document, trusted).statement.run_id, runId);
  });

  it("a forged checkpoint of the same size, or a smaller tree that drops entries, is reported inconsistent", async () => {
    const vkey = (await status()).vkey;
    const logs = [parseVkey(vkey, verifierFor)];
    const old = await checkpointCovering((await status()).size);
    await runToEnd("one more", "recorded");
    const next = await checkpointCovering((await status()).size);
    const a = parseCheckpointText(parseNote(old).text);
    const b = parseCheckpointText(parseNote(next).text);
    assert.ok(b.size > a.size);
    const proof = json((await get(`/v1/log/proof/consistency/${a.size}/${b.size}`)).payload) as { proof: string[] };
    assert.ok(verifyConsistency(a.size, b.size, a.root, b.root, parseHashes(proof.proof)));
    verifyCheckpointConsistency(old, next, proof.proof, logs);
    // The node's own key signs a fork: a tree of size b.size without the last leaf's real content.
    const key = await new EmbeddedKeyStore(path.join(node.home, "keys")).active();
    const { ed25519NoteSigner, signNote } = await import("../../src/tlog/note.js");
    const { formatCheckpoint } = await import("../../src/tlog/checkpoint.js");
    const forked = signNote(formatCheckpoint({ origin: a.origin, size: b.size, root: leafHash(Buffer.from("fork")) }), [ed25519NoteSigner(a.origin, key)]);
    assert.throws(() => verifyCheckpointConsistency(next, forked, [], logs), (e: unknown) => e instanceof Error && (e as { code?: string }).code === "tlog-inconsistent");
    assert.throws(() => verifyCheckpointConsistency(old, forked, proof.proof, logs), (e: unknown) => (e as { code?: string }).code === "tlog-inconsistent");
  });

});
