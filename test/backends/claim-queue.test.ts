/**
 * The operator's queue (`list({ status: "unresolved" })` and the `unresolved` count), identical on
 * every backend: open rows not in progress, and the rows a check recorded a problem on — found by
 * a lookup or by the scrub, kept until a receipt closes them — read from indexes only, so the
 * queue never misses a tampered run and never reads every recorded row to find its own.
 */
import { describe, test } from "node:test";
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { appendFileSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { CLAIMS_DATABASE, openEmbeddedBackend } from "../../src/backends/embedded/index.js";
import { QUEUE_PAGE, TALLY } from "../../src/backends/embedded/claims/claim-store.js";
import { Invocations, type ClaimStore } from "../../src/invocations/index.js";
import type { ClaimSummary } from "../../src/invocations/types.js";
import { seedRecordedClaims } from "../support/seed-claims.js";
import { backendsUnderTest, type StoreNode } from "./harness.js";

const SCOPE = "queue";
const request = { task: "useful work" };

async function recorded(node: StoreNode): Promise<{ id: string; runId: string }> {
  const id = randomUUID();
  let runId = "";
  const outcome = await node.invocations.run(SCOPE, id, request, "agent", async (h) => {
    runId = h.run_id;
    await h.effect({ kind: "tool", name: "sum", fingerprint: "1+2" }, () => 3);
    return { ok: true };
  });
  assert.equal(outcome.status, "recorded");
  return { id, runId };
}

const shown = (items: readonly ClaimSummary[]): string[] => items.map((i) => `${i.id} ${i.status} ${i.problem ?? "-"}`).sort();

async function queue(node: StoreNode): Promise<string[]> {
  return shown((await node.invocations.list({ status: "unresolved" })).items);
}

for (const backend of backendsUnderTest()) {
  describe(`the unresolved queue on ${backend.name}`, () => {
    backend.hooks();

    test("a journal edited after its seal joins the queue and the count once a lookup finds it, and leaves both when reconciled", async (t) => {
      const state = await backend.state(t, { isolated: true });
      const node = await state.open();
      const edited = await recorded(node);
      const intact = await recorded(node);
      await state.editJournalLine(edited.runId, 1, (line) => Buffer.from(line.toString("utf8").replace('"sum"', '"sun"')));
      // Nobody has read it yet: the queue reads indexes, not every recorded journal.
      assert.deepEqual(await queue(node), []);

      const answer = await node.invocations.lookup(SCOPE, edited.id, request);
      assert.deepEqual(answer?.status === "unresolved" && answer.audit.reasons, ["journal-changed"], "the lookup still checks the journal (G2)");
      assert.deepEqual(await queue(node), [`${edited.id} unresolved journal-changed`]);
      const counts = await node.invocations.counts();
      assert.deepEqual({ unresolved: counts.unresolved, recorded: counts.recorded, total: counts.total }, { unresolved: 1, recorded: 1, total: 2 });
      assert.equal((await node.invocations.lookup(SCOPE, intact.id, request))?.status, "recorded");

      // Found once, it stays queued for every process on the store (recorded durably).
      await node.close();
      const again = await state.open();
      assert.deepEqual(await queue(again), [`${edited.id} unresolved journal-changed`]);

      const inspection = await again.invocations.inspect(SCOPE, edited.id);
      const review = { snapshot_hash: inspection.snapshot_hash, outcome: "completed", rationale: "the edit was ours: a log rotation", evidence: [{ reference: "rotate.log", sha256: "sha256:452b7b642e325cb2b5b20ac28536ada8b0ad312217a98ab7ff23330603b63126" }], effects_stopped: true };
      await again.invocations.reconcile(SCOPE, edited.id, review, "alice");
      assert.deepEqual(await queue(again), []);
      const closed = await again.invocations.counts();
      assert.deepEqual({ unresolved: closed.unresolved, reconciled: closed.reconciled, recorded: closed.recorded }, { unresolved: 0, reconciled: 1, recorded: 1 });
    });

    test("the scrub finds an edited journal and a damaged row nobody looked up, in bounded steps", async (t) => {
      const state = await backend.state(t, { isolated: true });
      const node = await state.open();
      const runs = [await recorded(node), await recorded(node), await recorded(node), await recorded(node)];
      const [journalEdited, rowEdited] = runs;
      await state.editJournalLine(journalEdited!.runId, 2, () => undefined);
      assert.equal(await state.editRows("claims", { scope: SCOPE, id: rowEdited!.id }, { agent: "mallory" }), 1);
      assert.deepEqual(await queue(node), []);

      const passes: number[] = [];
      let problems = 0;
      let cursor: string | undefined;
      do {
        const pass = await node.invocations.scrub({ rows: 3, ...(cursor === undefined ? {} : { cursor }) });
        passes.push(pass.checked);
        problems += pass.problems;
        cursor = pass.cursor;
      } while (cursor !== undefined);
      assert.deepEqual(passes, [3, 1]);
      assert.equal(problems, 2);
      assert.deepEqual(await queue(node), [`${journalEdited!.id} unresolved journal-changed`, `${rowEdited!.id} unresolved claim-record-corrupt`].sort());
      assert.equal((await node.invocations.counts()).unresolved, 2);
      // The other listings say the same of those rows as before.
      const all = shown((await node.invocations.list()).items);
      assert.equal(all.filter((line) => line.includes(" unresolved ")).length, 2);
      assert.equal(all.filter((line) => line.endsWith(" recorded -")).length, 2);
    });
  });
}

test("the queue reads its own rows from the index, not the store's recorded rows", async (t) => {
  const root = mkdtempSync(join(tmpdir(), "warden-queue-"));
  t.after(() => rmSync(root, { recursive: true, force: true }));
  const home = join(root, "home");
  const SEEDED = 20_000;
  // "a:seed" sorts before "z:queue": the queue's rows come after every seeded one.
  await seedRecordedClaims(home, SEEDED, "a:seed");
  const backend = await openEmbeddedBackend({ home });
  t.after(() => backend.close());
  let rowsRead = 0;
  // The real store, with the rows its listings answer counted.
  const store = backend.claims;
  const claims = new Proxy(store, {
    get(target, name) {
      if (name === "list") {
        return async (...args: Parameters<ClaimStore["list"]>) => {
          const rows = await target.list(...args);
          rowsRead += rows.length;
          return rows;
        };
      }
      const value: unknown = Reflect.get(target, name, target);
      return typeof value === "function" ? (value as (...a: unknown[]) => unknown).bind(target) : value;
    },
  });
  const invocations = new Invocations({ claims, journals: backend.journals, keys: backend.keys, limits: backend.limits });
  t.after(() => invocations.close());
  const open = await invocations.open("z:queue", randomUUID(), request, "agent");
  assert.equal(open.status, "fresh");
  if (open.status === "fresh") await open.handle.release();
  const tamperedId = randomUUID();
  const tampered = await invocations.run("z:queue", tamperedId, request, "agent", () => ({ ok: true }));
  assert.ok(tampered.status === "recorded");
  const journal = readdirSync(join(home, "journals")).find((name) => name.includes(tampered.audit.run_id));
  assert.ok(journal !== undefined);
  appendFileSync(join(home, "journals", journal), "{}\n");
  assert.equal((await invocations.lookup("z:queue", tamperedId))?.status, "unresolved");

  rowsRead = 0;
  const page = await invocations.list({ status: "unresolved" });
  assert.equal(page.items.length, 2);
  assert.equal(page.cursor, undefined, "the whole queue in one call");
  assert.ok(rowsRead <= 2, `the queue read ${rowsRead} rows of a store of ${SEEDED + 2}`);
  rowsRead = 0;
  assert.equal((await invocations.counts()).unresolved, 2);
  assert.ok(rowsRead <= 1, `the count read ${rowsRead} rows`);
});

test("the queue's page and the counts walk indexes only: no scan of the claims table (SQLite's own plans)", async (t) => {
  const root = mkdtempSync(join(tmpdir(), "warden-queue-plan-"));
  t.after(() => rmSync(root, { recursive: true, force: true }));
  const home = join(root, "home");
  await seedRecordedClaims(home, 1000, "a:seed");
  const db = new Database(join(home, CLAIMS_DATABASE), { readonly: true });
  t.after(() => db.close());
  const plan = (db.prepare(`EXPLAIN QUERY PLAN ${QUEUE_PAGE}`).all("", "", 50, "", "", 50, 50) as { detail: string }[]).map((r) => r.detail);
  assert.ok(plan.some((d) => /SEARCH claims USING INDEX claims_open/.test(d)), plan.join("\n"));
  assert.ok(plan.some((d) => /SEARCH claim_problems USING PRIMARY KEY/.test(d)), plan.join("\n"));
  assert.deepEqual(plan.filter((d) => /^SCAN (claims|c)\b/.test(d)), [], `a scan of the claims table:\n${plan.join("\n")}`);
  const tally = (db.prepare(`EXPLAIN QUERY PLAN ${TALLY}`).all() as { detail: string }[]).map((r) => r.detail);
  assert.deepEqual(tally.filter((d) => /^SCAN (claims|c)\b(?! USING INDEX claims_(open|reconciled))/.test(d)), [], `a scan of the claims table:\n${tally.join("\n")}`);
});
