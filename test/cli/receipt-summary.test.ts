/**
 * `journal verify <run_id>` on a reconciled run shows the node's receipt only as far as it holds
 * for the journal verified here: signed by a trusted key, and covering this run's very entries.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { summarizeReceipt } from "../../src/cli/remote-journal.js";
import { signReceipt, snapshotHashOf } from "../../src/invocations/reconciliation.js";
import type { ClaimSnapshot, Review } from "../../src/invocations/types.js";
import { generateSigningKey } from "../../src/journal/keys.js";

const runId = randomUUID();
const tail = "a1".repeat(32);
const snapshot: ClaimSnapshot = {
  scope: "api:operator",
  id: randomUUID(),
  request_hash: `sha256:${"12".repeat(32)}`,
  agent: "claude",
  claim_hash: `sha256:${"34".repeat(32)}`,
  journal_hash: `sha256:${"56".repeat(32)}`,
  audit: { run_id: runId, entries: 4, tail_hash: tail, bytes: 900 },
};
const review: Review = {
  snapshot_hash: snapshotHashOf(snapshot),
  outcome: "failed",
  rationale: "the agent died mid-write",
  evidence: [{ reference: "OPS-2", sha256: "sha256:452b7b642e325cb2b5b20ac28536ada8b0ad312217a98ab7ff23330603b63126" }],
  effects_stopped: true,
};
const { key } = generateSigningKey();
const trusted = [{ key_id: key.key_id, public_key: key.public_key }];
const receipt = signReceipt({ v: 1, snapshot, review, operator: "alice", recorded_at: "2026-12-01T10:00:00.000Z" }, key);

test("a receipt covering the verified journal, signed by a trusted key, is shown as holding", async () => {
  assert.deepEqual(await summarizeReceipt(receipt, trusted, { run_id: runId, entries: 4, tail_hash: tail }), {
    outcome: "failed",
    operator: "alice",
    recorded_at: "2026-12-01T10:00:00.000Z",
    receipt_ok: true,
  });
});

test("a receipt over other entries, or by an untrusted key, or edited, is shown as not verifying", async () => {
  const longer = await summarizeReceipt(receipt, trusted, { run_id: runId, entries: 5, tail_hash: "b2".repeat(32) });
  assert.equal(longer.receipt_ok, false);
  assert.match(longer.reason ?? "", /covers 4 entries ending a1a1.* not this journal/);
  const foreign = generateSigningKey().key;
  const untrusted = await summarizeReceipt(receipt, [{ key_id: foreign.key_id, public_key: foreign.public_key }], { run_id: runId, entries: 4, tail_hash: tail });
  assert.equal(untrusted.receipt_ok, false);
  const edited = await summarizeReceipt({ ...receipt, operator: "mallory" }, trusted, { run_id: runId, entries: 4, tail_hash: tail });
  assert.deepEqual([edited.receipt_ok, edited.reason], [false, "the receipt's signature does not verify"]);
});
