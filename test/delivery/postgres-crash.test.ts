/**
 * kill -9 during upload and commit on the postgres backend (G7, G9). A child process opens the
 * postgres delivery on its own database and pushes the crash bundle; the parent SIGKILLs it after
 * a seeded random delay, spread over the whole push, and for a share of the runs over the commit
 * alone. After each kill, once the dead child's server sessions have ended (a statement the
 * server was running when its client died still commits or rolls back on its own):
 *  - the database as the crash left it holds no blob whose rows are not its bytes and no catalog
 *    entry whose blobs are missing, and no stage of a committed manifest;
 *  - start-up succeeds on it, and the bundle is either absent or complete and verified;
 *  - begin with the same manifest resumes the stage the child began (or answers the receipt once
 *    committed), asks exactly for the bytes not stored (never below an acknowledged offset, never
 *    a stored blob), and the re-push commits to the same receipt, again on a repeat.
 * WARDEN_PG_CRASH_SEED replays a sequence of delays and bundles; failures name the seed.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { fileURLToPath } from "node:url";
import pg from "pg";
import { openPostgresBackend } from "../../src/backends/postgres/index.js";
import { Delivery } from "../../src/delivery/service.js";
import { receiptOf, type Manifest } from "../../src/delivery/manifest-types.js";
import { startTestPostgres } from "../support/postgres.js";
import { crashBundle, CRASH_CHUNK_BYTES } from "./children/crash-bundle.js";
import { WarmChild } from "./children/warm-child.js";
import { bundledScript } from "../support/bundle.js";
import { assertBundleIntact, uploadMissing } from "./store-harness.js";
import { LONG_TEST_MS } from "../support/wait.js";

const CHILD = fileURLToPath(new URL("./children/postgres-crash-child.ts", import.meta.url));
const SEED = Number(process.env.WARDEN_PG_CRASH_SEED ?? 20261130);
const MIN_RUNS = 20;
/**
 * Kills that must land before the push completed for the race to count as run. Runs go on past
 * MIN_RUNS until this many landed (and one in each phase), up to MAX_RUNS: delays are drawn from
 * the faster calibration push, so on a machine whose speed swings mid-test more of them land
 * after the child finished, and a fixed share of a fixed number of runs failed at load 8.
 */
const MIN_KILLS = 15;
const MAX_RUNS = 40;
/** Runs go on past MIN_RUNS while the file stays within this budget. */
const BUDGET_MS = 35_000;

/**
 * When the parent kills: a delay after "opened" (the whole push), after "committing" (the
 * commit), or after "recording" (the catalog's record transaction and what follows it).
 */
interface Run {
  readonly seed: number;
  readonly from?: "opened" | "committing" | "recording";
  readonly delayMs?: number;
}

interface Outcome {
  readonly killed: boolean;
  readonly inCommit: boolean;
  readonly committedBefore: boolean;
  readonly resumedStage: boolean;
  readonly sent: number;
  readonly total: number;
  readonly pushMs: number;
}

const PROGRESS = /^acked (\S+) (\d+)$/;

/** The last acknowledged offset of each blob, from the child's "acked" lines. */
function ackedOffsets(lines: readonly string[]): Map<string, number> {
  const acked = new Map<string, number>();
  for (const line of lines) {
    const match = PROGRESS.exec(line);
    if (match !== null) acked.set(match[1]!, Number(match[2]));
  }
  return acked;
}

async function rows<R>(db: pg.Client, sql: string, values: unknown[] = []): Promise<R[]> {
  return (await db.query(sql, values)).rows as R[];
}

/**
 * What must hold in the database at any moment, read straight from the tables: every blob's
 * rows are contiguous and are its bytes, every catalog entry's blobs are stored, and a committed
 * manifest has no stage left (the commit closes it in the same transaction).
 */
async function assertDatabaseConsistent(db: pg.Client, when: string): Promise<void> {
  const wrongBlobs = await rows<{ digest: string }>(
    db,
    `SELECT b.digest FROM warden_blobs b LEFT JOIN warden_blob_chunks c ON c.digest = b.digest
     GROUP BY b.digest, b.byte_len
     HAVING COALESCE(sum(octet_length(c.bytes)), 0) <> b.byte_len
        OR 'sha256:' || encode(sha256(COALESCE(string_agg(c.bytes, ''::bytea ORDER BY c.off), ''::bytea)), 'hex') <> b.digest`,
  );
  assert.deepEqual(wrongBlobs, [], `${when}: every stored blob's rows hold exactly its bytes`);
  const gaps = await rows<{ digest: string }>(
    db,
    `SELECT digest FROM (SELECT digest, off, sum(octet_length(bytes)) OVER (PARTITION BY digest ORDER BY off) - octet_length(bytes) AS at
     FROM warden_blob_chunks) r WHERE off <> at`,
  );
  assert.deepEqual(gaps, [], `${when}: every stored blob's rows are contiguous`);
  const unbacked = await rows<{ manifest_digest: string; digest: string }>(
    db,
    `SELECT cb.manifest_digest, cb.digest FROM warden_commit_blobs cb LEFT JOIN warden_blobs b ON b.digest = cb.digest WHERE b.digest IS NULL`,
  );
  assert.deepEqual(unbacked, [], `${when}: no catalog entry names a blob that is not stored`);
  const unclosed = await rows<{ stage_id: string }>(
    db,
    "SELECT s.stage_id FROM warden_stages s JOIN warden_commits c ON c.manifest_digest = s.manifest_digest",
  );
  assert.deepEqual(unclosed, [], `${when}: a committed manifest has no stage left`);
}

/** The catalog entry's blob index matches the receipt: each of its blobs, and only those. */
async function assertIndexed(db: pg.Client, manifest: Manifest): Promise<void> {
  const indexed = await rows<{ digest: string }>(db, "SELECT digest FROM warden_commit_blobs WHERE manifest_digest = $1 ORDER BY digest", [manifest.manifest_digest]);
  assert.deepEqual(
    indexed.map((r) => r.digest),
    receiptOf(manifest).blobs.map((b) => b.digest),
  );
}

/** Waits until the server sessions in `pids` have ended. */
async function sessionsEnded(db: pg.Client, pids: readonly number[]): Promise<void> {
  const deadline = Date.now() + 10_000;
  for (;;) {
    const live = await rows<{ pid: number }>(db, "SELECT pid FROM pg_stat_activity WHERE pid = ANY($1::int[])", [pids]);
    if (live.length === 0) return;
    assert.ok(Date.now() < deadline, `the dead child's sessions ${live.map((r) => r.pid).join(", ")} never ended`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

async function crashAndRecover(child: WarmChild, url: string, run: Run): Promise<Outcome> {
  const db = new pg.Client({ connectionString: url });
  await db.connect();
  try {
    assert.ok(await child.printed("loaded"), `child failed to load: ${child.stderr}`);
    child.start({ url, seed: run.seed });
    assert.ok(await child.printed("opened"), `child failed to open: ${child.stderr}`);
    const opened = performance.now();
    if (run.delayMs !== undefined) {
      const delayMs = run.delayMs;
      const from = run.from === undefined || run.from === "opened" ? Promise.resolve(true) : child.printed(run.from);
      void from.then((reached) => reached && setTimeout(() => child.kill(), delayMs));
    }
    const exit = await child.exited;
    const pushMs = performance.now() - opened;
    const killed = exit.signal === "SIGKILL";
    assert.ok(killed || exit.code === 0, `child ended with ${exit.code}/${exit.signal}: ${child.stderr}`);
    const committedByChild = child.lines.includes("committed");
    const inCommit = killed && child.lines.includes("committing") && !committedByChild;
    const begunBy = /^begun (\S+)$/.exec(child.lines.find((l) => l.startsWith("begun ")) ?? "")?.[1];
    const answered = child.lines.find((l) => l.startsWith("receipt "))?.slice("receipt ".length);

    // The dead child's statements settle on the server first, so what follows sees one state.
    const childSessions = await rows<{ pid: number }>(db, "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND backend_type = 'client backend' AND pid <> pg_backend_pid()");
    await sessionsEnded(
      db,
      childSessions.map((r) => r.pid),
    );
    await assertDatabaseConsistent(db, "as the crash left it");

    const { manifest, blobs } = crashBundle(run.seed);
    const receipt = receiptOf(manifest);
    const backend = await openPostgresBackend({ url, poolSize: 4 });
    try {
      const delivery = await Delivery.open(backend.delivery, { limits: backend.limits });
      await assertDatabaseConsistent(db, "after start-up");
      const listed = await delivery.catalog.list();
      const committedBefore = listed.length === 1;
      if (committedBefore) {
        await assertBundleIntact(delivery, manifest, blobs);
        await assertIndexed(db, manifest);
      } else assert.deepEqual(listed, [], "an uncommitted bundle is not visible at all");
      if (committedByChild) assert.ok(committedBefore, "a commit that answered survives the kill");

      // What is stored now, read from the tables: begin must ask for the rest and nothing else.
      const stageBefore = (await rows<{ stage_id: string }>(db, "SELECT stage_id FROM warden_stages WHERE manifest_digest = $1", [manifest.manifest_digest]))[0]?.stage_id;
      if (committedBefore) assert.equal(stageBefore, undefined);
      const stored = new Set((await rows<{ digest: string }>(db, "SELECT digest FROM warden_blobs")).map((r) => r.digest));
      const partialEnds = new Map(
        (
          await rows<{ digest: string; end: number }>(
            db,
            "SELECT digest, COALESCE(max(off + len), 0)::int AS end FROM warden_stage_chunks WHERE stage_id = $1 GROUP BY digest",
            [stageBefore ?? ""],
          )
        ).map((r) => [r.digest, r.end]),
      );

      const begun = await delivery.begin(manifest);
      if (begunBy !== undefined) assert.equal(begun.stage_id, begunBy, "begin resumes the stage the child began");
      if (stageBefore !== undefined) assert.equal(begun.stage_id, stageBefore, "begin resumes the stored stage");
      assert.equal(begun.committed, committedBefore);
      if (begun.committed) assert.deepEqual(begun.receipt, receipt, "a committed manifest answers its receipt");

      const expectMissing = committedBefore ? [] : receipt.blobs.filter((b) => b.byte_len > 0 && !stored.has(b.digest)).map((b) => b.digest);
      assert.deepEqual(begun.missing.map((m) => m.digest).sort(), expectMissing, "begin asks for every blob not stored, and only those");
      const acked = ackedOffsets(child.lines);
      for (const m of begun.missing) {
        assert.equal(m.offset, partialEnds.get(m.digest) ?? 0, `${m.digest} resumes where its stored rows end`);
        assert.ok(m.offset >= (acked.get(m.digest) ?? 0), `${m.digest} resumes at ${m.offset}, below its acknowledged ${acked.get(m.digest)}`);
      }
      const missingBytes = begun.missing.reduce((sum, m) => sum + (m.byte_len - m.offset), 0);
      const sent = await uploadMissing(delivery, begun, blobs, CRASH_CHUNK_BYTES);
      assert.equal(sent, missingBytes, "the re-push sends exactly the missing bytes");

      assert.deepEqual(await delivery.commit(begun.stage_id), receipt, "the re-push commits to the manifest's receipt");
      if (answered !== undefined) assert.deepEqual(JSON.parse(answered), receipt, "the child's commit answered the same receipt");
      assert.deepEqual(await delivery.commit(begun.stage_id), receipt, "a repeated commit answers the same receipt");
      const again = await delivery.begin(manifest);
      assert.equal(again.committed, true);
      assert.equal(again.stage_id, begun.stage_id);
      assert.deepEqual(again.committed ? again.receipt : undefined, receipt);
      await assertBundleIntact(delivery, manifest, blobs);
      await assertIndexed(db, manifest);
      await assertDatabaseConsistent(db, "after the re-push");
      const leftovers = await rows<{ n: number }>(db, "SELECT ((SELECT count(*) FROM warden_stages) + (SELECT count(*) FROM warden_stage_chunks))::int AS n");
      assert.equal(leftovers[0]!.n, 0, "the commit left no stage and no partial rows");

      const total = receipt.blobs.reduce((sum, b) => sum + b.byte_len, 0);
      return { killed, inCommit, committedBefore, resumedStage: stageBefore !== undefined, sent, total, pushMs };
    } finally {
      await backend.close();
    }
  } finally {
    await db.end();
  }
}

test("postgres delivery: kill -9 at random moments of a push, then start-up, absent or complete, re-push", { timeout: LONG_TEST_MS }, async (t) => {
  const started = performance.now();
  const server = await startTestPostgres();
  t.after(async () => {
    // A database per run leaves many dirty pages: a clean shutdown would spend seconds writing
    // them out for a cluster that is deleted next.
    if (server.owned) server.stopServer("immediate");
    await server.stop();
  });

  // Starting a child (its modules loading) and creating a database cost more than a run: both are
  // made ahead. Each child is the script bundled, for plain node: under tsx each start cost about
  // 0.9 s of CPU loading.
  const script = await bundledScript(CHILD);
  const spawned: WarmChild[] = [];
  t.after(() => spawned.forEach((child) => child.kill()));
  const ready = (): { child: WarmChild; url: Promise<string> } => {
    const child = new WarmChild(script);
    spawned.push(child);
    return { child, url: server.createDatabase("pgcrash") };
  };
  const ahead = [ready(), ready()];
  const next = (): { child: WarmChild; url: Promise<string> } => {
    ahead.push(ready());
    return ahead.shift()!;
  };
  const attempt = async (run: Run): Promise<Outcome> => {
    const { child, url } = next();
    try {
      return await crashAndRecover(child, await url, run);
    } catch (error) {
      t.diagnostic(`failed run: seed ${run.seed} (WARDEN_PG_CRASH_SEED=${SEED}), kill ${run.delayMs?.toFixed(1) ?? "never"} ms after "${run.from ?? "-"}"`);
      throw error;
    }
  };

  // Calibrate: uncrashed pushes measure how long the push and its commit take on this machine.
  const calibration: { push: number; commit: number; record: number }[] = [];
  for (let i = 0; i < 2; i++) {
    const { child, url } = next();
    const baseline = await crashAndRecover(child, await url, { seed: SEED + i });
    assert.equal(baseline.killed, false);
    assert.equal(baseline.sent, 0, "a completed push leaves nothing to send");
    calibration.push({ push: baseline.pushMs, commit: child.between("committing", "committed"), record: child.between("recording", "recorded") });
  }
  const pushMs = Math.min(...calibration.map((c) => c.push));
  const commitMs = Math.min(...calibration.map((c) => c.commit));
  const recordMs = Math.min(...calibration.map((c) => c.record));

  let state = SEED >>> 0 || 1;
  const random = (): number => {
    state ^= state << 13;
    state ^= state >>> 17;
    state ^= state << 5;
    return (state >>> 0) / 0x1_0000_0000;
  };
  const outcomes: Outcome[] = [];
  const enough = (): boolean => {
    const kills = outcomes.filter((o) => o.killed);
    return kills.length >= MIN_KILLS && kills.some((o) => o.inCommit) && kills.some((o) => !o.inCommit && !o.committedBefore) && outcomes.some((o) => o.committedBefore);
  };
  for (let i = 0; i < MAX_RUNS; i++) {
    if (i >= MIN_RUNS && enough() && performance.now() - started > BUDGET_MS) break;
    // A third anywhere in the push (begin, chunks, commit), a third in the commit, a third in
    // and just after the record transaction, where the commit becomes durable or not at all.
    const seed = SEED + 100 + i;
    const plans: Run[] = [
      { seed, from: "opened", delayMs: random() * pushMs },
      { seed, from: "committing", delayMs: random() * commitMs },
      { seed, from: "recording", delayMs: random() * recordMs * 2 },
    ];
    const run = plans[i % 3]!;
    outcomes.push(await attempt(run));
  }

  const killed = outcomes.filter((o) => o.killed).length;
  const inUpload = outcomes.filter((o) => o.killed && !o.inCommit && !o.committedBefore).length;
  const inCommit = outcomes.filter((o) => o.inCommit).length;
  const committed = outcomes.filter((o) => o.committedBefore).length;
  const resumed = outcomes.filter((o) => o.resumedStage).length;
  const partial = outcomes.filter((o) => o.sent > 0 && o.sent < o.total).length;
  t.diagnostic(
    `seed ${SEED}: ${outcomes.length} runs within a ${pushMs.toFixed(0)} ms push (commit ${commitMs.toFixed(0)} ms, record ${recordMs.toFixed(1)} ms): ${killed} killed ` +
      `(${inCommit} during the commit), ${committed} found committed, ${resumed} resumed a stored stage, ${partial} re-sent part of the bytes, ` +
      `${((performance.now() - started) / 1000).toFixed(1)} s`,
  );
  assert.ok(killed >= MIN_KILLS, `too few runs were killed before the push completed to judge (${killed} of ${outcomes.length}; ${MIN_KILLS} needed)`);
  assert.ok(inUpload > 0 && inCommit > 0 && committed > 0, `kills landed before the commit (${inUpload}), during it (${inCommit}), and after it (${committed})`);
});
