/**
 * The bound on fdatasyncs in flight: at most `limit` jobs run at once, in arrival order; `hurry`
 * lets more run until the queue it found is empty, then the bound is the old one again.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { BoundedRunner } from "../../src/backends/embedded/delivery/delivery-fd-io.js";

/** Jobs that run until released, recording how many ran at once. */
function jobs(runner: BoundedRunner, count: number): { started: number[]; peak: () => number; release: (n?: number) => Promise<void>; all: Promise<void[]> } {
  const started: number[] = [];
  const gates: Array<() => void> = [];
  let running = 0;
  let peak = 0;
  const all = Promise.all(
    Array.from({ length: count }, (_, i) =>
      runner.run(async () => {
        started.push(i);
        running++;
        peak = Math.max(peak, running);
        await new Promise<void>((resolve) => gates.push(resolve));
        running--;
      }),
    ),
  );
  return {
    started,
    peak: () => peak,
    // Releases the first n running jobs, then lets the runner hand their slots on.
    release: async (n = 1) => {
      for (let k = 0; k < n; k++) gates.shift()?.();
      for (let k = 0; k < 5; k++) await Promise.resolve();
    },
    all,
  };
}

test("at most `limit` jobs run at once, in arrival order", async () => {
  const runner = new BoundedRunner(2);
  const j = jobs(runner, 5);
  await new Promise((resolve) => setImmediate(resolve));
  assert.deepEqual(j.started, [0, 1]);
  await j.release();
  assert.deepEqual(j.started, [0, 1, 2]);
  await j.release(4);
  await j.release(4);
  await j.all;
  assert.deepEqual(j.started, [0, 1, 2, 3, 4]);
  assert.equal(j.peak(), 2);
});

test("hurry lets more run until its queue is empty; then the old bound holds again", async () => {
  const runner = new BoundedRunner(2);
  const first = jobs(runner, 6);
  await new Promise((resolve) => setImmediate(resolve));
  assert.equal(first.started.length, 2);
  runner.hurry(4);
  await new Promise((resolve) => setImmediate(resolve));
  assert.equal(first.started.length, 4, "two more start at once");
  await first.release(2);
  assert.equal(first.started.length, 6, "the queue drains four at a time");
  await first.release(4);
  await first.all;
  assert.equal(first.peak(), 4);

  const second = jobs(runner, 4);
  await new Promise((resolve) => setImmediate(resolve));
  assert.equal(second.started.length, 2, "back to two once the hurried queue was gone");
  runner.hurry(1);
  await new Promise((resolve) => setImmediate(resolve));
  assert.equal(second.started.length, 2, "hurrying never lowers the bound");
  await second.release(4);
  await second.release(4);
  await second.all;
  assert.equal(second.peak(), 2);
});
