/**
 * What the transparency log's catch-up reads from a backend, identical on every backend: the
 * claims recorded since a time, in (recorded_at, scope, id) order and paged, and the revisions
 * committed or signed since a time.
 */
import { describe, test } from "node:test";
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { rmSync } from "node:fs";
import { isDamagedClaim, type RecordedCursor } from "../../src/invocations/claim-store.js";
import { bundleStatement } from "../../src/signing/statement.js";
import { makeKey, sshSignWith } from "../signing/ssh-fixtures.js";
import { backendsUnderTest, commitWhole, uniqueBundle } from "./harness.js";
import { tempDir } from "../support/temp.js";

const BASE = Date.UTC(2026, 0, 1);

for (const backend of backendsUnderTest()) {
  describe(`log catch-up sources on ${backend.name}`, () => {
    backend.hooks();

    test("claims recorded since a time, oldest first, paged; revisions committed or signed since a time", async (t) => {
      let now = BASE;
      const node = await (await backend.state(t)).open({ now: () => new Date(now) });
      const ids: string[] = [];
      for (const at of [BASE + 3_000, BASE + 1_000, BASE + 2_000]) {
        now = at;
        const id = randomUUID();
        const outcome = await node.invocations.run("suite", id, { at }, "agent", () => ({ at }));
        assert.equal(outcome.status, "recorded");
        ids[at - BASE] = id;
      }
      const since = async (from: number, limit: number): Promise<string[]> => {
        const seen: string[] = [];
        let after: RecordedCursor | undefined;
        do {
          const page = await node.claims.recordedSince(from, after, limit);
          assert.ok(page.claims.length <= limit);
          for (const c of page.claims) seen.push(isDamagedClaim(c) ? "damaged" : `${c.result!.recorded_at - BASE}:${c.id}`);
          after = page.next;
        } while (after !== undefined);
        return seen;
      };
      assert.deepEqual(await since(BASE + 2_000, 10), [`2000:${ids[2_000]}`, `3000:${ids[3_000]}`]);
      assert.deepEqual(await since(BASE, 1), [`1000:${ids[1_000]}`, `2000:${ids[2_000]}`, `3000:${ids[3_000]}`], "one row a page");
      assert.deepEqual(await since(BASE + 3_001, 10), []);

      const keys = tempDir("sign");
      t.after(() => rmSync(keys, { recursive: true, force: true }));
      const signer = makeKey(keys, "later", "ed25519");
      now = BASE + 10_000;
      const first = uniqueBundle([500]);
      await commitWhole(node.delivery, first);
      now = BASE + 20_000;
      const second = uniqueBundle([500]);
      await commitWhole(node.delivery, second);
      now = BASE + 30_000;
      await node.delivery.catalog.addSignature(first.manifest.bundle_id, "r1", sshSignWith(signer.path, bundleStatement(first.manifest)));
      const changed = async (from: number) => (await node.delivery.catalog.changedSince(from)).map((e) => e.bundle_id);
      assert.deepEqual(await changed(BASE + 10_000), [first.manifest.bundle_id, second.manifest.bundle_id]);
      assert.deepEqual(await changed(BASE + 20_000), [first.manifest.bundle_id, second.manifest.bundle_id], "the first by its later signature");
      assert.deepEqual(await changed(BASE + 30_000), [first.manifest.bundle_id]);
      assert.deepEqual(await changed(BASE + 30_001), []);
      await node.close();
    });
  });
}
