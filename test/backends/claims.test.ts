/**
 * Claim behaviours through the Invocations service, identical on every backend: one owner per
 * id, replay, conflict, unresolved after a lost owner, reconciliation, retention, listing,
 * capacity and tamper detection.
 */
import { describe, test } from "node:test";
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { isWardenError } from "../../src/core/errors.js";
import { verifyReceipt, type InvocationHandle, type OpenOutcome } from "../../src/invocations/index.js";
import { backendsUnderTest, type StoreNode } from "./harness.js";

const SCOPE = "suite";
const request = { task: "useful work" };

function fresh(outcome: OpenOutcome): InvocationHandle {
  assert.equal(outcome.status, "fresh");
  if (outcome.status !== "fresh") throw new Error("unreachable");
  return outcome.handle;
}

async function recorded(node: StoreNode, result: { [k: string]: number | string | boolean } = { ok: true }): Promise<{ id: string; runId: string }> {
  const id = randomUUID();
  const h = fresh(await node.invocations.open(SCOPE, id, request, "agent"));
  await h.effect({ kind: "tool", name: "sum", fingerprint: "1+2" }, () => 3);
  assert.equal((await h.finish(result)).status, "recorded");
  return { id, runId: h.run_id };
}

async function rejectsWith(promise: Promise<unknown>, code: string, status?: number): Promise<void> {
  await assert.rejects(promise, (e: unknown) => {
    assert.ok(isWardenError(e), `expected WardenError ${code}, got ${String(e)}`);
    assert.equal(e.code, code, e.message);
    if (status !== undefined) assert.equal(e.status, status);
    return true;
  });
}

for (const backend of backendsUnderTest()) {
  describe(`claims on ${backend.name}`, () => {
    backend.hooks();

    test("16 concurrent opens: one fresh, fifteen in_progress; the result is replayed, never re-run", async (t) => {
      const node = await (await backend.state(t)).open();
      const id = randomUUID();
      const outcomes = await Promise.all(Array.from({ length: 16 }, () => node.invocations.open(SCOPE, id, request, "agent")));
      assert.deepEqual(outcomes.map((o) => o.status).sort(), ["fresh", ...Array<string>(15).fill("in_progress")]);
      const handle = fresh(outcomes.find((o) => o.status === "fresh")!);
      assert.equal((await node.invocations.lookup(SCOPE, id))?.status, "in_progress");
      assert.equal((await handle.finish({ sum: 10 })).status, "recorded");
      let runs = 0;
      const replays = await Promise.all(
        Array.from({ length: 4 }, () => node.invocations.run(SCOPE, id, request, "agent", () => ({ sum: ++runs }))),
      );
      assert.equal(runs, 0);
      for (const r of replays) {
        assert.equal(r.status, "recorded");
        assert.equal(r.status === "recorded" && r.replayed, true);
        assert.deepEqual(r.status === "recorded" && r.result, { sum: 10 });
      }
    });

    test("counts invocations by status (the console's overview): running, released, recorded", async (t) => {
      const node = await (await backend.state(t)).open();
      // Counts are store-wide (a shared database may hold other tests' claims): compared as changes.
      const base = await node.invocations.counts();
      const plus = (d: Partial<typeof base>) => ({
        total: base.total + (d.total ?? 0),
        in_progress: base.in_progress + (d.in_progress ?? 0),
        awaiting_approval: base.awaiting_approval,
        unresolved: base.unresolved + (d.unresolved ?? 0),
        recorded: base.recorded + (d.recorded ?? 0),
        reconciled: base.reconciled,
      });
      await recorded(node);
      await recorded(node);
      const running = fresh(await node.invocations.open(SCOPE, randomUUID(), request, "agent"));
      const cut = fresh(await node.invocations.open(SCOPE, randomUUID(), request, "agent"));
      await cut.release({ reason: "crashed" });
      assert.deepEqual(await node.invocations.counts(), plus({ total: 4, in_progress: 1, unresolved: 1, recorded: 2 }));
      await running.finish({ ok: true });
      assert.deepEqual(await node.invocations.counts(), plus({ total: 4, unresolved: 1, recorded: 3 }));
    });

    test("lookup never creates a claim; another request under an id is a conflict and writes nothing", async (t) => {
      const node = await (await backend.state(t)).open();
      const unknown = randomUUID();
      assert.equal(await node.invocations.lookup(SCOPE, unknown), undefined);
      assert.equal(await node.invocations.lookup(SCOPE, unknown, request), undefined);
      assert.equal(await node.claims.get({ scope: SCOPE, id: unknown }), undefined);
      const { id } = await recorded(node);
      const before = await node.claims.get({ scope: SCOPE, id });
      await rejectsWith(node.invocations.open(SCOPE, id, { task: "other" }, "agent"), "idempotency-conflict", 422);
      await rejectsWith(node.invocations.lookup(SCOPE, id, { task: "other" }), "idempotency-conflict");
      assert.deepEqual(await node.claims.get({ scope: SCOPE, id }), before);
      // The same id in another scope is another invocation.
      assert.equal((await node.invocations.open("other-scope", id, request, "agent")).status, "fresh");
    });

    test("a released run and a run whose node stopped read unresolved, never fresh; reconcile closes them for good", async (t) => {
      const state = await backend.state(t);
      const first = await state.open();
      const released = randomUUID();
      await fresh(await first.invocations.open(SCOPE, released, request, "agent")).release();
      const abandoned = randomUUID();
      const h = fresh(await first.invocations.open(SCOPE, abandoned, request, "agent"));
      await h.effect({ kind: "network", name: "deploy", fingerprint: "v2" }, () => "sent");
      assert.equal((await first.invocations.lookup(SCOPE, abandoned))?.status, "in_progress");
      await first.close(); // the owner goes away with its run open

      const second = await state.open();
      const gone = await second.invocations.open(SCOPE, abandoned, request, "agent");
      assert.equal(gone.status, "unresolved");
      assert.deepEqual(gone.status === "unresolved" && gone.audit.reasons, ["owner-gone"]);
      const rel = await second.invocations.open(SCOPE, released, request, "agent");
      assert.deepEqual(rel.status === "unresolved" && rel.audit.reasons, ["released"]);
      assert.deepEqual(
        (await second.invocations.list({ status: "unresolved" })).items.map((i) => i.id).filter((id) => id === released || id === abandoned).sort(),
        [released, abandoned].sort(),
      );

      const inspection = await second.invocations.inspect(SCOPE, abandoned);
      assert.equal(inspection.snapshot.audit.entries, 3);
      const review = {
        snapshot_hash: inspection.snapshot_hash,
        outcome: "completed",
        rationale: "the deploy log shows v2 live",
        evidence: [{ reference: "deploy.log", sha256: "sha256:452b7b642e325cb2b5b20ac28536ada8b0ad312217a98ab7ff23330603b63126" }],
        effects_stopped: true,
      };
      const receipt = await second.invocations.reconcile(SCOPE, abandoned, review, "alice");
      assert.equal(receipt.replayed, false);
      assert.deepEqual(verifyReceipt(receipt.receipt, await second.invocations.publicKeys(), inspection.snapshot), { ok: true });
      assert.deepEqual((await second.invocations.reconcile(SCOPE, abandoned, review, "alice")).receipt, receipt.receipt);
      await rejectsWith(second.invocations.reconcile(SCOPE, abandoned, { ...review, rationale: "other" }, "alice"), "reconciliation-conflict");
      const closed = await second.invocations.open(SCOPE, abandoned, request, "agent");
      assert.equal(closed.status, "reconciled");
    });

    test("retention drops payloads only: a pruned id answers recorded+expired, still refuses other requests", async (t) => {
      const node = await (await backend.state(t)).open();
      const { id } = await recorded(node, { answer: 42 });
      const pruned = await node.invocations.prune({ olderThan: new Date(Date.now() + 60_000) });
      assert.ok(pruned.pruned >= 1);
      const after = await node.invocations.lookup(SCOPE, id, request);
      assert.equal(after?.status, "recorded");
      if (after?.status === "recorded") {
        assert.equal(after.expired, true);
        assert.equal(after.result, undefined);
      }
      await rejectsWith(node.invocations.open(SCOPE, id, { task: "other" }, "agent"), "idempotency-conflict");
      assert.equal((await node.invocations.prune({ olderThan: new Date(Date.now() + 60_000) })).pruned, 0);
    });

    test("list pages through claims in (scope, id) order and filters by status", async (t) => {
      const node = await (await backend.state(t, { isolated: true })).open();
      const ids = [await recorded(node), await recorded(node), await recorded(node)].map((r) => r.id);
      const open = randomUUID();
      const held = fresh(await node.invocations.open(SCOPE, open, request, "agent"));
      const seen: string[] = [];
      let cursor: string | undefined;
      do {
        const page = await node.invocations.list({ limit: 2, ...(cursor === undefined ? {} : { cursor }) });
        seen.push(...page.items.map((i) => i.id));
        cursor = page.cursor;
      } while (cursor !== undefined);
      assert.deepEqual(seen, [...ids, open].sort());
      assert.deepEqual((await node.invocations.list({ status: "in_progress" })).items.map((i) => i.id), [open]);
      assert.deepEqual((await node.invocations.list({ status: "recorded" })).items.map((i) => i.id).sort(), [...ids].sort());
      await held.release();
      assert.deepEqual((await node.invocations.list({ status: "unresolved" })).items.map((i) => i.id), [open]);
    });

    test("a full store refuses new claims with capacity-exhausted (507) and keeps every existing one", async (t) => {
      const node = await (await backend.state(t, { isolated: true })).open({ limits: { maxClaims: 3 } });
      const kept = [await recorded(node), await recorded(node)];
      // Four at once for the one free place: exactly one gets it.
      const racing = await Promise.allSettled(Array.from({ length: 4 }, () => node.invocations.open(SCOPE, randomUUID(), request, "agent")));
      assert.equal(racing.filter((r) => r.status === "fulfilled" && r.value.status === "fresh").length, 1);
      for (const r of racing.filter((x) => x.status === "rejected")) {
        assert.ok(isWardenError(r.reason) && r.reason.code === "capacity-exhausted" && r.reason.status === 507, String(r.reason));
      }
      await rejectsWith(node.invocations.open(SCOPE, randomUUID(), request, "agent"), "capacity-exhausted", 507);
      for (const k of kept) assert.equal((await node.invocations.lookup(SCOPE, k.id, request))?.status, "recorded");
    });

    // G6 on every backend: finish reads the journal back from the store, so a line changed there
    // while the run is open (same length, so only a real read of the stored bytes notices) is
    // caught before any result is recorded.
    test("a journal line edited while its run is open: the result is never recorded, and the id stays closed", async (t) => {
      const state = await backend.state(t);
      const node = await state.open();
      const id = randomUUID();
      const h = fresh(await node.invocations.open(SCOPE, id, request, "agent"));
      await h.effect({ kind: "tool", name: "sum", fingerprint: "1+2" }, () => 3);
      await state.editJournalLine(h.run_id, 1, (line) => {
        const edited = Buffer.from(line.toString("utf8").replace('"sum"', '"sun"'));
        assert.equal(edited.byteLength, line.byteLength);
        assert.notDeepEqual(edited, line);
        return edited;
      });
      const outcome = await h.finish({ ok: true });
      assert.equal(outcome.status, "unresolved");
      if (outcome.status === "unresolved") assert.deepEqual(outcome.audit.reasons, ["journal-not-clean", "released"]);
      assert.equal((await node.invocations.lookup(SCOPE, id, request))?.status, "unresolved");
      assert.equal((await node.invocations.open(SCOPE, id, request, "agent")).status, "unresolved");
    });

    test("a journal edited, truncated or extended after the result was recorded is never replayed", async (t) => {
      const state = await backend.state(t);
      const node = await state.open();
      const edited = await recorded(node);
      await state.editJournalLine(edited.runId, 1, (line) => Buffer.from(line.toString("utf8").replace('"sum"', '"sun"')));
      const a = await node.invocations.lookup(SCOPE, edited.id, request);
      assert.deepEqual(a?.status === "unresolved" && a.audit.reasons, ["journal-changed"]);
      const cut = await recorded(node);
      await state.editJournalLine(cut.runId, 3, () => undefined);
      const b = await node.invocations.open(SCOPE, cut.id, request, "agent");
      assert.deepEqual(b.status === "unresolved" && b.audit.reasons, ["journal-changed"]);
      const extended = await recorded(node);
      let first: Buffer | undefined;
      await state.editJournalLine(extended.runId, 0, (line) => (first = line));
      await state.appendJournalLine(extended.runId, first!);
      const c = await node.invocations.lookup(SCOPE, extended.id, request);
      assert.deepEqual(c?.status === "unresolved" && c.audit.reasons, ["journal-changed"]);
    });
  });
}
