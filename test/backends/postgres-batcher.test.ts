/**
 * When the postgres backend's Batcher sends what callers queued. "immediate" gathers the callers
 * of every callback of one event-loop pass into one statement (group commit for writes); "tick"
 * sends a callback's callers as soon as that callback is done, before the next one runs, so
 * groups of concurrent readers keep separate statements that take turns with the database
 * instead of converging on one. The runner here stands in for the database round trip.
 */
import { describe, test } from "node:test";
import assert from "node:assert/strict";
import { Batcher, type Outcome } from "../../src/backends/postgres/batcher.js";

function recordingBatcher(drainOn: "immediate" | "tick", log: string[], maxItems?: number): Batcher<string, string> {
  const run = async (items: readonly string[]): Promise<Outcome<string>[]> => {
    log.push(`send ${items.join(",")}`);
    return items.map((value) => ({ ok: true, value }));
  };
  return new Batcher(run, { maxInFlight: 3, keyOf: (item) => item, drainOn, ...(maxItems === undefined ? {} : { maxItems }) });
}

/** Two callbacks of one event-loop pass, each queueing one item. */
async function twoCallbacks(batcher: Batcher<string, string>, log: string[]): Promise<string[]> {
  const answers: Promise<string>[] = [];
  await new Promise<void>((resolve) => {
    setImmediate(() => {
      answers.push(batcher.submit("a"));
      log.push("callback a done");
    });
    setImmediate(() => {
      log.push("callback b starts");
      answers.push(batcher.submit("b"));
      resolve();
    });
  });
  return Promise.all(answers);
}

describe("postgres batcher", () => {
  test("immediate: the callers of both callbacks share one statement, sent after both ran", async () => {
    const log: string[] = [];
    const batcher = recordingBatcher("immediate", log);
    assert.deepEqual(await twoCallbacks(batcher, log), ["a", "b"]);
    await batcher.settled();
    assert.deepEqual(log, ["callback a done", "callback b starts", "send a,b"]);
  });

  test("tick: each callback's callers are sent before the next callback runs", async () => {
    const log: string[] = [];
    const batcher = recordingBatcher("tick", log);
    assert.deepEqual(await twoCallbacks(batcher, log), ["a", "b"]);
    await batcher.settled();
    assert.deepEqual(log, ["callback a done", "send a", "callback b starts", "send b"]);
  });

  test("tick with maxItems: 64 callers queued together go out as two statements of 32 at once", async () => {
    const log: string[] = [];
    const batcher = recordingBatcher("tick", log, 32);
    const keys = Array.from({ length: 64 }, (_, i) => `k${i}`);
    assert.deepEqual(await Promise.all(keys.map((k) => batcher.submit(k))), keys);
    assert.deepEqual(log, [`send ${keys.slice(0, 32).join(",")}`, `send ${keys.slice(32).join(",")}`]);
    assert.equal(batcher.batches, 2);
  });
});
