/**
 * The wall-time budget with the fixture claude (DESIGN.md "Spend"): an agent past it with no tool
 * call in flight is stopped at once — a recorded, known outcome `stopped`; one past it with a
 * tool call in flight is not cut: the call is let run, and a call that never ends meets the
 * run's timeout and the usual rule (the call finished `unknown`, the run unresolved).
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import * as fs from "node:fs";
import { randomUUID } from "node:crypto";
import type { JournalEvent } from "../../src/journal/types.js";
import { SCOPE, journalOf, killStarts, openRunnerEnv, type RunnerEnv } from "./helpers.js";
import { tempDir } from "../support/temp.js";

describe("runner: the wall-time budget", () => {
  let root: string;
  let env: RunnerEnv;

  before(async () => {
    root = tempDir("runner-budget");
    env = await openRunnerEnv(root, { spend: { run: { wall_s: 1 } } });
  });
  after(async () => {
    killStarts(env.startsFile);
    await env.close();
    fs.rmSync(root, { recursive: true, force: true });
  });

  const events = async (runId: string): Promise<JournalEvent[]> => (await journalOf(env, runId)).entries.map((e) => e.event);

  it("an agent past it between tool calls is stopped: recorded, terminated stopped, its spend journaled", async () => {
    const outcome = await env.runner.invoke({ scope: SCOPE, id: randomUUID(), request: { provider: "claude", prompt: "wait #hang", timeout_s: 60 } });
    assert.equal(outcome.status, "recorded", JSON.stringify(outcome));
    const result = (outcome as { result: { stopped?: unknown } }).result;
    assert.deepEqual(result.stopped, { reason: "budget", limit: "wall_s" });
    const evs = await events((outcome as { audit: { run_id: string } }).audit.run_id);
    const last = evs.at(-1);
    assert.equal(last?.type === "run.terminated" ? last.reason : undefined, "stopped");
    const spend = evs.find((e) => e.type === "run.spend");
    assert.ok(spend?.type === "run.spend" && spend.breached === "wall_s" && spend.wall_ms >= 1000, JSON.stringify(spend));
    const process = evs.find((e) => e.type === "effect.finished" && e.effect_id === "process");
    assert.equal(process?.type === "effect.finished" ? process.outcome : undefined, "failed");
  });

  it("past it with a tool call in flight, the call is not cut: the run's timeout and the usual rule decide", async () => {
    const outcome = await env.runner.invoke({ scope: SCOPE, id: randomUUID(), request: { provider: "claude", prompt: "call and wait #stall", timeout_s: 4 } });
    assert.equal(outcome.status, "unresolved", JSON.stringify(outcome));
    const evs = await events((outcome as { audit: { run_id: string } }).audit.run_id);
    const terminated = evs.at(-1);
    assert.equal(terminated?.type === "run.terminated" ? terminated.reason : undefined, "timeout");
    const tool = evs.find((e) => e.type === "effect.started" && e.kind === "tool");
    assert.ok(tool?.type === "effect.started");
    const finish = evs.find((e) => e.type === "effect.finished" && e.effect_id === tool.effect_id);
    assert.equal(finish?.type === "effect.finished" ? finish.outcome : undefined, "unknown");
    // The budget was reached, and said so, but did not stop the agent mid-call.
    const spend = evs.find((e) => e.type === "run.spend");
    assert.ok(spend?.type === "run.spend" && spend.breached === "wall_s" && spend.wall_ms >= 3000, JSON.stringify(spend));
  });
});
