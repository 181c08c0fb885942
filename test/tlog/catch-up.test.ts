/**
 * No leaf lost to a crash: a node killed (SIGKILL) after a fact is durable where it is kept (a
 * run's result, a reconciliation receipt, a bundle commit, a signature added later) and before
 * its statement is in the log has it logged at its next start, with a verifying inclusion proof,
 * and `warden journal verify --policy` passes for the run.
 */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import * as fs from "node:fs";
import * as path from "node:path";
import type { AddressInfo } from "node:net";
import { fileURLToPath } from "node:url";
import Database from "better-sqlite3";
import { EmbeddedLogStore, LOG_DATABASE } from "../../src/backends/embedded/log/log-store.js";
import { parseCheckpointText } from "../../src/tlog/checkpoint.js";
import { leafHash, verifyInclusion } from "../../src/tlog/merkle.js";
import { parseNote } from "../../src/tlog/note.js";
import { parseHashes } from "../../src/tlog/verify.js";
import { openWarden } from "../../src/warden/facade.js";
import { uniqueBundle } from "../backends/harness.js";
import { uploadMissing } from "../delivery/store-harness.js";
import { entryLeaves } from "./entries.js";
import { makeKey } from "../signing/ssh-fixtures.js";
import { OBSERVER, OBSERVER_TOKEN, json, openTestNode } from "../support/app-node.js";
import { tempDir } from "../support/temp.js";
import { bundledScript } from "../support/bundle.js";
import { wardenInProcess } from "../support/cli.js";

const CHILD = fileURLToPath(new URL("../fixtures/tlog/kill-before-append.ts", import.meta.url));
const ORIGIN = "warden.test/catch-up";

/** Runs the child in `mode` on `home`; resolves with its first line's words once the kill ended it. */
async function killedDoing(home: string, mode: string, keyFile: string): Promise<string[]> {
  // Bundled for plain node: through tsx each child spent about 2 s of CPU loading a whole node.
  const child = spawn(process.execPath, [await bundledScript(CHILD), home, mode, keyFile], { stdio: ["ignore", "pipe", "pipe"] });
  let out = "";
  let err = "";
  child.stdout.on("data", (d: Buffer) => (out += d.toString()));
  child.stderr.on("data", (d: Buffer) => (err += d.toString()));
  const signal = await new Promise<NodeJS.Signals | null>((resolve) => child.once("exit", (_code, s) => resolve(s)));
  assert.equal(signal, "SIGKILL", `the ${mode} child was not killed at its append: ${out}${err}`);
  const words = out.split("\n")[0]!.split(" ");
  assert.equal(words[0], mode, out);
  return words.slice(1);
}

async function logged(home: string, key: string): Promise<boolean> {
  const store = new EmbeddedLogStore(path.join(home, LOG_DATABASE));
  try {
    return (await store.indexOf(key)) !== undefined;
  } finally {
    await store.close();
  }
}

describe("transparency log catch-up after kill -9", () => {
  it("a seal, a receipt, a commit and a later signature killed before their leaf are logged at the next start", async () => {
    const root = tempDir("tlog-catch-up");
    const home = path.join(root, "home");
    const keys = tempDir("sign");
    const signer = makeKey(keys, "signer", "ed25519");
    try {
      // Each kill is checked right away: the fact's leaf is missing (the next child's start would add it).
      const [, runId] = (await killedDoing(home, "run", signer.path)) as [string, string];
      assert.equal(await logged(home, `run:${runId}`), false, "killed before the seal's leaf");
      const [, cutRun] = (await killedDoing(home, "reconcile", signer.path)) as [string, string];
      assert.equal(await logged(home, `reconciled:${cutRun}`), false, "killed before the receipt's leaf");
      const [bundle, revision] = (await killedDoing(home, "commit", signer.path)) as [string, string];
      assert.equal(await logged(home, `bundle:${bundle}@${revision}`), false, "killed before the commit's leaf");
      const [signed, signedRevision] = (await killedDoing(home, "sign", signer.path)) as [string, string];
      assert.equal(await logged(home, `bundle:${signed}@${signedRevision}`), true, "the signed revision's commit was logged");
      assert.equal(await logged(home, `signed:${signed}@${signedRevision}/${signer.fingerprint}`), false, "killed before the signature's leaf");

      const node = await openTestNode(root, { warden: { log: { origin: ORIGIN, checkpointIntervalMs: 10 } } });
      try {
        await node.app.listen({ host: "127.0.0.1", port: 0 });
        const url = `http://127.0.0.1:${(node.app.server.address() as AddressInfo).port}`;
        const get = (u: string) => node.app.inject({ url: u, headers: OBSERVER });
        const { size, vkey } = json((await get("/v1/log")).payload) as { size: number; vkey: string };
        const note = (await node.warden.log!.checkpoint()).note;
        const checkpoint = parseCheckpointText(parseNote(note).text);
        assert.equal(checkpoint.size, size, "the start signed a checkpoint covering what it caught up on");
        // Every leaf, read from the entry bundles as a monitor does, with its inclusion proof.
        const leaves: string[] = [];
        for (let tile = 0; tile * 256 < size; tile++) {
          const width = Math.min(256, size - tile * 256);
          const bundleBytes = (await get(`/v1/log/tile/entries/${String(tile).padStart(3, "0")}${width === 256 ? "" : `.p/${width}`}`)).rawPayload;
          leaves.push(...entryLeaves(bundleBytes).map((leaf) => leaf.toString("utf8")));
        }
        const find = (match: (s: Record<string, unknown>) => boolean): number => leaves.findIndex((l) => match(JSON.parse(l) as Record<string, unknown>));
        const indexes = {
          seal: find((s) => s.type === "run.sealed" && s.run_id === runId),
          receipt: find((s) => s.type === "run.reconciled" && s.run_id === cutRun && s.operator === "alice"),
          commit: find((s) => s.type === "bundle.committed" && s.bundle_id === bundle && s.revision === revision),
          signature: find((s) => s.type === "bundle.signed" && s.bundle_id === signed && s.fingerprint === signer.fingerprint),
        };
        for (const [what, index] of Object.entries(indexes)) {
          assert.ok(index >= 0, `the ${what} is logged after the restart`);
          const proof = json((await get(`/v1/log/proof/inclusion/${index}/${size}`)).payload) as { proof: string[] };
          assert.ok(verifyInclusion(index, size, leafHash(Buffer.from(leaves[index]!)), parseHashes(proof.proof), checkpoint.root), `the ${what}'s inclusion proof`);
        }
        // The auditor's check of the run, online against the restarted node.
        fs.writeFileSync(path.join(root, "policy.txt"), `log ${vkey}\nquorum none\n`);
        const { code, stdout: out, stderr: err } = await wardenInProcess(["journal", "verify", runId, "--policy", "policy.txt"], { env: { WARDEN_URL: url, WARDEN_TOKEN: OBSERVER_TOKEN }, cwd: root });
        assert.equal(code, 0, `${out}${err}`);
        assert.match(out, new RegExp(`LOGGED run ${runId}: leaf ${indexes.seal} of ${ORIGIN}`));
      } finally {
        await node.close();
      }
    } finally {
      fs.rmSync(root, { recursive: true, force: true });
      fs.rmSync(keys, { recursive: true, force: true });
    }
  });

  it("a record it cannot read does not stop the start: counted, and the watermark stays for the next start", async () => {
    const root = tempDir("tlog-catch-up-damaged");
    const home = path.join(root, "home");
    try {
      const first = await openWarden({ home, log: { origin: ORIGIN } });
      const built = uniqueBundle([500]);
      const begun = await first.beginStage(built.manifest);
      await uploadMissing(first, begun, built.blobs);
      await first.commitStage(begun.stage_id);
      const watermark = await first.log!.watermark();
      await first.close();
      // A bad disk or a hand edit: the commit's stored manifest no longer parses.
      const db = new Database(path.join(home, "delivery", "catalog.sqlite"));
      db.prepare("UPDATE commits SET manifest = '{' WHERE bundle_id = ?").run(built.manifest.bundle_id);
      db.close();
      const second = await openWarden({ home, log: { origin: ORIGIN } });
      try {
        assert.equal(second.logFailures, 1, "the catch-up's failure is counted");
        assert.equal(await second.log!.watermark(), watermark, "not raised past what could not be checked");
      } finally {
        await second.close();
      }
    } finally {
      fs.rmSync(root, { recursive: true, force: true });
    }
  });
});
