import { test } from "node:test";
import assert from "node:assert/strict";
import { createHash, randomUUID } from "node:crypto";
import { appendFileSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { ConflictError, IntegrityError, NotFoundError, ValidationError } from "../../src/core/errors.js";
import { claimHashOf, TEMPLATE_RATIONALE, verifyReceipt, type ClaimRecord, type Review } from "../../src/invocations/index.js";
import { signReceipt } from "../../src/invocations/reconciliation.js";
import { generateSigningKey } from "../../src/journal/keys.js";
import { freshHandle, SCOPE, setup, stateDigest, type Env } from "./fixtures/env.js";
import { claimRow, editClaim } from "./fixtures/tamper.js";

const request = { task: "deploy" };

async function unresolvedClaim(env: Env): Promise<{ id: string; runId: string }> {
  const id = randomUUID();
  const h = freshHandle(await env.invocations.open(SCOPE, id, request, "agent"));
  await assert.rejects(h.effect({ kind: "network", name: "deploy", fingerprint: "v2" }, () => Promise.reject(new Error("timeout"))));
  assert.equal((await h.finish({ deployed: "?" })).status, "unresolved");
  return { id, runId: h.run_id };
}

function reviewFor(snapshot_hash: string, rationale = "checked the deployment log: v2 is live") {
  return {
    snapshot_hash,
    outcome: "completed",
    rationale,
    evidence: [{ reference: "deploy-log-2024-06-01.txt", sha256: "sha256:452b7b642e325cb2b5b20ac28536ada8b0ad312217a98ab7ff23330603b63126" }],
    effects_stopped: true,
  };
}

test("reconcile signs a receipt that verifies; the same review again returns the same receipt", async (t) => {
  const env = await setup(t);
  const { id, runId } = await unresolvedClaim(env);
  const inspection = await env.invocations.inspect(SCOPE, id);
  assert.equal(inspection.report.status, "unresolved");
  assert.equal(inspection.snapshot.audit.run_id, runId);
  assert.equal(inspection.snapshot.audit.entries, 4);
  assert.ok(inspection.report.journal.findings.some((f) => f.reason === "effect-outcome-unknown"));

  const review = reviewFor(inspection.snapshot_hash);
  const first = await env.invocations.reconcile(SCOPE, id, review, "alice");
  assert.equal(first.replayed, false);
  const keys = await env.invocations.publicKeys();
  assert.deepEqual(verifyReceipt(first.receipt, keys, (await env.invocations.inspect(SCOPE, id)).snapshot), { ok: true });
  assert.deepEqual(first.receipt.snapshot, inspection.snapshot);
  assert.equal(first.receipt.operator, "alice");

  const before = stateDigest(env.home);
  const again = await env.invocations.reconcile(SCOPE, id, review, "alice");
  assert.equal(again.replayed, true);
  assert.deepEqual(again.receipt, first.receipt);
  assert.equal(stateDigest(env.home), before);

  const outcome = await env.invocations.open(SCOPE, id, request, "agent");
  assert.equal(outcome.status, "reconciled");
  assert.deepEqual(outcome.status === "reconciled" && outcome.receipt, first.receipt);
  assert.equal((await env.invocations.inspect(SCOPE, id)).report.status, "reconciled");
  assert.deepEqual((await env.invocations.list({ status: "reconciled" })).items.map((i) => i.id), [id]);
});

test("a different review, another operator or a stale snapshot is refused and nothing is written", async (t) => {
  const env = await setup(t);
  const { id } = await unresolvedClaim(env);
  const inspection = await env.invocations.inspect(SCOPE, id);
  const before = stateDigest(env.home);
  await assert.rejects(
    env.invocations.reconcile(SCOPE, id, reviewFor(`sha256:${"c".repeat(64)}`), "alice"),
    (e: unknown) => e instanceof ConflictError && e.code === "snapshot-stale",
  );
  assert.equal(stateDigest(env.home), before);
  await env.invocations.reconcile(SCOPE, id, reviewFor(inspection.snapshot_hash), "alice");
  const after = stateDigest(env.home);
  for (const [review, operator] of [
    [reviewFor(inspection.snapshot_hash, "a different rationale"), "alice"],
    [reviewFor(inspection.snapshot_hash), "bob"],
  ] as const) {
    await assert.rejects(
      env.invocations.reconcile(SCOPE, id, review, operator),
      (e: unknown) => e instanceof ConflictError && e.code === "reconciliation-conflict",
    );
  }
  assert.equal(stateDigest(env.home), after);
});

test("the snapshot goes stale when the journal changes between inspect and reconcile", async (t) => {
  const env = await setup(t);
  const { id, runId } = await unresolvedClaim(env);
  const inspection = await env.invocations.inspect(SCOPE, id);
  appendFileSync(join(env.home, "journals", `${runId}.ndjson`), "{");
  await assert.rejects(
    env.invocations.reconcile(SCOPE, id, reviewFor(inspection.snapshot_hash), "alice"),
    (e: unknown) => e instanceof ConflictError && e.code === "snapshot-stale",
  );
});

test("only unresolved claims can be reconciled", async (t) => {
  const env = await setup(t);
  const running = randomUUID();
  const opened = await env.invocations.open(SCOPE, running, request, "agent");
  assert.equal(opened.status, "fresh");
  const recorded = randomUUID();
  await env.invocations.run(SCOPE, recorded, request, "agent", () => ({ ok: true }));
  for (const [id, status] of [
    [running, "in_progress"],
    [recorded, "recorded"],
  ] as const) {
    const inspection = await env.invocations.inspect(SCOPE, id);
    await assert.rejects(
      env.invocations.reconcile(SCOPE, id, reviewFor(inspection.snapshot_hash), "alice"),
      // The status found travels as `invocation_status`: over HTTP, `status` is the problem's own.
      (e: unknown) => e instanceof ConflictError && e.code === "invocation-not-unresolved" && e.details.invocation_status === status,
    );
  }
  await assert.rejects(env.invocations.inspect(SCOPE, randomUUID()), NotFoundError);
});

test("reviews are validated strictly: each broken rule has its own code", async (t) => {
  const env = await setup(t);
  const { id } = await unresolvedClaim(env);
  const { snapshot_hash } = await env.invocations.inspect(SCOPE, id);
  const good = reviewFor(snapshot_hash);
  const evidence = good.evidence[0]!;
  const cases: [unknown, string][] = [
    [{ ...good, extra: 1 }, "review-unknown-field"],
    [{ ...good, evidence: [{ ...evidence, note: "x" }] }, "review-unknown-field"],
    [{ ...good, snapshot_hash: "abc" }, "review-invalid-snapshot-hash"],
    [{ ...good, outcome: "done" }, "review-invalid-outcome"],
    [{ ...good, rationale: "" }, "review-invalid-rationale"],
    [{ ...good, rationale: TEMPLATE_RATIONALE }, "review-invalid-rationale"],
    [{ ...good, rationale: "é".repeat(4097) }, "review-invalid-rationale"],
    [{ ...good, evidence: [] }, "review-invalid-evidence"],
    [{ ...good, evidence: Array(33).fill(evidence) }, "review-invalid-evidence"],
    [{ ...good, evidence: [{ ...evidence, sha256: "sha256:XYZ" }] }, "review-invalid-evidence"],
    [{ ...good, effects_stopped: false }, "review-effects-not-stopped"],
    [[good], "review-invalid"],
    [{ ...good, outcome: undefined }, "review-invalid-outcome"],
    // The node cannot read the evidence; it refuses only what is plainly no digest of any.
    [{ ...good, evidence: [{ ...evidence, sha256: `sha256:${"0".repeat(64)}` }] }, "review-evidence-placeholder"],
    [{ ...good, evidence: [{ ...evidence, sha256: `sha256:${"f".repeat(64)}` }] }, "review-evidence-placeholder"],
    [{ ...good, evidence: [{ ...evidence, sha256: `sha256:${createHash("sha256").update("").digest("hex")}` }] }, "review-evidence-placeholder"],
  ];
  const before = stateDigest(env.home);
  for (const [review, code] of cases) {
    await assert.rejects(env.invocations.reconcile(SCOPE, id, review, "alice"), (e: unknown) => {
      assert.ok(e instanceof ValidationError, `${code}: ${String(e)}`);
      assert.equal(e.code, code);
      return true;
    });
  }
  await assert.rejects(env.invocations.reconcile(SCOPE, id, good, ""), (e: unknown) => e instanceof ValidationError && e.code === "invalid-operator");
  assert.equal(stateDigest(env.home), before);
  // The limits themselves are accepted.
  const edge = { ...good, rationale: "é".repeat(4096), evidence: Array(32).fill(evidence) };
  assert.equal((await env.invocations.reconcile(SCOPE, id, edge, "alice")).replayed, false);
});

test("a review with several broken rules is refused once, naming every one of them", async (t) => {
  const env = await setup(t);
  const { id } = await unresolvedClaim(env);
  const { snapshot_hash } = await env.invocations.inspect(SCOPE, id);
  // What `warden inspect --review-template` prints, submitted unedited, plus a stray field.
  const template = {
    snapshot_hash,
    outcome: "<completed|failed|no_effects>",
    rationale: TEMPLATE_RATIONALE,
    evidence: [{ reference: "notes.txt", sha256: "sha256:<64 hex digits of the evidence>" }, { reference: "ticket", sha256: `sha256:${"0".repeat(64)}` }],
    effects_stopped: false,
    note: "x",
  };
  const before = stateDigest(env.home);
  await assert.rejects(env.invocations.reconcile(SCOPE, id, template, "alice"), (e: unknown) => {
    assert.ok(e instanceof ValidationError);
    assert.equal(e.code, "review-invalid");
    assert.deepEqual(
      (e.details.problems as { field: string; code: string }[]).map((p) => `${p.field} ${p.code}`),
      [
        "note review-unknown-field",
        "outcome review-invalid-outcome",
        "rationale review-invalid-rationale",
        "evidence[0].sha256 review-invalid-evidence",
        "evidence[1].sha256 review-evidence-placeholder",
        "effects_stopped review-effects-not-stopped",
      ],
    );
    assert.match(e.message, /^the review has 6 problems: note, outcome, rationale, evidence\[0\]\.sha256, evidence\[1\]\.sha256, effects_stopped$/);
    return true;
  });
  // One problem alone keeps its own code, and still lists itself.
  await assert.rejects(env.invocations.reconcile(SCOPE, id, { ...reviewFor(snapshot_hash), effects_stopped: false }, "alice"), (e: unknown) => {
    assert.ok(e instanceof ValidationError);
    assert.equal(e.code, "review-effects-not-stopped");
    assert.equal((e.details.problems as unknown[]).length, 1);
    return true;
  });
  assert.equal(stateDigest(env.home), before);
});

test("a receipt signed before placeholder evidence was refused still verifies", async (t) => {
  const env = await setup(t);
  const { id } = await unresolvedClaim(env);
  const inspection = await env.invocations.inspect(SCOPE, id);
  const { key } = generateSigningKey();
  const review = { ...reviewFor(inspection.snapshot_hash), evidence: [{ reference: "OPS-0", sha256: `sha256:${"0".repeat(64)}` }] } as Review;
  const receipt = signReceipt({ v: 1, snapshot: inspection.snapshot, review, operator: "alice", recorded_at: new Date().toISOString() }, key);
  assert.deepEqual(verifyReceipt(receipt, [{ key_id: key.key_id, public_key: key.public_key }], inspection.snapshot), { ok: true });
});

test("editing the journal or the claim after reconciliation makes the receipt fail verification", async (t) => {
  const env = await setup(t);
  const { id, runId } = await unresolvedClaim(env);
  const { snapshot_hash } = await env.invocations.inspect(SCOPE, id);
  const { receipt } = await env.invocations.reconcile(SCOPE, id, reviewFor(snapshot_hash), "alice");
  const keys = await env.invocations.publicKeys();
  assert.equal(verifyReceipt(receipt, keys, (await env.invocations.inspect(SCOPE, id)).snapshot).ok, true);

  // Tampered receipt or foreign keys.
  assert.deepEqual(
    verifyReceipt({ ...receipt, operator: "mallory" }, keys, receipt.snapshot),
    { ok: false, code: "receipt-bad-signature", reason: "the receipt's signature does not verify" },
  );
  const foreign = generateSigningKey().key;
  const verdictForeign = verifyReceipt(receipt, [{ key_id: foreign.key_id, public_key: foreign.public_key }], receipt.snapshot);
  assert.equal(verdictForeign.ok === false && verdictForeign.code, "receipt-unknown-key");
  assert.equal((verifyReceipt({ ...receipt, extra: 1 }, keys, receipt.snapshot) as { code?: string }).code, "receipt-malformed");

  // The journal is edited: the current snapshot differs.
  const journal = join(env.home, "journals", `${runId}.ndjson`);
  const original = readFileSync(journal);
  appendFileSync(journal, "{}\n");
  const afterJournal = verifyReceipt(receipt, keys, (await env.invocations.inspect(SCOPE, id)).snapshot);
  assert.equal(afterJournal.ok === false && afterJournal.code, "receipt-claim-changed");
  writeFileSync(journal, original);
  assert.equal(verifyReceipt(receipt, keys, (await env.invocations.inspect(SCOPE, id)).snapshot).ok, true);

  // The claim row is edited naively: reading it is refused outright.
  const row = claimRow(env.home, SCOPE, id)!;
  editClaim(env.home, SCOPE, id, "agent = ?", "mallory");
  await assert.rejects(env.invocations.inspect(SCOPE, id), IntegrityError);
  await assert.rejects(env.invocations.open(SCOPE, id, request, "agent"), IntegrityError);
  // ...or with a recomputed claim hash: the receipt no longer matches the claim.
  const forged = {
    scope: SCOPE, id, request_hash: row.request_hash, agent: "mallory", run_id: row.run_id, created_at: row.created_at,
  } as unknown as ClaimRecord;
  editClaim(env.home, SCOPE, id, "claim_hash = ?", claimHashOf(forged));
  await assert.rejects(env.invocations.open(SCOPE, id, request, "agent"), (e: unknown) => e instanceof IntegrityError && e.code === "receipt-invalid");

  // The stored receipt itself is edited: refused on read.
  editClaim(env.home, SCOPE, id, "agent = ?, claim_hash = ?", row.agent, row.claim_hash);
  assert.equal((await env.invocations.open(SCOPE, id, request, "agent")).status, "reconciled");
  editClaim(env.home, SCOPE, id, "receipt = replace(receipt, 'alice', 'carol')");
  await assert.rejects(env.invocations.lookup(SCOPE, id), (e: unknown) => e instanceof IntegrityError && e.code === "receipt-invalid");
});
