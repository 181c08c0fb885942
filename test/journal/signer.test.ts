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
import { SIGN_WORKER_URL, Signer } from "../../src/journal/signer.js";
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
    assert.equal(signer.signedInWorker, 200, "every signature came from the worker");
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
    assert.ok(signer.signedInWorker >= writers.length * cleanRunEvents().length);
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
