/**
 * C2SP tlog-witness, both sides, over real HTTP on loopback: a node configured with a witness gets
 * its checkpoints cosigned; the witness refuses forks and rollbacks (also signed with the node's
 * own key), keeps its state across a restart, and a witness that was down catches up while the
 * log goes on.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as path from "node:path";
import { EmbeddedKeyStore } from "../../src/backends/embedded/journal/key-store.js";
import { ensurePrivateDirSync } from "../../src/storage/secure-fs.js";
import { formatCheckpoint, parseCheckpointText } from "../../src/tlog/checkpoint.js";
import { verifierFor } from "../../src/tlog/cosignature.js";
import { leafHash } from "../../src/tlog/merkle.js";
import { ed25519NoteSigner, parseNote, parseVkey, signNote } from "../../src/tlog/note.js";
import { parsePolicy, verifyCheckpoint } from "../../src/tlog/policy.js";
import { addCheckpointBody } from "../../src/tlog/witness-client.js";
import { startWitness, type RunningWitness } from "./witness-fixture.js";
import { openWarden, type Warden } from "../../src/warden/facade.js";
import { tempDir } from "../support/temp.js";

const post = async (url: string, body: string) => {
  const res = await fetch(`${url}/add-checkpoint`, { method: "POST", body });
  return { status: res.status, type: res.headers.get("content-type"), text: await res.text() };
};

describe("witnesses (C2SP tlog-witness)", () => {
  let root: string;
  let warden: Warden;
  let witness: RunningWitness;
  let logVkey: string;
  let port: number;
  const errors: string[] = [];

  before(async () => {
    root = tempDir("tlog-witness");
    // The node's key first, so the witness can be told which log it witnesses.
    const home = path.join(root, "home");
    ensurePrivateDirSync(home, { create: true });
    const nodeKey = await new EmbeddedKeyStore(path.join(home, "keys")).active();
    const { formatVkey, SIG_ED25519 } = await import("../../src/tlog/note.js");
    logVkey = formatVkey("warden.test/witnessed", SIG_ED25519, nodeKey.public_key);
    witness = await startWitness(path.join(root, "witness"), logVkey);
    port = Number(new URL(witness.url).port);
    warden = await openWarden({
      home,
      log: {
        origin: "warden.test/witnessed",
        checkpointIntervalMs: 3_600_000,
        // No retry by itself here: the last test restarts the witness and asks it for its size first.
        retryMs: 3_600_000,
        witnesses: [{ name: "witness.test/w1", url: witness.url, verifier: parseVkey(witness.vkey, verifierFor) }],
        onWitnessError: (name, error) => errors.push(`${name}: ${String(error)}`),
      },
    });
  });
  after(async () => {
    await warden.close();
    await witness.stop();
    fs.rmSync(root, { recursive: true, force: true });
  });

  const append = (n: number, tag: string) =>
    Promise.all(
      Array.from({ length: n }, (_, i) =>
        warden.log!.append({ v: 1, type: "bundle.committed", bundle_id: tag, revision: `r${i}`, bundle_digest: `sha256:${"a".repeat(64)}`, manifest_digest: `sha256:${"b".repeat(64)}` }),
      ),
    );
  const policy = () => parsePolicy(`log ${logVkey}\nwitness w1 ${witness.vkey}\nquorum w1\n`);

  it("each new checkpoint is cosigned, and the cosigned checkpoint satisfies a policy that requires the witness", async () => {
    await append(300, "a");
    await warden.log!.checkpoint();
    await warden.log!.witnessed();
    const latest = await warden.log!.latestCheckpoint();
    const verified = verifyCheckpoint(latest.note, policy());
    assert.deepEqual(verified.cosigners, ["w1"]);
    assert.equal(verified.size, latest.size);
    const status = await warden.log!.status();
    assert.equal(status.witnesses[0]!.behind, 0);
    assert.deepEqual(errors, []);
  });

  it("refuses a fork and a rollback signed with the node's own key, and says why with the spec's status codes", async () => {
    const key = await new EmbeddedKeyStore(path.join(root, "home", "keys")).active();
    const signer = ed25519NoteSigner("warden.test/witnessed", key);
    const current = parseCheckpointText(parseNote((await warden.log!.latestCheckpoint()).note).text);
    const forged = (size: number) => signNote(formatCheckpoint({ origin: current.origin, size, root: leafHash(Buffer.from(`fork ${size}`)) }), [signer]);
    // Same size, another root.
    const same = await post(witness.url, addCheckpointBody(current.size, [], forged(current.size)));
    assert.equal(same.status, 422, same.text);
    // A larger tree that does not extend the witnessed one: no proof can be made; an empty one fails.
    const larger = await post(witness.url, addCheckpointBody(current.size, [], forged(current.size + 5)));
    assert.equal(larger.status, 422, larger.text);
    // A smaller tree (dropping entries): old size mismatch, answered with the witnessed size.
    const smaller = await post(witness.url, addCheckpointBody(0, [], forged(current.size - 10)));
    assert.equal(smaller.status, 409);
    assert.equal(smaller.type, "text/x.tlog.size");
    assert.equal(smaller.text, `${current.size}\n`);
    const backwards = await post(witness.url, addCheckpointBody(current.size, [], forged(current.size - 10)));
    assert.equal(backwards.status, 400);
    // Unknown origin, and a bad signature of the known key.
    const other = await post(witness.url, addCheckpointBody(0, [], signNote(formatCheckpoint({ origin: "other.test/log", size: 1, root: leafHash(Buffer.from("x")) }), [ed25519NoteSigner("other.test/log", key)])));
    assert.equal(other.status, 404);
    const badSig = forged(current.size).replace(/ [A-Za-z0-9+/]{10}/, (m) => ` ${m.slice(1, 5).split("").reverse().join("")}${m.slice(5)}`);
    const refused = await post(witness.url, addCheckpointBody(current.size, [], badSig));
    assert.ok([400, 403].includes(refused.status), `${refused.status} ${refused.text}`);
    // Nothing of it was recorded: the node's next honest checkpoint is still cosigned from where it was.
    await append(7, "b");
    await warden.log!.checkpoint();
    await warden.log!.witnessed();
    assert.equal(verifyCheckpoint((await warden.log!.latestCheckpoint()).note, policy()).size, current.size + 7);
  });

  it("a witness that is down never blocks the log; restarted on its state it refuses a rollback and catches up", async () => {
    const before = (await warden.log!.status()).witnesses[0]!.size;
    await witness.stop();
    await append(40, "c");
    const checkpoint = await warden.log!.checkpoint();
    await warden.log!.witnessed();
    const status = await warden.log!.status();
    assert.equal(status.checkpoint_size, checkpoint.size);
    assert.equal(status.witnesses[0]!.size, before);
    assert.equal(status.witnesses[0]!.behind, checkpoint.size - before);
    assert.ok(status.witnesses[0]!.last_error !== undefined);
    // The same port, the same state directory: a new process of the same witness.
    witness = await startWitness(path.join(root, "witness"), logVkey, port);
    const rollback = await post(witness.url, addCheckpointBody(0, [], signNote(formatCheckpoint({ origin: "warden.test/witnessed", size: 1, root: leafHash(Buffer.from("x")) }), [ed25519NoteSigner("warden.test/witnessed", await new EmbeddedKeyStore(path.join(root, "home", "keys")).active())])));
    assert.equal(rollback.status, 409);
    assert.equal(rollback.text, `${before}\n`, "the restarted witness remembers the size it cosigned");
    await warden.log!.catchUpWitnesses();
    const caught = await warden.log!.status();
    assert.equal(caught.witnesses[0]!.behind, 0);
    assert.equal(verifyCheckpoint((await warden.log!.latestCheckpoint()).note, policy()).size, checkpoint.size);
  });
});
