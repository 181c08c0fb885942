/**
 * Witness lag, visible: how far each witness is behind the log, on /metrics and in the readiness
 * report (which stays ready while a witness is down), and a witness that was down catching up by
 * itself when it is back, with no new leaf to trigger a checkpoint.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as path from "node:path";
import { EmbeddedKeyStore } from "../../src/backends/embedded/journal/key-store.js";
import { ensurePrivateDirSync } from "../../src/storage/secure-fs.js";
import { verifierFor } from "../../src/tlog/cosignature.js";
import { formatVkey, parseVkey, SIG_ED25519 } from "../../src/tlog/note.js";
import { parsePolicy, verifyCheckpoint } from "../../src/tlog/policy.js";
import { waitFor } from "../support/wait.js";
import { OBSERVER, json, openTestNode, type TestNode } from "../support/app-node.js";
import { startWitness, type RunningWitness } from "./witness-fixture.js";
import { tempDir } from "../support/temp.js";

const ORIGIN = "warden.test/lag";
const W = "witness.test/w1";

/** The value of a metric series in Prometheus text ("name" or "name{labels}"). */
function metric(text: string, series: string): number | undefined {
  const line = text.split("\n").find((l) => l.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
}

describe("witness lag on /metrics and /readyz; a witness back up catches up by itself", () => {
  let root: string;
  let node: TestNode;
  let witness: RunningWitness;
  let logVkey: string;
  before(async () => {
    root = tempDir("tlog-lag");
    const home = path.join(root, "home");
    ensurePrivateDirSync(home, { create: true });
    logVkey = formatVkey(ORIGIN, SIG_ED25519, (await new EmbeddedKeyStore(path.join(home, "keys")).active()).public_key);
    witness = await startWitness(path.join(root, "witness"), logVkey);
    node = await openTestNode(root, {
      warden: {
        log: { origin: ORIGIN, checkpointIntervalMs: 3_600_000, retryMs: 50, witnesses: [{ name: W, url: witness.url, verifier: parseVkey(witness.vkey, verifierFor) }] },
      },
    });
  });
  after(async () => {
    await node.close();
    await witness.stop();
    fs.rmSync(root, { recursive: true, force: true });
  });

  const metrics = async () => (await node.app.inject({ url: "/metrics", headers: OBSERVER })).payload;
  const ready = async () => {
    const res = await node.app.inject({ url: "/readyz", headers: OBSERVER });
    assert.equal(res.statusCode, 200, res.payload);
    return json(res.payload) as { status: string; log: { size: number; checkpoint_size: number; witnesses: { name: string; size: number; behind: number; lag_seconds: number; last_error?: string }[] } };
  };
  const append = (n: number, tag: string) =>
    Promise.all(
      Array.from({ length: n }, (_, i) =>
        node.warden.log!.append({ v: 1, type: "bundle.committed", bundle_id: tag, revision: `r${i}`, bundle_digest: `sha256:${"a".repeat(64)}`, manifest_digest: `sha256:${"b".repeat(64)}` }),
      ),
    );

  it("a witness down: ready, with how far behind it is; back up: it gets the latest checkpoint without a new leaf", async () => {
    const log = node.warden.log!;
    await log.witnessed();
    const start = await log.checkpoint();
    let text = await metrics();
    assert.equal(metric(text, "warden_log_size"), start.size);
    assert.equal(metric(text, "warden_log_checkpoint_size"), start.size);
    assert.equal(metric(text, `warden_log_witness_cosigned_size{witness="${W}"}`), start.size, text);
    assert.equal(metric(text, `warden_log_witness_behind_leaves{witness="${W}"}`), 0);
    assert.equal(metric(text, `warden_log_witness_lag_seconds{witness="${W}"}`), 0);

    const port = Number(new URL(witness.url).port);
    await witness.stop();
    await append(25, "lag");
    const behind = await log.checkpoint();
    assert.equal(behind.size, start.size + 25);
    await log.witnessed();
    // Lag is the age of the checkpoint it has not cosigned: it grows while the witness is down.
    await waitFor("the witness's lag to grow past 0.2 s", async () => ((await ready()).log.witnesses[0]!.lag_seconds > 0.2 ? true : undefined));
    const down = await ready();
    assert.equal(down.status, "ready", "a witness down never makes the node unready");
    assert.equal(down.log.checkpoint_size, behind.size);
    assert.deepEqual({ ...down.log.witnesses[0], lag_seconds: undefined, last_error: undefined }, { name: W, size: start.size, behind: 25, lag_seconds: undefined, last_error: undefined });
    assert.match(down.log.witnesses[0]!.last_error ?? "", /fetch failed|ECONNREFUSED/);
    text = await metrics();
    assert.equal(metric(text, "warden_log_size"), behind.size);
    assert.equal(metric(text, "warden_log_checkpoint_size"), behind.size);
    assert.equal(metric(text, `warden_log_witness_cosigned_size{witness="${W}"}`), start.size);
    assert.equal(metric(text, `warden_log_witness_behind_leaves{witness="${W}"}`), 25);
    assert.ok(metric(text, `warden_log_witness_lag_seconds{witness="${W}"}`)! > 0.2, text);

    // Back on the same port with its state; nothing new is appended: the node retries by itself.
    witness = await startWitness(path.join(root, "witness"), logVkey, port);
    await waitFor("the witness to cosign the latest checkpoint by itself", async () => (metric(await metrics(), `warden_log_witness_behind_leaves{witness="${W}"}`) === 0 ? true : undefined));
    text = await metrics();
    assert.equal(metric(text, "warden_log_size"), behind.size, "no new leaf was needed");
    assert.equal(metric(text, `warden_log_witness_cosigned_size{witness="${W}"}`), behind.size);
    assert.equal(metric(text, `warden_log_witness_lag_seconds{witness="${W}"}`), 0);
    const back = await ready();
    assert.equal(back.log.witnesses[0]!.last_error, undefined);
    const policy = parsePolicy(`log ${logVkey}\nwitness w1 ${witness.vkey}\nquorum w1\n`);
    assert.equal(verifyCheckpoint((await log.latestCheckpoint()).note, policy).size, behind.size, "the served checkpoint carries its cosignature");
  });
});
