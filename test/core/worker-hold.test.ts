/**
 * Worker threads hold their process open exactly while they owe an answer (src/core/worker-hold.ts):
 * a process whose worker was started and owes nothing exits by itself, whatever order the worker's
 * listeners were attached in, and one waiting for an answer does not exit before it: the hold
 * itself, then the signer's, the run checker's and the embedded claim store's workers. Each case is
 * a fresh `node` on the compiled code, as the CLI and the server run it (workers start by default;
 * from TypeScript source they would not).
 */
import { after, describe, it } from "node:test";
import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { createPublicKey, generateKeyPairSync, verify } from "node:crypto";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { checkRun } from "../../src/invocations/run-check.js";
import { repo } from "../support/node.js";
import { runToExit } from "../support/run-to-exit.js";
import { tempDir } from "../support/temp.js";

const DIST = join(repo, "dist", "src");
const NEEDS_BUILD = { skip: !existsSync(join(DIST, "core", "worker-hold.js")) && "needs `npm run build`" };
const scratch = tempDir("worker-hold", (remove) => after(remove));
const dist = (module: string): string => JSON.stringify(pathToFileURL(join(DIST, module)).href);

/** A worker that answers every message with the message. */
const ECHO = `const { parentPort } = require("node:worker_threads"); parentPort.on("message", (m) => parentPort.postMessage(m));`;

/** A child whose `worker` echoes and is held by `hold`, then runs `body`. */
function withHeldWorker(body: string): string {
  return `import { Worker } from "node:worker_threads";
    const { WorkerHold } = await import(${dist("core/worker-hold.js")});
    const worker = new Worker(${JSON.stringify(ECHO)}, { eval: true });
    const hold = new WorkerHold(worker);
    ${body}`;
}

describe("a worker held only while it owes an answer", NEEDS_BUILD, () => {
  it("lets its process exit when it owes nothing, though a message listener was attached after the hold", async () => {
    const run = await runToExit(
      scratch,
      withHeldWorker(`
        worker.on("message", () => undefined);
        console.log(JSON.stringify({ owed: hold.owed }));`),
      "a worker owing nothing",
    );
    assert.equal(run.code, 0, run.stderr);
    assert.deepEqual(run.line, { owed: 0 });
  });

  it("lets it exit after its message listeners were removed and attached again, once ones too", async () => {
    const run = await runToExit(
      scratch,
      withHeldWorker(`
        const listener = () => undefined;
        worker.on("message", listener);
        worker.off("message", listener);
        worker.once("message", () => undefined);
        worker.removeAllListeners("message");
        worker.on("message", listener);
        console.log(JSON.stringify({ owed: hold.owed }));`),
      "a worker owing nothing",
    );
    assert.equal(run.code, 0, run.stderr);
    assert.deepEqual(run.line, { owed: 0 });
  });

  it("leaves the process to wait for the worker it terminates, idle or not", async () => {
    // terminate() refs the worker until it stopped: the hold must not undo that.
    const run = await runToExit(
      scratch,
      withHeldWorker(`
        worker.on("message", () => undefined);
        hold.owe();
        hold.clear();
        const stopped = worker.terminate();
        worker.once("exit", () => undefined);
        stopped.then((code) => console.log(JSON.stringify({ stopped: typeof code === "number", owed: hold.owed })));`),
      "a terminated worker",
    );
    assert.equal(run.code, 0, run.stderr);
    assert.deepEqual(run.line, { stopped: true, owed: 0 }, "the process exited before its worker stopped");
  });

  it("keeps its process up until each answer owed arrived, listener attached last, then lets it exit", async () => {
    const run = await runToExit(
      scratch,
      withHeldWorker(`
        const answers = [];
        hold.owe(2);
        worker.postMessage(1);
        worker.postMessage(2);
        worker.on("message", (m) => {
          hold.paid();
          answers.push(m);
          if (answers.length === 2) console.log(JSON.stringify({ answers, owed: hold.owed }));
        });`),
      "a worker whose answers were all paid",
    );
    assert.equal(run.code, 0, run.stderr);
    assert.deepEqual(run.line, { answers: [1, 2], owed: 0 }, "the process exited before the worker's answers came back");
  });
});

describe("the signer's worker", NEEDS_BUILD, () => {
  it("keeps a process up until its signatures come back, then lets it exit", async () => {
    const { privateKey, publicKey } = generateKeyPairSync("ed25519");
    const pkcs8 = privateKey.export({ format: "der", type: "pkcs8" }).toString("hex");
    // More lines in one turn than are signed inline, so that some go to the worker; nothing but
    // the worker keeps the process alive while they are out (no await, no timer).
    const run = await runToExit(
      scratch,
      `import { createPrivateKey } from "node:crypto";
       const { Signer, INLINE_PER_TURN } = await import(${dist("journal/signer.js")});
       const key = createPrivateKey({ key: Buffer.from(${JSON.stringify(pkcs8)}, "hex"), format: "der", type: "pkcs8" });
       const signer = new Signer();
       const lines = Array.from({ length: INLINE_PER_TURN + 4 }, (_, i) => Buffer.from("line " + i));
       Promise.all(lines.map((line) => signer.sign(key, line))).then((signatures) =>
         console.log(JSON.stringify({
           inWorker: signer.signedInWorker,
           signatures: signatures.map((s) => Buffer.from(s).toString("hex")),
         })));`,
      "the signer's worker, owing nothing",
    );
    assert.equal(run.code, 0, run.stderr);
    assert.ok(run.line !== undefined, "the process exited before the signer's worker answered");
    const { inWorker, signatures } = run.line as { inWorker: number; signatures: string[] };
    assert.ok(inWorker > 0, "no line was signed by the worker: this would not show it holding the process");
    const key = createPublicKey(publicKey.export({ format: "pem", type: "spki" }));
    signatures.forEach((hex, i) => assert.ok(verify(null, Buffer.from(`line ${i}`), key, Buffer.from(hex, "hex")), `signature ${i}`));
  });
});

describe("the run checker's workers", NEEDS_BUILD, () => {
  const inline = JSON.parse(JSON.stringify(checkRun(new Uint8Array(), [], {}))) as unknown;

  it("let a process exit once its checks are done, the pool's idle worker included", async () => {
    // Two checks at once start two workers; the third goes to one of them, and the other owes
    // nothing from then on.
    const run = await runToExit(
      scratch,
      `const { RunChecker } = await import(${dist("invocations/run-checker.js")});
       const checker = new RunChecker({ workers: 2 });
       await Promise.all([checker.check(new Uint8Array(), [], {}), checker.check(new Uint8Array(), [], {})]);
       const check = await checker.check(new Uint8Array(), [], {});
       console.log(JSON.stringify({ workers: checker.workers, inline: checker.inline, check }));`,
      "a run checker's worker owing no check",
    );
    assert.equal(run.code, 0, run.stderr);
    assert.deepEqual(run.line, { workers: 2, inline: false, check: inline });
  });

  it("keep a process up until a check's answer comes back", async () => {
    const run = await runToExit(
      scratch,
      `const { RunChecker } = await import(${dist("invocations/run-checker.js")});
       const checker = new RunChecker({ workers: 1 });
       checker.check(new Uint8Array(), [], {}).then((check) => console.log(JSON.stringify({ inline: checker.inline, check })));`,
      "a run checker's worker whose check was answered",
    );
    assert.equal(run.code, 0, run.stderr);
    assert.deepEqual(run.line, { inline: false, check: inline }, "the process exited before the run checker's worker answered");
  });
});

describe("the embedded claim store's write worker", NEEDS_BUILD, () => {
  it("keeps a process up while a burst of writes is out on it, then lets it exit without a close", async () => {
    // A burst: all but the first write of the turn go to the worker; the top-level await is all
    // that waits for them, so a worker not held while it owes would end the process (exit 13).
    const home = join(tempDir("worker-hold-home", (remove) => after(remove)), "home");
    const run = await runToExit(
      scratch,
      `import { randomUUID } from "node:crypto";
       const { openEmbeddedBackend } = await import(${dist("backends/embedded/index.js")});
       const { Invocations } = await import(${dist("invocations/index.js")});
       const backend = await openEmbeddedBackend({ home: ${JSON.stringify(home)} });
       const invocations = new Invocations({ claims: backend.claims, journals: backend.journals, keys: backend.keys, limits: backend.limits });
       const runs = await Promise.all(Array.from({ length: 16 }, () => invocations.run("s", randomUUID(), { n: 1 }, "agent", () => ({ ok: true }))));
       const claims = backend.claims;
       console.log(JSON.stringify({
         offThread: claims.writesOffThread,
         recorded: runs.filter((r) => r.status === "recorded").length,
         onWorker: claims.commits > claims.inlineWrites,
       }));`,
      "the claim store's write worker, owing nothing",
    );
    assert.equal(run.code, 0, run.stderr);
    assert.deepEqual(run.line, { offThread: true, recorded: 16, onWorker: true }, "the writes did not all come back from the worker");
  });
});
