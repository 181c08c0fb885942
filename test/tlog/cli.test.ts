/**
 * The auditor's commands, in-process against a real node on loopback: `journal verify --policy`
 * (online, and offline with --proof), `log verify` on consistent and forked checkpoints.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import * as fs from "node:fs";
import * as path from "node:path";
import type { AddressInfo } from "node:net";
import { EmbeddedKeyStore } from "../../src/backends/embedded/journal/key-store.js";
import type { JournalEvent } from "../../src/journal/types.js";
import { formatCheckpoint, parseCheckpointText } from "../../src/tlog/checkpoint.js";
import { leafHash } from "../../src/tlog/merkle.js";
import { ed25519NoteSigner, parseNote, signNote } from "../../src/tlog/note.js";
import { buildLines, entryOf } from "../journal/helpers.js";
import { OBSERVER, OBSERVER_TOKEN, OPERATOR, json, openTestNode, type TestNode } from "../support/app-node.js";
import { tempDir } from "../support/temp.js";
import { READY_MS, waitFor } from "../support/wait.js";
import { wardenInProcess } from "../support/cli.js";

describe("warden journal verify --policy, warden log verify", () => {
  let root: string;
  let node: TestNode;
  let url: string;
  before(async () => {
    root = tempDir("tlog-cli");
    node = await openTestNode(root, { warden: { log: { origin: "warden.test/cli", checkpointIntervalMs: 10 } } });
    await node.app.listen({ host: "127.0.0.1", port: 0 });
    url = `http://127.0.0.1:${(node.app.server.address() as AddressInfo).port}`;
  });
  after(async () => {
    await node.close();
    fs.rmSync(root, { recursive: true, force: true });
  });

  async function cli(...argv: string[]): Promise<{ code: number | null; out: string; err: string }> {
    const run = await wardenInProcess(argv, { env: { WARDEN_URL: url, WARDEN_TOKEN: OBSERVER_TOKEN }, cwd: root });
    return { code: run.code, out: run.stdout, err: run.stderr };
  }
  const get = (u: string) => node.app.inject({ url: u, headers: OBSERVER });
  async function recordedRun(): Promise<string> {
    const key = randomUUID();
    await node.app.inject({ method: "POST", url: "/v1/invocations", headers: { ...OPERATOR, "idempotency-key": key }, payload: { provider: "claude", prompt: "audited" } });
    const runId = await waitFor(`run ${key} to be recorded`, async () => {
      const view = json((await get(`/v1/invocations/api:alice/${key}`)).payload);
      return view.status === "recorded" ? (view.run_id as string) : undefined;
    }, READY_MS, 25);
    await waitFor(`the seal of run ${runId} in the log`, async () => ((await get(`/v1/log/runs/${runId}`)).statusCode === 200 ? true : undefined), READY_MS, 10);
    return runId;
  }
  const write = (name: string, content: string | Buffer): string => {
    fs.writeFileSync(path.join(root, name), content);
    return name;
  };

  it("a logged run passes; its journal rewritten and re-signed with the node's key does not", async () => {
    const runId = await recordedRun();
    const vkey = json((await get("/v1/log")).payload).vkey as string;
    const policy = write("policy.txt", `log ${vkey}\nquorum none\n`);
    const online = await cli("journal", "verify", runId, "--policy", policy);
    assert.equal(online.code, 0, online.out + online.err);
    assert.match(online.out, new RegExp(`LOGGED run ${runId}: leaf \\d+ of warden.test/cli at size \\d+, cosigned by no witness`));

    const proof = write("proof.json", (await get(`/v1/log/runs/${runId}`)).payload);
    const original = (await get(`/v1/runs/${runId}/journal`)).rawPayload;
    const key = await new EmbeddedKeyStore(path.join(node.home, "keys")).active();
    const events = original.toString("utf8").trimEnd().split("\n").map((l) => entryOf(Buffer.from(l)).event) as JournalEvent[];
    const rewritten = Buffer.concat(buildLines(events.map((e) => (e.type === "run.started" ? ({ ...e, provider: "kimi" } as JournalEvent) : e)), key, { runId }));
    const offline = await cli("journal", "verify", write("rewritten.ndjson", rewritten), "--home", node.home, "--policy", policy, "--proof", proof);
    assert.equal(offline.code, 1, offline.out + offline.err);
    assert.match(offline.out, /^OK /m, "its signatures verify with the node's key");
    assert.match(offline.out, new RegExp(`NOT LOGGED run ${runId}: log-seal-mismatch`));
    const kept = await cli("journal", "verify", write("original.ndjson", original), "--home", node.home, "--policy", policy, "--proof", proof);
    assert.equal(kept.code, 0, kept.out + kept.err);
  });

  it("log verify: OK for a prefix, INCONSISTENT for a fork signed with the node's own key", async () => {
    const vkey = json((await get("/v1/log")).payload).vkey as string;
    const old = write("old.txt", (await get("/v1/log/checkpoint")).payload);
    await recordedRun();
    const latest = (await get("/v1/log/checkpoint")).payload;
    const next = write("new.txt", latest);
    const ok = await cli("log", "verify", old, next, "--vkey", vkey);
    assert.equal(ok.code, 0, ok.out + ok.err);
    assert.match(ok.out, /^OK warden\.test\/cli: the tree of size \d+ is a prefix of the tree of size \d+/);
    const cp = parseCheckpointText(parseNote(latest).text);
    const key = await new EmbeddedKeyStore(path.join(node.home, "keys")).active();
    const forked = write("forked.txt", signNote(formatCheckpoint({ origin: cp.origin, size: cp.size, root: leafHash(Buffer.from("fork")) }), [ed25519NoteSigner(cp.origin, key)]));
    const fork = await cli("log", "verify", next, forked, "--vkey", vkey);
    assert.equal(fork.code, 1);
    assert.match(fork.out, /^INCONSISTENT: two different trees of size/);
    const dropped = await cli("log", "verify", old, forked, "--vkey", vkey);
    assert.equal(dropped.code, 1);
    assert.match(dropped.out, /^INCONSISTENT: the tree of size \d+ is not a prefix/);
  });
});
