/**
 * After `kill -9` of a node mid-run, the next node on its home kills the agent the dead node left
 * running (runner/orphans.ts). An operator about to reconcile that run with `effects_stopped: true`
 * asks `warden inspect` whether the agent is gone: the journal ends with the dead node, so it names
 * the agent's pid and nothing more. The inspection must say that the agent's processes were killed,
 * when and by which node, and still say so after another restart.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { existsSync, readFileSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { isAlive } from "../support/processes.js";
import { httpCall, type CliRun, type NodeProcess } from "../support/node.js";
import { operatorScene, waitFor, type OperatorScene } from "./operator-after-crash-support.js";

const TOKEN = "after-crash-operator-token-0123456789ab";

interface Inspected {
  report: {
    status: string;
    journal: { agent_process?: { pid: number; host: string } };
    agent_stopped?: { at: string; killed: number[]; by: { pid: number; host: string }; node_pid?: number }[];
  };
}

describe("operator after a crash: inspection says the orphaned agent was killed, and by whom", { skip: process.platform !== "linux" && "needs /proc" }, () => {
  let scene: OperatorScene;
  let node: NodeProcess | undefined;
  const start = (): Promise<NodeProcess> => scene.start();
  const warden = (args: readonly string[]): Promise<CliRun> => scene.warden(args);
  const startedPids = (kind: string): number[] => scene.startedPids(kind);
  /** The node journaled the agent's session (the run is this home's only one). */
  const sessionJournaled = (): boolean => {
    const journals = join(scene.home, "journals");
    return existsSync(journals) && readdirSync(journals).some((name) => readFileSync(join(journals, name), "utf8").includes('"agent_session"'));
  };

  before(() => {
    scene = operatorScene("after-crash-inspect", TOKEN);
  });
  after(async () => {
    await node?.kill();
    scene.remove();
  });

  it("names the killed pids, the node that killed them and the dead node, and keeps saying it after another restart", async () => {
    node = await start();
    const id = randomUUID();
    const started = await httpCall(node.url, TOKEN, "POST", "/v1/invocations", {
      headers: { "idempotency-key": id },
      body: { provider: "claude", prompt: "#hang #grandchild" },
    });
    assert.equal(started.status, 202);
    // The journal notes the agent's pid right after the launch: wait for it, as an operator would see it.
    // And for the agent's session note, its first output line read: until then the agent still has
    // that line to write, and written after the kill to a pipe nobody reads, it would die of EPIPE
    // on its own before the next node could kill it.
    const running = await waitFor("the agent's pid and its session in the journal", async () => {
      const seen = await httpCall(node!.url, TOKEN, "GET", `/v1/invocations/api:operator/${id}/inspection`);
      const body = seen.body as unknown as Inspected;
      return body.report?.journal.agent_process !== undefined && startedPids("grandchild").length === 1 && sessionJournaled() ? body : undefined;
    });
    const agentPid = running.report.journal.agent_process!.pid;
    assert.deepEqual(startedPids("claude"), [agentPid]);
    const grandchildPid = startedPids("grandchild")[0]!;
    const deadNodePid = node.child.pid!;

    await node.kill();
    assert.ok(isAlive(agentPid) && isAlive(grandchildPid), "a node killed with -9 cannot stop its agent");
    node = await start();
    await waitFor("the orphaned agent and its child to be gone", () => (!isAlive(agentPid) && !isAlive(grandchildPid) ? true : undefined));
    const killer = node.child.pid!;

    const check = async (): Promise<void> => {
      const json = await warden(["inspect", "api:operator", id, "--json"]);
      assert.equal(json.code, 0, json.stderr);
      const inspected = JSON.parse(json.stdout) as Inspected;
      assert.equal(inspected.report.status, "unresolved");
      assert.equal(inspected.report.journal.agent_process?.pid, agentPid);
      const stops = inspected.report.agent_stopped ?? [];
      // The node logs what it reaped (warn): on a failure, it tells whether this node killed them at all.
      assert.equal(stops.length, 1, `one recorded stop of the run's agent, got ${JSON.stringify(inspected.report)}; node stderr: ${node!.stderr()}`);
      const stop = stops[0]!;
      assert.deepEqual(stop.killed, [agentPid, grandchildPid].sort((a, b) => a - b));
      assert.equal(stop.by.pid, killer);
      assert.equal(stop.node_pid, deadNodePid);
      assert.ok(!Number.isNaN(Date.parse(stop.at)));

      const text = await warden(["inspect", "api:operator", id]);
      assert.equal(text.code, 0, text.stderr);
      const line = text.stdout.split("\n").map((l) => l.trim()).find((l) => l.startsWith("agent stopped"));
      assert.ok(line !== undefined, text.stdout);
      assert.match(line, new RegExp(`killed .*\\b${agentPid}\\b.*by the node that started next on this home \\(pid ${killer} `));
      assert.match(line, new RegExp(`node that ran it \\(pid ${deadNodePid}\\) had died`));
    };
    await check();

    // Another restart (graceful this time): the record is on disk, not in the node that killed them.
    assert.equal(await node.stop(), 0);
    node = await start();
    await check();
  });
});
