/**
 * The log rides the claim store's group commits: seals attested in one turn of the event loop —
 * as the runs of one group commit are, each a few microtask hops after its record resolved — go
 * into one log transaction, not one each (a transaction per run blocked the event loop with an
 * fsync per run and cost throughput; see bench/log.bench.ts).
 */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as path from "node:path";
import { EmbeddedKeyStore } from "../../src/backends/embedded/journal/key-store.js";
import { EmbeddedLogStore } from "../../src/backends/embedded/log/log-store.js";
import { TransparencyLog } from "../../src/tlog/log.js";
import type { Statement } from "../../src/tlog/statements.js";
import type { LeafInput } from "../../src/tlog/store.js";
import { tempDir } from "../support/temp.js";

const commit = (revision: string): Statement => ({ v: 1, type: "bundle.committed", bundle_id: "batch", revision, bundle_digest: `sha256:${"a".repeat(64)}`, manifest_digest: `sha256:${"b".repeat(64)}` });

/** A few awaits of settled promises: the continuation of a run between its record and its attest. */
async function hops(n: number): Promise<void> {
  for (let i = 0; i < n; i++) await Promise.resolve();
}

describe("the log's batches", () => {
  it("statements attested in one turn of the event loop, a few microtask hops apart, are stored in one transaction", async () => {
    const root = tempDir("tlog-batching");
    const store = new EmbeddedLogStore(path.join(root, "tlog.sqlite"));
    const batches: number[] = [];
    const append = store.append.bind(store);
    store.append = (leaves: readonly LeafInput[], watermark?: number) => {
      batches.push(leaves.length);
      return append(leaves, watermark);
    };
    const keys = new EmbeddedKeyStore(path.join(root, "keys"));
    const log = new TransparencyLog({ store, origin: "warden.test/batching", key: () => keys.active() });
    try {
      const indexes = await Promise.all(
        Array.from({ length: 64 }, async (_, i) => {
          await hops(i % 8);
          return log.append(commit(String(i)));
        }),
      );
      assert.deepEqual([...indexes].sort((a, b) => a - b), Array.from({ length: 64 }, (_, i) => i));
      assert.deepEqual(batches, [64], "one transaction for the 64 statements of one turn");
    } finally {
      await log.close();
      fs.rmSync(root, { recursive: true, force: true });
    }
  });
});
