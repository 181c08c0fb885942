/**
 * `warden journal verify` of a journal that holds no run: an empty file (a run whose node died
 * before its first line reached the disk, or a journal emptied since). Nothing in it proves what a
 * run did, and DESIGN counts "seq 0 is not run.started" among what requires reconciliation; it used
 * to print `OK … 0 entries verified` and exit 0, which a script reads as a pass. Every other outcome
 * stays as it was: a crashed run's journal that verifies is still `OK` with its reconciliation
 * reasons, exit 0.
 */
import { after, describe, it } from "node:test";
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { copyFileSync, mkdirSync, readFileSync, readdirSync, rmSync, truncateSync } from "node:fs";
import { join } from "node:path";
import { httpCall, warden, type NodeProcess } from "../support/node.js";
import { startClaudeNode, waitFor } from "./operator-after-crash-support.js";
import { tempDir } from "../support/temp.js";

const TOKEN = "after-crash-verify-token-0123456789abcd";

describe("operator after a crash: verifying a journal with no run in it is not a pass", () => {
  const root = tempDir("after-crash-verify");
  const home = join(root, "home");
  let node: NodeProcess | undefined;
  const start = (): Promise<NodeProcess> => startClaudeNode(home, TOKEN);

  after(async () => {
    await node?.kill();
    rmSync(root, { recursive: true, force: true });
  });

  it("an emptied journal exits 1 without OK, by file and by run id; a crashed run's journal is still OK with its reasons", async () => {
    mkdirSync(home, { mode: 0o700 });
    node = await start();
    const id = randomUUID();
    const started = await httpCall(node.url, TOKEN, "POST", "/v1/invocations", { headers: { "idempotency-key": id }, body: { provider: "claude", prompt: "#hang" } });
    assert.equal(started.status, 202);
    const runId = started.body.run_id as string;
    await waitFor("the agent's launch in the journal", async () => {
      const seen = await httpCall(node!.url, TOKEN, "GET", `/v1/invocations/api:operator/${id}/inspection`);
      return (seen.body.report as { journal?: { agent_process?: unknown } } | undefined)?.journal?.agent_process !== undefined ? true : undefined;
    });
    await node.kill();
    node = undefined;

    const journals = join(home, "journals");
    const name = readdirSync(journals).find((n) => n.includes(runId));
    assert.ok(name !== undefined, `the run's journal is under ${journals}`);
    const crashed = join(root, "crashed.journal");
    copyFileSync(join(journals, name), crashed);
    const empty = join(root, "empty.journal");
    copyFileSync(crashed, empty);
    truncateSync(empty, 0);

    // Unchanged: a crashed run's journal verifies and says why it needs an operator.
    const ok = await warden(["journal", "verify", crashed, "--home", home]);
    assert.equal(ok.code, 0, ok.stderr);
    // Every line the node wrote before the kill: three, or four when it journaled the agent's
    // session (its first output line) before it was killed.
    const entries = readFileSync(crashed, "utf8").split("\n").filter((l) => l !== "").length;
    assert.ok(entries >= 3, `run.started, the agent's effect.started and its process note at least: ${entries}`);
    assert.match(ok.stdout, new RegExp(`^OK .*: ${entries} entries verified`));
    assert.match(ok.stdout, /requires reconciliation: not-terminated, effect-not-finished \(process\)/);

    const text = await warden(["journal", "verify", empty, "--home", home]);
    assert.equal(text.code, 1, `an empty journal is not a pass: ${text.stdout}`);
    assert.doesNotMatch(text.stdout, /^OK/m);
    assert.match(text.stdout, /^NO RUN .*empty\.journal: 0 entries verified/);
    assert.match(text.stdout, /requires reconciliation: no-run-started/);

    const json = await warden(["journal", "verify", empty, "--home", home, "--json"]);
    assert.equal(json.code, 1);
    const report = JSON.parse(json.stdout) as { ok: boolean; entries: number; requires_reconciliation: boolean; reasons: { reason: string }[] };
    // DESIGN's report: no entry failed verification, and the run requires reconciliation.
    assert.equal(report.ok, true);
    assert.equal(report.entries, 0);
    assert.equal(report.requires_reconciliation, true);
    assert.ok(report.reasons.some((r) => r.reason === "no-run-started"));

    // The node's own copy emptied (its first line never reached the disk): by run id, the same.
    truncateSync(join(journals, name), 0);
    node = await start();
    const byId = await warden(["journal", "verify", runId], { env: { WARDEN_HOME: home, WARDEN_TOKEN: TOKEN } });
    assert.equal(byId.code, 1, byId.stdout + byId.stderr);
    assert.match(byId.stdout, new RegExp(`^NO RUN ${runId}: 0 entries verified`), byId.stderr);
  });
});
