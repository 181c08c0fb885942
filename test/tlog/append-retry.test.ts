/**
 * A failed append is not the end of a statement: the log tries it again by itself (counted on
 * /metrics meanwhile), and until it is stored the catch-up watermark stays below its fact, so a
 * crash before the retry still has the next start log it.
 */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as path from "node:path";
import { DEFAULT_WATERMARK_MARGIN_MS } from "../../src/tlog/log.js";
import type { Statement } from "../../src/tlog/statements.js";
import { openWarden } from "../../src/warden/facade.js";

import { waitFor } from "../support/wait.js";
import { tempDir } from "../support/temp.js";

const commit = (revision: string): Statement => ({ v: 1, type: "bundle.committed", bundle_id: "retry", revision, bundle_digest: `sha256:${"a".repeat(64)}`, manifest_digest: `sha256:${"b".repeat(64)}` });

describe("a failed append", () => {
  it("is tried again until stored, and holds the watermark below its fact meanwhile", async () => {
    const root = tempDir("tlog-retry");
    let failing = true;
    const warden = await openWarden({
      home: path.join(root, "home"),
      log: {
        origin: "warden.test/retry",
        // Long enough that "later" below is stored before the first retry (a batch with "lost" would fail whole).
        retryMs: 1000,
        faults: {
          beforeAppend: (statements) => {
            if (failing && statements.some((s) => s.type === "bundle.committed" && s.revision === "lost")) throw new Error("disk full");
          },
        },
      },
    });
    try {
      const log = warden.log!;
      const start = (await log.watermark())!;
      const t1 = start + 10 * DEFAULT_WATERMARK_MARGIN_MS;
      await assert.rejects(log.append(commit("lost"), t1), /disk full/);
      assert.equal(log.snapshot().unlogged, 1);
      // A later fact is stored; the watermark stays below the one still missing.
      await log.append(commit("later"), t1 + 5 * DEFAULT_WATERMARK_MARGIN_MS);
      assert.equal(await log.watermark(), t1 - DEFAULT_WATERMARK_MARGIN_MS);
      failing = false;
      await waitFor("the failed statement to be stored by a retry", () => (log.snapshot().unlogged === 0 ? true : undefined));
      const leaves = (await log.tile({ level: "entries", index: 0, width: (await log.checkpoint()).size }))!.toString("utf8");
      assert.match(leaves, /"revision":"lost"/);
    } finally {
      await warden.close();
      fs.rmSync(root, { recursive: true, force: true });
    }
  });
});
