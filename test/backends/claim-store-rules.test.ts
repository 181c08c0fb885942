/**
 * The claim store's write conditions that keep a closed claim closed (G2), on every backend. The
 * service never asks for these writes in its normal course, so only the store's own conditions
 * stand between a racing or stale caller and the damage: these tests call the store directly.
 */
import { describe, test } from "node:test";
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { sha256Digest } from "../../src/core/digest.js";
import { isWardenError } from "../../src/core/errors.js";
import { claimHashOf } from "../../src/invocations/index.js";
import type { ClaimKey, StoredResult } from "../../src/invocations/claim-store.js";
import { freshHandle as fresh } from "../invocations/fixtures/env.js";
import { backendsUnderTest, type StoreNode } from "./harness.js";

const SCOPE = "rules";
const request = { task: "rules" };

function storedResult(): StoredResult {
  const payload = '{"ok":true}';
  return {
    hash: sha256Digest(payload),
    payload,
    recorded_at: Date.now(),
    journal: { entries: 2, tail_hash: "a".repeat(64), bytes: 100, sha256: sha256Digest("journal") },
  };
}

/** A released claim (it reads unresolved), with what a late record of it would need. */
async function releasedClaim(node: StoreNode): Promise<{ key: ClaimKey; runId: string }> {
  const id = randomUUID();
  const handle = fresh(await node.invocations.open(SCOPE, id, request, "agent"));
  const runId = handle.run_id;
  await handle.release();
  return { key: { scope: SCOPE, id }, runId };
}

for (const backend of backendsUnderTest()) {
  describe(`claim store rules on ${backend.name}`, () => {
    backend.hooks();

    test("a second receipt never replaces the first: attachReceipt on a reconciled claim changes nothing", async (t) => {
      const node = await (await backend.state(t)).open();
      const { key } = await releasedClaim(node);
      const claim = (await node.claims.get(key))!;
      assert.equal(await node.claims.attachReceipt(key, claim.claim_hash, '{"receipt":"first"}'), true);
      assert.equal(await node.claims.attachReceipt(key, claim.claim_hash, '{"receipt":"second"}'), false);
      assert.equal((await node.claims.get(key))?.receipt, '{"receipt":"first"}');
    });

    test("no result is recorded over a released claim, nor over a reconciled one", async (t) => {
      const node = await (await backend.state(t)).open();
      const { key, runId } = await releasedClaim(node);
      const claim = (await node.claims.get(key))!;
      const result = storedResult();
      const claimHash = claimHashOf({ ...claim, result });
      assert.equal(await node.claims.record(key, runId, result, claimHash), false, "released");
      let after = (await node.claims.get(key))!;
      assert.equal(after.result, undefined);
      assert.equal(after.released, true);
      assert.equal(after.claim_hash, claim.claim_hash);
      assert.equal((await node.invocations.lookup(SCOPE, key.id, request))?.status, "unresolved");

      assert.equal(await node.claims.attachReceipt(key, claim.claim_hash, '{"receipt":"r"}'), true);
      assert.equal(await node.claims.record(key, runId, result, claimHash), false, "reconciled");
      after = (await node.claims.get(key))!;
      assert.equal(after.result, undefined);
      assert.equal(after.receipt, '{"receipt":"r"}');
    });

    test("no result is recorded over a receipt, even while the claim's owner still holds it open", async (t) => {
      const node = await (await backend.state(t)).open();
      const id = randomUUID();
      const key = { scope: SCOPE, id };
      const handle = fresh(await node.invocations.open(SCOPE, id, request, "agent"));
      try {
        const claim = (await node.claims.get(key))!;
        assert.equal(claim.released, false);
        assert.equal(await node.claims.attachReceipt(key, claim.claim_hash, '{"receipt":"r"}'), true);
        const result = storedResult();
        // Refused either way: false, or (postgres) an error naming the claim as no longer held.
        const recorded = await node.claims.record(key, handle.run_id, result, claimHashOf({ ...claim, result })).catch((e: unknown) => {
          assert.ok(isWardenError(e), String(e));
          return false;
        });
        assert.equal(recorded, false);
        const after = (await node.claims.get(key))!;
        assert.equal(after.result, undefined);
        assert.equal(after.receipt, '{"receipt":"r"}');
      } finally {
        await handle.release();
      }
    });
  });
}
