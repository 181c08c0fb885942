/**
 * The signing worker: its signatures are the inline ones (Ed25519 is deterministic), batches of
 * concurrent requests all come back to their callers, a journal signed through it verifies, and a
 * worker that dies or never starts costs nothing but speed (lines are signed inline).
 */
import { after, describe, it } from "node:test";
import assert from "node:assert/strict";
import { createPrivateKey, randomBytes, randomUUID, sign } from "node:crypto";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { Worker } from "node:worker_threads";
import { EmbeddedJournalStore } from "../../src/backends/embedded/journal/journal-store.js";
import { generateSigningKey } from "../../src/journal/keys.js";
import { INLINE_PER_TURN, SIGN_WORKER_URL, Signer } from "../../src/journal/signer.js";
import type { SigningKey } from "../../src/journal/types.js";
import { verifyJournal } from "../../src/journal/verify.js";
import { JournalWriter } from "../../src/journal/writer.js";
import { tsWorker } from "../invocations/fixtures/ts-worker.js";
import { cleanRunEvents, recordOf } from "./helpers.js";
import { tempDir } from "../support/temp.js";

const { key, privatePkcs8 } = generateSigningKey();
const privateKey = createPrivateKey({ key: Buffer.from(privatePkcs8), format: "der", type: "pkcs8" });

/** The node key, signing through `signer`. */
function keyVia(signer: Signer): SigningKey {
  return { ...key, signAsync: (message) => signer.sign(privateKey, message) };
}

describe("the signing worker", () => {
  const dir = tempDir("journal-signer", (fn) => after(fn));

  it("signs concurrent requests in batches, each exactly as inline signing would", async () => {
    const signer = new Signer({ spawn: () => tsWorker(SIGN_WORKER_URL) });
    after(() => signer.close());
    const messages = Array.from({ length: 200 }, (_, i) => randomBytes(1 + (i % 300)));
    const first = await Promise.all(messages.slice(0, 50).map((m) => signer.sign(privateKey, m)));
    const rest = await Promise.all(messages.slice(50).map((m) => signer.sign(privateKey, m)));
    [...first, ...rest].forEach((signature, i) => {
      assert.deepEqual(Buffer.from(signature), sign(null, messages[i]!, privateKey), `signature ${i}`);
    });
    assert.equal(signer.signedInWorker + signer.signedInline, 200);
    // Each burst found the worker idle: its first few lines were signed inline, the rest in the worker.
    assert.ok(signer.signedInline <= 2 * INLINE_PER_TURN, `${signer.signedInline} signed inline`);
    assert.ok(signer.signedInWorker >= 200 - 2 * INLINE_PER_TURN, `${signer.signedInWorker} signed in the worker`);
  });

  it("a lone caller's lines are signed inline while the worker is idle: no thread hand-off to wait for", async () => {
    const signer = new Signer({ spawn: () => tsWorker(SIGN_WORKER_URL) });
    after(() => signer.close());
    const message = randomBytes(120);
    // One caller, one line at a time, each in a turn of its own (as a single run's lines are).
    for (let i = 0; i < 10; i++) {
      assert.deepEqual(Buffer.from(await signer.sign(privateKey, message)), sign(null, message, privateKey));
      await new Promise((resolve) => setImmediate(resolve));
    }
    assert.equal(signer.signedInWorker, 0, "no line of a lone caller waited for the worker");
    assert.equal(signer.signedInline, 10);
    // A burst in one turn: the first INLINE_PER_TURN inline, the rest batched to the worker.
    const burst = Array.from({ length: 3 * INLINE_PER_TURN }, (_, i) => randomBytes(10 + i));
    const signatures = await Promise.all(burst.map((m) => signer.sign(privateKey, m)));
    signatures.forEach((s, i) => assert.deepEqual(Buffer.from(s), sign(null, burst[i]!, privateKey), `burst signature ${i}`));
    assert.equal(signer.signedInline, 10 + INLINE_PER_TURN);
    assert.equal(signer.signedInWorker, 2 * INLINE_PER_TURN);
  });

  it("a journal written through it verifies", async () => {
    const signer = new Signer({ spawn: () => tsWorker(SIGN_WORKER_URL) });
    after(() => signer.close());
    const store = new EmbeddedJournalStore(join(dir, "journals"));
    const writers = await Promise.all(Array.from({ length: 6 }, () => JournalWriter.create({ store, key: keyVia(signer), runId: randomUUID() })));
    await Promise.all(writers.map(async (w) => {
      // Pipelined: every append issued before the first resolves; the chain still follows call order.
      await Promise.all(cleanRunEvents().map((event) => w.append(event)));
      await w.close();
    }));
    for (const w of writers) {
      const report = verifyJournal(readFileSync(store.pathOf(w.runId)), [recordOf(key)], { runId: w.runId });
      assert.equal(report.ok, true, JSON.stringify(report.first_error));
      assert.equal(report.entries, cleanRunEvents().length);
    }
    assert.ok(signer.signedInWorker + signer.signedInline >= writers.length * cleanRunEvents().length);
    assert.ok(signer.signedInWorker > 0, "six concurrent writers kept the worker busy");
  });

  it("a worker that exits, or cannot start, leaves signing inline with the same signatures", async () => {
    const dying = new Signer({ spawn: () => new Worker("process.exit(3)", { eval: true }) });
    after(() => dying.close());
    const message = randomBytes(64);
    const signatures = await Promise.all(Array.from({ length: 5 }, () => dying.sign(privateKey, message)));
    for (const s of signatures) assert.deepEqual(Buffer.from(s), sign(null, message, privateKey));
    assert.equal(dying.signedInWorker, 0);
    assert.deepEqual(Buffer.from(await dying.sign(privateKey, message)), sign(null, message, privateKey));

    const failing = new Signer({
      spawn: () => {
        throw new Error("no threads here");
      },
    });
    assert.deepEqual(Buffer.from(await failing.sign(privateKey, message)), sign(null, message, privateKey));
    const inline = new Signer({ spawn: undefined });
    assert.deepEqual(Buffer.from(await inline.sign(privateKey, message)), sign(null, message, privateKey));
  });
});
