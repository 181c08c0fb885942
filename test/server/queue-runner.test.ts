/**
 * A node's dequeue loop (src/warden/queue-runner.ts) against the embedded backend's queue: a slot
 * freed while another start of the same round is still claiming is leased again at once. Before,
 * a round waited for its slowest claim, and a node on a loaded database left slots idle (issue 32).
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { join } from "node:path";
import { openEmbeddedBackend } from "../../src/backends/embedded/index.js";
import type { NewQueued, QueueHost } from "../../src/invocations/queue-store.js";
import { QueueRunner } from "../../src/warden/queue-runner.js";
import { queuedRow } from "../support/queued.js";
import { tempDir } from "../support/temp.js";

function queued(i: number): NewQueued {
  const now = Date.now();
  return queuedRow({ request: JSON.stringify({ provider: "claude", prompt: `p${i}` }), enqueued_at: now + i }, now);
}

test("a slot freed while another start of its round is still claiming is leased again without waiting for that start", async (t) => {
  const root = tempDir("queue-runner", (remove) => t.after(remove));
  const backend = await openEmbeddedBackend({ home: join(root, "home") });
  t.after(() => backend.close());
  const queue = (backend.claims as typeof backend.claims & QueueHost).queue();
  for (let i = 0; i < 3; i++) await queue.enqueue(queued(i));

  const slots = 2;
  let held = 0; // starting or running, as the facade counts them
  const started: string[] = [];
  let release!: () => void;
  const stuck = new Promise<void>((resolve) => (release = resolve));
  let first = true;
  const runner: QueueRunner = new QueueRunner({
    queue,
    freeSlots: () => slots - held,
    labels: {},
    providers: ["claude"],
    limits: {},
    // No poll within the test: only a kick (a run's end) can start the third row.
    pollMs: 3_600_000,
    start: async (row) => {
      held++;
      started.push(row.id);
      if (first) {
        // A claim that does not come back (a slow database): its slot stays held.
        first = false;
        await stuck;
        return;
      }
      // Claimed at once, and its run ends at once: its slot is free again.
      setImmediate(() => {
        held--;
        runner.kick();
      });
    },
    stop: () => undefined,
  });
  t.after(async () => {
    release();
    await runner.stop();
  });
  runner.start();
  const deadline = Date.now() + 30_000;
  while (started.length < 3) {
    if (Date.now() > deadline) {
      assert.fail(`waited 30 s for the third row to start in the freed slot; started ${started.length} (the round still waits for its first, stuck start)`);
    }
    await new Promise((r) => setTimeout(r, 10));
  }
  assert.equal(new Set(started).size, 3);
  assert.ok(held <= slots, `${held} starts held with ${slots} slots`);
});
