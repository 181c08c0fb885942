/**
 * A node stopped (SIGTERM, as Ctrl-C's SIGINT) while its agent runs waits out the grace period,
 * then kills the agent's process group: its run reads `unresolved`. The node must say, while it
 * waits, which runs it waits for and for how long, say what it killed, and record that kill as it
 * records an orphan's, so that `inspect` tells the operator the agent is gone and who stopped it.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { isAlive } from "../support/processes.js";
import { httpCall, type CliRun, type NodeProcess } from "../support/node.js";
import { operatorScene, waitFor, type OperatorScene } from "./operator-after-crash-support.js";

const TOKEN = "after-shutdown-operator-token-0123456789";

interface Inspected {
  report: {
    status: string;
    journal: { agent_process?: { pid: number; host: string } };
    agent_stopped?: { at: string; killed: number[]; by: { pid: number; host: string }; node_pid?: number; reason?: string }[];
  };
}

describe("operator after a shutdown: the node says what it waits for, and inspection says it killed the agent", { skip: process.platform !== "linux" }, () => {
  let scene: OperatorScene;
  let node: NodeProcess | undefined;
  const start = (): Promise<NodeProcess> => scene.start();
  const warden = (args: readonly string[]): Promise<CliRun> => scene.warden(args);

  before(() => {
    scene = operatorScene("after-shutdown-inspect", TOKEN);
    writeFileSync(join(scene.home, "warden.json"), JSON.stringify({ shutdownGraceS: 1 }), { mode: 0o600 });
  });
  after(async () => {
    await node?.kill();
    scene.remove();
  });

  it("prints the runs it waits for and the grace, then the kill, and inspect names this node as the one that stopped the agent", async () => {
    node = await start();
    const id = randomUUID();
    const started = await httpCall(node.url, TOKEN, "POST", "/v1/invocations", { headers: { "idempotency-key": id }, body: { provider: "claude", prompt: "#hang" } });
    assert.equal(started.status, 202);
    const runId = (started.body as { run_id: string }).run_id;
    const agentPid = await waitFor("the agent's pid in the journal", async () => {
      const seen = await httpCall(node!.url, TOKEN, "GET", `/v1/invocations/api:operator/${id}/inspection`);
      return (seen.body as unknown as Inspected).report?.journal.agent_process?.pid;
    });
    assert.ok(isAlive(agentPid));
    const nodePid = node.child.pid!;

    assert.equal(await node.stop(), 0);
    const said = node.stderr();
    assert.match(said, new RegExp(`^warden: waiting up to 1 s for 1 running agent to finish: run ${runId} \\(api:operator ${id}\\); then it is killed`, "m"));
    assert.match(said, new RegExp(`^warden: the grace ran out: killed the agent of run ${runId} \\(pid ${agentPid}\\); its run reads unresolved .*says this node stopped it`, "m"));
    assert.ok(!isAlive(agentPid), "the agent is gone");

    node = await start();
    const json = await warden(["inspect", "api:operator", id, "--json"]);
    assert.equal(json.code, 0, json.stderr);
    const inspected = JSON.parse(json.stdout) as Inspected;
    assert.equal(inspected.report.status, "unresolved");
    const stops = inspected.report.agent_stopped ?? [];
    assert.equal(stops.length, 1, JSON.stringify(inspected.report));
    assert.deepEqual(stops[0]!.killed, [agentPid]);
    assert.equal(stops[0]!.by.pid, nodePid);
    assert.equal(stops[0]!.node_pid, nodePid);
    assert.equal(stops[0]!.reason, "shutdown");
    const text = await warden(["inspect", "api:operator", id]);
    const line = text.stdout.split("\n").map((l) => l.trim()).find((l) => l.startsWith("agent stopped"));
    assert.ok(line !== undefined, text.stdout);
    assert.match(line, new RegExp(`killed .*\\(pid ${agentPid}\\) by the node that ran it \\(pid ${nodePid} on .*\\), at its shutdown`));
    assert.doesNotMatch(text.stdout, /no node recorded stopping it/);
  });
});
