/**
 * Push with resume, end to end (G9): a client pushing a multi-MB bundle is SIGKILLed mid-upload;
 * pushing again sends exactly the bytes the node does not hold — counted by the client
 * (`bytesSent`) and by the node itself (`warden_delivery_bytes_received_total` in /metrics) — and
 * commits the same receipt a single clean push would. The same through the CLI: `warden push` is
 * killed after its first progress line, and a second `warden push --json` finishes the job.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { rmSync } from "node:fs";
import { join } from "node:path";
import { WardenClient, compileForPush } from "../../src/client/index.js";
import { cleanEnv, cliEntry, metricSum, removeHome, repo, startNode, type NodeProcess } from "../support/node.js";
import { writeRandomBundle } from "../client/bundle-gen.js";
import { tempDir } from "../support/temp.js";

const KiB = 1024;
const MiB = 1024 * KiB;
const child = join(repo, "test", "client", "children", "push-until-killed.ts");

interface ChildRun {
  readonly signal: NodeJS.Signals | null;
  readonly stdout: string;
}

function run(args: readonly string[], env: Record<string, string> = {}, killWhen?: (stdout: string) => boolean): Promise<ChildRun> {
  const proc = spawn(process.execPath, ["--import", "tsx", ...args], { cwd: repo, env: cleanEnv(env), stdio: ["ignore", "pipe", "pipe"] });
  let stdout = "";
  let stderr = "";
  proc.stdout.setEncoding("utf8").on("data", (s: string) => {
    stdout += s;
    if (killWhen?.(stdout) === true) proc.kill("SIGKILL");
  });
  proc.stderr.setEncoding("utf8").on("data", (s: string) => (stderr += s));
  return new Promise((done, fail) =>
    proc.once("close", (code, signal) => (code !== null && code !== 0 ? fail(new Error(`exit ${code}: ${stderr}`)) : done({ signal, stdout }))),
  );
}

describe("push resumes after the client is killed", () => {
  let node: NodeProcess;
  let client: WardenClient;
  const scratch = tempDir("push-resume");

  before(async () => {
    node = await startNode();
    client = new WardenClient({ url: node.url, token: node.token });
  });
  after(async () => {
    await node?.stop();
    removeHome(node);
    rmSync(scratch, { recursive: true, force: true });
  });

  async function received(): Promise<number> {
    return metricSum(await client.metrics(), "warden_delivery_bytes_received_total");
  }

  it("client SIGKILLed after 40 acknowledged chunks: the next push sends only the missing bytes", async () => {
    const dir = join(scratch, "big");
    writeRandomBundle(dir, 6, MiB); // 6 MiB in 64 KiB chunks: 96 chunks
    const total = 6 * MiB;
    const killed = await run([child, node.url, node.token, dir, "big", "r1", String(64 * KiB), "2", "40"]);
    assert.equal(killed.signal, "SIGKILL");
    assert.doesNotMatch(killed.stdout, /completed/);
    const acked = Number(/ack (\d+)\n$/.exec(killed.stdout)?.[1]);
    assert.equal(acked, 40 * 64 * KiB);

    // What the node holds now, by its own account (begin resumes the same stage: G9).
    const { manifest } = await compileForPush(dir, { bundleId: "big", revision: "r1" });
    const status = await client.beginStage(manifest);
    assert.ok(!("committed" in status), "nothing committed yet");
    const missing = status.missing.reduce((sum, m) => sum + m.byte_len - m.offset, 0);
    // At least every acknowledged byte is kept; a chunk in flight at the kill may have landed too.
    assert.ok(missing <= total - acked, `missing ${missing} > ${total - acked}`);
    assert.ok(missing >= total - acked - 2 * 64 * KiB, `missing ${missing}`);

    const before = await received();
    const resumed = await client.push(dir, { bundleId: "big", revision: "r1", chunkBytes: 64 * KiB });
    assert.equal(resumed.bytesSent, missing, "the client sent exactly the missing bytes");
    assert.equal(await received() - before, missing, "the node received exactly the missing bytes");
    assert.equal(resumed.alreadyCommitted, false);
    assert.equal(resumed.receipt.manifest_digest, manifest.manifest_digest);
    assert.equal(resumed.stageId, status.stage_id, "the same stage was resumed");

    const again = await client.push(dir, { bundleId: "big", revision: "r1" });
    assert.equal(again.alreadyCommitted, true);
    assert.equal(again.bytesSent, 0);
  });

  it("`warden push` SIGKILLed mid-upload: a second `warden push --json` resumes and commits", async () => {
    const dir = join(scratch, "cli-big");
    writeRandomBundle(dir, 4, MiB);
    const total = 4 * MiB;
    const env = { WARDEN_URL: node.url, WARDEN_TOKEN: node.token };
    // Plain progress lines (stdout is a pipe); killed at the first one past 0 %.
    const killed = await run([cliEntry, "push", dir, "--revision", "r1", "--chunk-bytes", String(16 * KiB), "--concurrency", "1"], env, (out) =>
      /uploaded .*\((?:[1-9]0)%\)/.test(out),
    );
    assert.equal(killed.signal, "SIGKILL", `push was not killed mid-upload: ${killed.stdout}`);
    assert.doesNotMatch(killed.stdout, /committed/);
    const before = await received();
    const second = await run([cliEntry, "push", dir, "--revision", "r1", "--json"], env);
    const result = JSON.parse(second.stdout) as { bytes_sent: number; already_committed: boolean; receipt: { bundle_id: string } };
    assert.equal(result.already_committed, false);
    assert.equal(result.receipt.bundle_id, "cli-big");
    assert.ok(result.bytes_sent > 0 && result.bytes_sent <= total * 0.9, `second push sent ${result.bytes_sent} of ${total}`);
    assert.equal(await received() - before, result.bytes_sent);
  });
});
