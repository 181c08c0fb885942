/**
 * kill -9 during upload and commit (G7, G9). A child process pushes a small bundle and is
 * SIGKILLed — at the nth pass of a named fault point, at a random step of the whole push (any
 * fault point), or after a random delay. After each kill
 * the store is reopened: start-up must succeed (no stale temp or twin blocks it), the bundle must
 * be either absent or complete and verified, and a re-push must complete it sending exactly the
 * bytes `begin` reports missing.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { fileURLToPath } from "node:url";
import { openEmbeddedDelivery } from "../../src/backends/embedded/delivery/delivery-backend.js";
import type { DeliveryFaultPoint } from "../../src/backends/embedded/delivery/delivery-faults.js";
import { crashBundle, CRASH_CHUNK_BYTES } from "./children/crash-bundle.js";
import { WarmChild } from "./children/warm-child.js";
import { bundledScript } from "../support/bundle.js";
import { assertBundleIntact, treeOf, uploadMissing } from "./store-harness.js";
import { LONG_TEST_MS } from "../support/wait.js";

const CHILD = fileURLToPath(new URL("./children/delivery-crash-child.ts", import.meta.url));

interface Run {
  readonly seed: number;
  readonly point?: DeliveryFaultPoint;
  readonly nth?: number;
  readonly step?: number;
  readonly delayMs?: number;
}

/** Passes of each point in one push of the crash bundle, at most; the nth pass is drawn below it. */
const POINTS: ReadonlyArray<readonly [DeliveryFaultPoint, number]> = [
  ["blob-temp-written", 1],
  ["partial-created", 4],
  ["chunk-written", 8],
  ["partial-sync", 5],
  ["blob-linked", 5],
  ["blob-dir-sync", 1],
  ["commit-record", 1],
  ["commit-recorded", 1],
  ["stage-remove", 1],
];
/**
 * From here on every chunk was acknowledged before the kill (these points are passed at commit;
 * a blob's fdatasync may start earlier, while later blobs upload): a crash of the process keeps
 * every acknowledged byte, so the re-push sends nothing.
 */
const AFTER_UPLOAD = new Set<DeliveryFaultPoint>(["blob-linked", "blob-dir-sync", "commit-record", "commit-recorded", "stage-remove"]);
/** From here on the commit record was durable before the kill. */
const AFTER_COMMIT = new Set<DeliveryFaultPoint>(["commit-recorded", "stage-remove"]);

interface Outcome {
  readonly killed: boolean;
  readonly committedBefore: boolean;
  readonly sent: number;
  /** Bytes of a full upload: a re-push between 0 and this resumed a partial upload. */
  readonly total: number;
  readonly workMs: number;
  /** Fault points a completed push passed (0 when killed). */
  readonly steps: number;
}

/** The last acknowledged offset of each blob, from the child's "acked" lines. */
function ackedOffsets(lines: readonly string[]): Map<string, number> {
  const acked = new Map<string, number>();
  for (const line of lines) {
    const match = /^acked (\S+) (\d+)$/.exec(line);
    if (match !== null) acked.set(match[1]!, Number(match[2]));
  }
  return acked;
}

async function crashAndRecover(child: WarmChild, run: Run): Promise<Outcome> {
  const home = fs.mkdtempSync(path.join(os.tmpdir(), "warden-delivery-crash-"));
  try {
    assert.ok(await child.printed("loaded"), `child failed to load: ${child.stderr}`);
    child.start({ home, seed: run.seed, point: run.point, nth: run.nth, step: run.step });
    assert.ok(await child.printed("opened"), `child failed to open: ${child.stderr}`);
    const started = performance.now();
    if (run.delayMs !== undefined) setTimeout(() => child.kill(), run.delayMs);
    const exit = await child.exited;
    const workMs = performance.now() - started;
    const killed = exit.signal === "SIGKILL";
    assert.ok(killed || exit.code === 0, `child ended with ${exit.code}/${exit.signal}: ${child.stderr}`);
    if (run.point !== undefined || run.step !== undefined) {
      assert.ok(killed, `kill point ${run.point ?? "step"} #${run.nth ?? run.step} was never reached`);
    }
    const steps = Number(/^steps (\d+)$/.exec(child.lines.find((l) => l.startsWith("steps ")) ?? "")?.[1] ?? 0);

    const { manifest, blobs } = crashBundle(run.seed);
    const { delivery, layout } = await openEmbeddedDelivery(home);
    try {
      const leftovers = treeOf(layout.root).filter((p) => /(^|\/)\.tmp-/.test(p));
      assert.deepEqual(leftovers, [], "recovery removed every temp file");
      const listed = await delivery.catalog.list();
      const committedBefore = listed.length === 1;
      if (committedBefore) await assertBundleIntact(delivery, manifest, blobs);
      else assert.deepEqual(listed, [], "an uncommitted bundle is not visible at all");
      if (run.point !== undefined && AFTER_COMMIT.has(run.point)) assert.ok(committedBefore, `${run.point}: the durable commit survived`);

      const begun = await delivery.begin(manifest);
      const missingBytes = begun.missing.reduce((sum, m) => sum + (m.byte_len - m.offset), 0);
      // A crash of the process loses no acknowledged byte: every blob resumes at or past its last ack.
      for (const [digest, acked] of ackedOffsets(child.lines)) {
        const resume = begun.missing.find((m) => m.digest === digest)?.offset;
        assert.ok(resume === undefined || resume >= acked, `${digest} resumes at ${resume}, below its acknowledged ${acked}`);
      }
      const sent = await uploadMissing(delivery, begun, blobs, CRASH_CHUNK_BYTES);
      assert.equal(sent, missingBytes, "the re-push sends exactly the missing bytes");
      if (run.point !== undefined && AFTER_UPLOAD.has(run.point)) assert.equal(sent, 0, `${run.point}: every blob was already durable`);
      if (committedBefore) assert.equal(begun.committed, true);
      const receipt = await delivery.commit(begun.stage_id);
      assert.equal(receipt.manifest_digest, manifest.manifest_digest);
      await assertBundleIntact(delivery, manifest, blobs);
      const total = [...blobs.values()].reduce((sum, b) => sum + b.byteLength, 0);
      return { killed, committedBefore, sent, total, workMs, steps };
    } finally {
      await delivery.close();
    }
  } finally {
    fs.rmSync(home, { recursive: true, force: true });
  }
}

test("kill -9 at every fault point and at random moments: absent or complete, then re-pushed", { timeout: LONG_TEST_MS }, async (t) => {
  const pointRuns: Run[] = [];
  let seed = 1;
  for (const [point, passes] of POINTS) {
    const draws = passes === 1 ? [1] : [1, 1 + ((seed * 7) % passes), passes];
    for (const nth of new Set(draws)) pointRuns.push({ seed: seed++, point, nth });
  }

  // Starting a child (its modules loading) costs more than a run: children warm up ahead, two
  // lanes run at once. Each is the child script bundled, for plain node: under tsx each start cost
  // about 0.9 s of CPU loading, more than its push.
  const script = await bundledScript(CHILD);
  const spawned: WarmChild[] = [];
  const spawn = (): WarmChild => {
    const child = new WarmChild(script);
    spawned.push(child);
    return child;
  };
  // Whatever happens, no child outlives the test (a live child would keep the runner waiting).
  t.after(() => spawned.forEach((child) => child.kill()));
  const warm: WarmChild[] = [spawn(), spawn()];
  const take = (): WarmChild => {
    warm.push(spawn());
    return warm.shift()!;
  };

  // Calibrate: one uncrashed push measures how long the work takes on this machine.
  const baseline = await crashAndRecover(take(), { seed: 1000 });
  assert.equal(baseline.killed, false);
  assert.equal(baseline.sent, 0, "a completed push leaves nothing to send");

  assert.ok(baseline.steps > 20, `a push passes many fault points (${baseline.steps})`);

  let state = 12345;
  const random = (): number => ((state = (state * 1103515245 + 12345) & 0x7fffffff) / 0x7fffffff);
  // Random moments: a random step of the whole push (always a kill), and a few random delays.
  const stepRuns = Math.max(32, 50 - pointRuns.length);
  const delayRuns = 2;
  const runs: Run[] = [...pointRuns];
  for (let i = 0; i < stepRuns; i++) runs.push({ seed: 2000 + i, step: 1 + Math.floor(random() * baseline.steps) });
  for (let i = 0; i < delayRuns; i++) runs.push({ seed: 3000 + i, delayMs: random() * baseline.workMs });
  const outcomes: Outcome[] = [];
  const lane = async (): Promise<void> => {
    for (let run = runs.shift(); run !== undefined; run = runs.shift()) outcomes.push(await crashAndRecover(take(), run));
  };
  await Promise.all([lane(), lane()]);

  const killed = outcomes.filter((o) => o.killed).length;
  const committed = outcomes.filter((o) => o.committedBefore).length;
  const resumed = outcomes.filter((o) => o.sent > 0 && o.sent < o.total).length;
  t.diagnostic(
    `${outcomes.length} crash runs (${pointRuns.length} at fault points, ${stepRuns} at random steps of ${baseline.steps}, ` +
      `${delayRuns} at random delays within ${baseline.workMs.toFixed(0)} ms): ${killed} killed, ${committed} found committed, ` +
      `${resumed} resumed a partial upload`,
  );
  assert.ok(killed >= 50, "at least 50 runs were killed");
});
