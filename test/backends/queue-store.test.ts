/**
 * The queue of submitted invocations (DESIGN.md "Queued invocations") on every backend, at the
 * store: identity of a queued id, the start that moves a leased row and creates its claim in one
 * transaction, cancel racing that start, leases of a dead owner, order, fairness and limits.
 */
import { describe, test } from "node:test";
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { sha256Digest } from "../../src/core/digest.js";
import { isWardenError } from "../../src/core/errors.js";
import { claimHashOf } from "../../src/invocations/index.js";
import type { LeaseRequest, NewQueued, QueueHost, QueueStore } from "../../src/invocations/queue-store.js";
import type { ClaimStore } from "../../src/invocations/claim-store.js";
import { openEmbeddedBackend } from "../../src/backends/embedded/index.js";
import { candidatesPerPrincipal } from "../../src/backends/shared/queue-rows.js";
import { queuedRow } from "../support/queued.js";
import { backendsUnderTest, type BackendUnderTest, type StoreNode } from "./harness.js";
import { tempDir } from "../support/temp.js";
import { Retention } from "../../src/warden/retention.js";
import { join } from "node:path";

const NOW = Date.now();
/** Races for a limit's last slot, per kind of limit (WARDEN_QUEUE_RACE_ROUNDS). */
const RACE_ROUNDS = Number(process.env.WARDEN_QUEUE_RACE_ROUNDS ?? 20);

const queued = (fields: Partial<NewQueued> = {}): NewQueued => queuedRow(fields, NOW);

function leaseOf(fields: Partial<LeaseRequest> = {}): LeaseRequest {
  return { max: 10, labels: {}, providers: ["claude", "codex"], now: Date.now(), limits: {}, ...fields };
}

/** Both backends' claim stores keep the queue. */
function queueOf(claims: ClaimStore): QueueStore {
  return (claims as ClaimStore & QueueHost).queue();
}

/** The claim a node writes when it starts a row (as Invocations.open writes it). */
function startClaim(node: StoreNode | ClaimStore, row: NewQueued) {
  const claims = "claims" in node ? node.claims : node;
  const identity = { scope: row.scope, id: row.id, request_hash: row.request_hash, agent: "claude", run_id: randomUUID(), created_at: Date.now() };
  return claims.claim({ ...identity, claim_hash: claimHashOf(identity) }, { dequeued: true });
}

/**
 * Two claim stores (two owners) on one state: two nodes of a fleet, or two processes on one home
 * (the embedded backend's delivery store admits one process, so its claim stores are opened alone).
 */
async function twoStores(backend: BackendUnderTest, t: { after(fn: () => unknown): void }): Promise<[ClaimStore, ClaimStore, () => Promise<void>]> {
  if (backend.name === "postgres") {
    const state = await backend.state(t, { isolated: true });
    const b = await state.open();
    return [(await state.open()).claims, b.claims, () => b.close()];
  }
  const root = tempDir("queue-store", (remove) => t.after(remove));
  const home = join(root, "home");
  const a = await openEmbeddedBackend({ home });
  const b = await openEmbeddedBackend({ home });
  t.after(async () => {
    await a.close();
    await b.close();
  });
  return [a.claims, b.claims, () => b.close()];
}

for (const backend of backendsUnderTest()) {
  describe(`queue store on ${backend.name}`, () => {
    backend.hooks();

    test("a queued id is stored once: the same key again answers the stored row and writes nothing", async (t) => {
      const node = await (await backend.state(t, { isolated: true })).open();
      const queue = queueOf(node.claims);
      const row = queued();
      const first = await queue.enqueue(row);
      assert.equal(first.created, true);
      assert.equal(first.row.state, "queued");
      const again = await queue.enqueue({ ...row, request_hash: sha256Digest("other"), priority: 9 });
      assert.equal(again.created, false);
      assert.equal(again.row.request_hash, row.request_hash, "the stored row, not the retry's");
      assert.equal(again.row.priority, 0);
    });

    test("a leased row starts with its claim in one transaction; a row not leased here is refused and nothing is written", async (t) => {
      const node = await (await backend.state(t, { isolated: true })).open();
      const queue = queueOf(node.claims);
      const row = queued();
      await queue.enqueue(row);
      // Not leased yet: the start is refused, no claim.
      await assert.rejects(startClaim(node, row), (e: unknown) => isWardenError(e) && e.code === "queue-lease-lost");
      assert.equal(await node.claims.get(row), undefined);
      const { leased } = await queue.lease(leaseOf());
      assert.deepEqual(leased.map((r) => r.id), [row.id]);
      assert.equal(leased[0]!.state, "leased");
      assert.equal(leased[0]!.lease_owner, queue.ownerId);
      const attempt = await startClaim(node, row);
      assert.equal(attempt.created, true);
      assert.equal((await queue.getQueued(row))?.state, "started");
      // Nothing left to lease.
      assert.deepEqual((await queue.lease(leaseOf())).leased, []);
    });

    test("cancel racing a start: exactly one wins, every time", async (t) => {
      const node = await (await backend.state(t, { isolated: true })).open();
      const queue = queueOf(node.claims);
      const wins = { cancel: 0, start: 0 };
      for (let i = 0; i < 30; i++) {
        const row = queued();
        await queue.enqueue(row);
        assert.equal((await queue.lease(leaseOf({ max: 1 }))).leased.length, 1);
        // Alternate who is asked first: each order must give one winner.
        const startNow = (): Promise<boolean> =>
          startClaim(node, row).then(
            (a) => a.created,
            (e: unknown) => {
              if (isWardenError(e) && e.code === "queue-lease-lost") return false;
              throw e;
            },
          );
        const cancelNow = () => queue.cancel(row, "ops", Date.now());
        let started: boolean;
        let after: Awaited<ReturnType<typeof cancelNow>>;
        if (i % 2 === 0) {
          const s = startNow();
          const c = cancelNow();
          [started, after] = await Promise.all([s, c]);
        } else {
          const c = cancelNow();
          const s = startNow();
          [after, started] = await Promise.all([c, s]);
        }
        const claim = await node.claims.get(row);
        const stored = await queue.getQueued(row);
        if (started) {
          wins.start++;
          assert.notEqual(claim, undefined);
          assert.equal(stored?.state, "started", "a started row is never cancelled");
          assert.equal(stored?.cancelled_by, "ops", "the cancel is noted for the runner to stop the run");
          assert.equal(after?.state, "started", "the cancel came second: it saw the run started, never cancelled it");
        } else {
          wins.cancel++;
          assert.equal(claim, undefined, "a cancelled row never gets a claim");
          assert.equal(stored?.state, "cancelled");
          assert.equal(after?.state, "cancelled");
        }
      }
      assert.equal(wins.cancel + wins.start, 30);
    });

    test("a lease whose owner died goes back to the queue; a started row of a dead owner stops counting", async (t) => {
      const [a, b, closeB] = await twoStores(backend, t);
      const qa = queueOf(a);
      const qb = queueOf(b);
      const notStarted = queued({ enqueued_at: NOW - 2 });
      const started = queued({ enqueued_at: NOW - 1 });
      await qa.enqueue(notStarted);
      await qa.enqueue(started);
      const { leased } = await qb.lease(leaseOf());
      assert.equal(leased.length, 2);
      assert.equal((await startClaim(b, started)).created, true);
      // While b lives, its leases hold.
      assert.deepEqual(await qa.sweep(Date.now()), { requeued: 0, expired: 0 });
      assert.equal((await qa.view()).running, 2);
      await closeB();
      assert.deepEqual(await qa.sweep(Date.now()), { requeued: 1, expired: 0 });
      assert.equal((await qa.getQueued(notStarted))?.state, "queued");
      assert.equal((await qa.getQueued(started))?.state, "started", "started stays started: its claim decides (unresolved)");
      assert.equal((await qa.view()).running, 0);
      const again = await qa.lease(leaseOf());
      assert.deepEqual(again.leased.map((r) => r.id), [notStarted.id]);
      assert.equal((await startClaim(a, notStarted)).created, true);
    });

    test("order: priority first, then the principal with fewer runs going and served longer ago, then age", async (t) => {
      const node = await (await backend.state(t, { isolated: true })).open();
      const queue = queueOf(node.claims);
      const big = Array.from({ length: 6 }, (_, i) => queued({ principal: "api:big", enqueued_at: NOW - 100 + i }));
      const small = Array.from({ length: 2 }, (_, i) => queued({ principal: "api:small", enqueued_at: NOW - 10 + i }));
      const urgent = queued({ principal: "api:big", priority: 5, enqueued_at: NOW });
      for (const row of [...big, ...small, urgent]) await queue.enqueue(row);
      const { leased } = await queue.lease(leaseOf({ max: 5 }));
      assert.deepEqual(
        leased.map((r) => r.id),
        [urgent.id, small[0]!.id, big[0]!.id, small[1]!.id, big[1]!.id],
        "after the urgent row, the small principal (fewer going) and then turns",
      );
    });

    test("limits: runs going per workspace and per provider, rows leased per minute per provider", async (t) => {
      const node = await (await backend.state(t, { isolated: true })).open();
      const queue = queueOf(node.claims);
      for (let i = 0; i < 4; i++) await queue.enqueue(queued({ workspace: "w1", enqueued_at: NOW + i }));
      for (let i = 0; i < 4; i++) await queue.enqueue(queued({ workspace: "w2", provider: "codex", enqueued_at: NOW + 10 + i }));
      const first = await queue.lease(leaseOf({ limits: { workspace: 2 } }));
      assert.deepEqual(first.leased.map((r) => r.workspace).sort(), ["w1", "w1", "w2", "w2"]);
      assert.equal((await queue.lease(leaseOf({ limits: { workspace: 2 } }))).leased.length, 0, "both workspaces at their limit");
      const byProvider = await queue.lease(leaseOf({ limits: { provider: 3 } }));
      assert.deepEqual(byProvider.leased.map((r) => r.provider).sort(), ["claude", "codex"]);
      const rated = await queue.lease(leaseOf({ limits: { rates: { claude: 3 } } }));
      assert.deepEqual(rated.leased.map((r) => r.provider), ["codex"], "claude has leased 3 in the last minute; one codex row is left");
    });

    test("labels and providers: a row goes only to a node that has every label it requires", async (t) => {
      const node = await (await backend.state(t, { isolated: true })).open();
      const queue = queueOf(node.claims);
      const gpu = queued({ labels: { gpu: "a100" } });
      const kimi = queued({ provider: "kimi" });
      await queue.enqueue(gpu);
      await queue.enqueue(kimi);
      assert.deepEqual((await queue.lease(leaseOf({ labels: { gpu: "h100" } }))).leased, []);
      const leased = await queue.lease(leaseOf({ labels: { gpu: "a100", region: "eu" } }));
      assert.deepEqual(leased.leased.map((r) => r.id), [gpu.id]);
      assert.deepEqual((await queue.lease(leaseOf({ providers: ["kimi"] }))).leased.map((r) => r.id), [kimi.id]);
    });

    test("a row past its deadline expires at the dequeue and at the sweep, and is never leased", async (t) => {
      const node = await (await backend.state(t, { isolated: true })).open();
      const queue = queueOf(node.claims);
      const late = queued({ deadline: NOW - 1 });
      await queue.enqueue(late);
      assert.deepEqual(await queue.lease(leaseOf()), { leased: [], expired: 1 });
      assert.equal((await queue.getQueued(late))?.state, "expired");
      // With no dequeue, the sweep finds it.
      const lateToo = queued({ deadline: NOW - 1, provider: "kimi" });
      await queue.enqueue(lateToo);
      assert.equal((await queue.sweep(Date.now())).expired, 1);
      assert.equal((await queue.getQueued(lateToo))?.state, "expired");
      assert.deepEqual((await queue.lease(leaseOf({ providers: ["kimi"] }))).leased, []);
    });

    test("two nodes dequeuing one table at once never lease one row twice", async (t) => {
      const queues: QueueStore[] = (await twoStores(backend, t)).slice(0, 2).map((claims) => queueOf(claims as ClaimStore));
      const rows = Array.from({ length: 120 }, (_, i) => queued({ principal: `api:p${i % 3}`, enqueued_at: NOW + i }));
      for (const row of rows) await queues[0]!.enqueue(row);
      const seen = new Map<string, string>();
      await Promise.all(
        queues.map(async (queue) => {
          for (;;) {
            const { leased } = await queue.lease(leaseOf({ max: 3 }));
            if (leased.length === 0) return;
            for (const row of leased) {
              assert.equal(seen.get(row.id), undefined, `row ${row.id} leased twice`);
              seen.set(row.id, queue.ownerId);
            }
          }
        }),
      );
      assert.equal(seen.size, rows.length);
      assert.equal(new Set(seen.values()).size, 2, "both nodes took rows");
    });

    test("retention: an ended started row goes (its claim keeps the identity); a cancelled, expired or refused row keeps its identity and drops its request", async (t) => {
      const node = await (await backend.state(t, { isolated: true })).open();
      const queue = queueOf(node.claims);
      const now = Date.now();
      const old = now - 600_000;
      const labels = { gpu: "yes" };
      // One row per fate, each leased alone (max 1, in age order).
      const [started, cancelled, expired, refused, running, recent, waiting] = Array.from({ length: 7 }, (_, i) =>
        queued({ labels, enqueued_at: NOW + i, deadline: i === 2 ? old - 1 : now + 3_600_000 }),
      ) as [NewQueued, NewQueued, NewQueued, NewQueued, NewQueued, NewQueued, NewQueued];
      for (const row of [started, cancelled, expired, refused, running, recent, waiting]) await queue.enqueue(row);
      await queue.cancel(cancelled, "operator", old);
      assert.equal((await queue.sweep(old)).expired, 1);
      const lease = leaseOf({ max: 1, labels, now: old });
      for (const row of [started, refused, running, recent]) assert.deepEqual((await queue.lease(lease)).leased.map((r) => r.id), [row.id]);
      await queue.unlease(refused, { error: "workspace-unknown", at: old });
      for (const row of [started, running, recent]) assert.equal((await startClaim(node, row)).created, true);
      await queue.ended(started, old);
      await queue.ended(recent, now - 1000);
      const before = new Map(await Promise.all([started, cancelled, expired, refused, running, recent, waiting].map(async (r) => [r.id, await queue.getQueued(r)] as const)));

      const retention = new Retention(node.invocations, tempDir("queue-retention", (remove) => t.after(remove)), 30 * 86_400_000, { store: queue, retentionMs: 300_000 });
      const pass = await retention.run();
      assert.equal(pass?.queueRemoved, 1);
      assert.equal(pass?.queueEmptied, 3);
      assert.equal(await queue.getQueued(started), undefined, "the ended started row is gone");
      assert.equal((await node.claims.get(started))?.request_hash, started.request_hash, "its claim keeps the identity");
      for (const row of [cancelled, expired, refused]) {
        const kept = await queue.getQueued(row);
        assert.deepEqual(kept, { ...before.get(row.id)!, request: "", labels: {} }, `${row.id}: identity and outcome kept, request dropped`);
        // A retry of the id is answered by the row as before, never queued again.
        const again = await queue.enqueue(row);
        assert.equal(again.created, false);
        assert.equal(again.row.request_hash, row.request_hash);
        assert.equal(again.row.state, before.get(row.id)!.state);
      }
      for (const row of [running, recent, waiting]) assert.deepEqual(await queue.getQueued(row), before.get(row.id), `${row.id} is kept whole`);
      // A second pass finds nothing; a cutoff inside the rate window is held back to its edge.
      assert.deepEqual(await queue.prune(now, now), { removed: 0, emptied: 0 });
      assert.deepEqual(await queue.prune(now + 3_600_000, now - 1000 + 60_000), { removed: 0, emptied: 0 });
      assert.deepEqual(await queue.prune(now + 3_600_000, now + 60_000), { removed: 1, emptied: 0 });
    });

    test("two nodes racing for a limit's last slot never both take it: workspace, provider, and a provider's rate", async (t) => {
      const [a, b] = (await twoStores(backend, t)).slice(0, 2).map((claims) => queueOf(claims as ClaimStore)) as [QueueStore, QueueStore];
      // Each node reads its candidates `SKIP LOCKED`: with more queued rows of the key than one
      // dequeue reads, the two nodes hold disjoint candidates, and only the key's limit stands
      // between them and a second lease of the last slot.
      const perRace = 2 * candidatesPerPrincipal(1) + 2;
      const kinds = ["workspace", "provider", "rate"] as const;
      const overruns: string[] = [];
      for (let round = 0; round < RACE_ROUNDS; round++) {
        for (const kind of kinds) {
          const key = `${kind}-${round}`;
          const provider = kind === "workspace" ? "claude" : `p-${key}`;
          const workspace = kind === "workspace" ? `w-${key}` : "default";
          const limits = kind === "workspace" ? { workspace: 2 } : kind === "provider" ? { provider: 2 } : { rates: { [provider]: 2 } };
          const request = leaseOf({ max: 1, providers: ["claude", provider], limits });
          const rows = Array.from({ length: perRace }, (_, i) => queued({ provider, workspace, enqueued_at: NOW + i }));
          await Promise.all(rows.map((row) => a.enqueue(row)));
          // One of the limit's two slots is taken: the race is for the last.
          assert.equal((await a.lease({ ...request, now: Date.now() })).leased.length, 1);
          const [fromA, fromB] = await Promise.all([a.lease({ ...request, now: Date.now() }), b.lease({ ...request, now: Date.now() })]);
          const taken = fromA.leased.length + fromB.leased.length;
          if (taken !== 1) overruns.push(`${key}: ${taken} leased of the last slot (a ${fromA.leased.length}, b ${fromB.leased.length})`);
          // The rest expire (one statement), so the next race reads only its own rows.
          await a.sweep(NOW + 7_200_000);
        }
      }
      assert.deepEqual(overruns, [], `the last slot of a limit went to both nodes, or to neither, in ${overruns.length} of ${RACE_ROUNDS * kinds.length} races`);
    });
  });
}
