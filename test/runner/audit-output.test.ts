/**
 * What an agent prints (audit, session 9), with a real fixture agent (children/audit-agent.cjs):
 * a flood is captured whole up to the stored bound and never fills the disk past it (G11); NUL
 * and invalid UTF-8 pass through and replay alike; an event line longer than its bound makes the
 * run unresolved (the tool call in it could not be journaled) while the lines around it are read.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as path from "node:path";
import { randomUUID } from "node:crypto";
import { sha256Digest } from "../../src/core/digest.js";
import type { Limits } from "../../src/core/limits.js";
import type { EffectFinishedEvent, EffectStartedEvent } from "../../src/journal/types.js";
import { openWarden } from "../../src/warden/facade.js";

import { SCOPE, journalOf, openRunnerEnv, type RunnerEnv } from "./helpers.js";
import { fixtureCommand, killFixture } from "./audit-fixture.js";
import { tempDir } from "../support/temp.js";

const MiB = 1024 * 1024;

async function setup(t: { after(fn: () => unknown): void }): Promise<RunnerEnv> {
  const root = tempDir("runner-audit-output");
  const wrapper = fixtureCommand(root);
  const env = await openRunnerEnv(root, { commands: { kimi: wrapper, claude: wrapper } });
  t.after(async () => {
    killFixture(root);
    await env.close();
    fs.rmSync(root, { recursive: true, force: true });
  });
  return env;
}

function processFinish(events: readonly { event: { type: string } }[]): EffectFinishedEvent {
  const finish = events.map((e) => e.event).find((e): e is EffectFinishedEvent => e.type === "effect.finished" && (e as EffectFinishedEvent).effect_id === "process");
  assert.ok(finish !== undefined, "the process effect is finished in the journal");
  return finish;
}

test("a 24 MiB flood is captured whole, its last bytes too", async (t) => {
  const env = await setup(t);
  const outcome = await env.runner.invoke({ scope: SCOPE, id: randomUUID(), request: { provider: "kimi", prompt: "work flood=24", timeout_s: 30 } });
  assert.equal(outcome.status, "recorded", JSON.stringify(outcome));
  if (outcome.status !== "recorded") return;
  const file = path.join(env.outputDir, `${outcome.audit.run_id}.stdout`);
  assert.equal(fs.statSync(file).size, 24 * MiB, "every byte the agent wrote before it exited is in the capture");
  const detail = processFinish((await journalOf(env, outcome.audit.run_id)).entries).detail as { stdout: { bytes: number; sha256: string } };
  assert.equal(detail.stdout.bytes, 24 * MiB);
  assert.equal(detail.stdout.sha256, sha256Digest(fs.readFileSync(file)));
});

test("NUL, invalid UTF-8 and a character cut at the end: the tail keeps them (replaced where invalid) and replays alike", async (t) => {
  const env = await setup(t);
  const id = randomUUID();
  const request = { provider: "kimi", prompt: "work binary", timeout_s: 10 };
  const first = await env.runner.invoke({ scope: SCOPE, id, request });
  assert.equal(first.status, "recorded", JSON.stringify(first));
  if (first.status !== "recorded") return;
  assert.equal((first.result as { output_tail: string }).output_tail, "ok\u0000\ufffd\ufffd\n\ufffd\ufffd\ufffd\n\ufffd");
  const replay = await env.runner.invoke({ scope: SCOPE, id, request });
  assert.equal(replay.status, "recorded");
  assert.deepEqual((replay as typeof first).result, first.result);
  assert.equal((replay as typeof first).result_hash, first.result_hash);
});

test("an event line past its bound: the tool call in it is unknown and the run unresolved; the lines after it are still read", async (t) => {
  const env = await setup(t);
  const outcome = await env.runner.invoke({ scope: SCOPE, id: randomUUID(), request: { provider: "claude", prompt: "work long-tool-line=9", timeout_s: 30 } });
  assert.equal(outcome.status, "unresolved", JSON.stringify(outcome));
  if (outcome.status !== "unresolved") return;
  const j = await journalOf(env, outcome.audit.run_id);
  assert.equal(j.ok, true);
  const events = j.entries.map((e) => e.event);
  const started = events.filter((e): e is EffectStartedEvent => e.type === "effect.started").map((e) => e.effect_id);
  assert.deepEqual(started, ["process", "claude:small", "event-stream"], "the small call after the long line was read and journaled");
  const unread = events.find((e): e is EffectFinishedEvent => e.type === "effect.finished" && e.effect_id === "event-stream");
  assert.equal(unread?.outcome, "unknown");
  assert.equal(processFinish(j.entries).outcome, "succeeded", "the agent itself exited 0");
});

test("an agent that prints without end cannot fill the node's disk: the stored output stops at its bound, the digest still covers every byte (G11)", async (t) => {
  const root = tempDir("runner-audit-output-cap");
  t.after(() => {
    killFixture(root);
    fs.rmSync(root, { recursive: true, force: true });
  });
  // A limit today's main does not know: resolveLimits refuses it, so the bound does not exist there.
  const limits = { runOutputBytes: 2 * MiB } as Record<string, number> as Partial<Limits>;
  const warden = await openWarden({
    home: path.join(root, "home"),
    limits,
    providers: { kimi: { command: fixtureCommand(root) } },
    agentEnv: { PATH: process.env.PATH, WARDEN_FIXTURE_STARTS: path.join(root, "starts") },
    // watched from outside (pids, a starts file beside the workspace): unconfined by explicit choice
    isolation: "none",
  });
  try {
    const started = await warden.start("audit", randomUUID(), { provider: "kimi", prompt: "work flood=8", timeout_s: 30 });
    assert.equal(started.status, "started");
    if (started.status !== "started") return;
    const outcome = await started.done;
    assert.equal(outcome.status, "recorded", JSON.stringify(outcome));
    const file = path.join(warden.home, "outputs", `${started.run_id}.stdout`);
    assert.equal(fs.statSync(file).size, 2 * MiB, "the file holds the first 2 MiB only");
    const entries = (await warden.readJournal(started.run_id)).toString().trim().split("\n").map((l) => JSON.parse(l) as { entry: { event: { type: string } } });
    const detail = processFinish(entries.map((e) => e.entry)).detail as { stdout: { bytes: number; stored_bytes?: number; sha256: string } };
    assert.equal(detail.stdout.bytes, 8 * MiB, "every byte is counted");
    assert.equal(detail.stdout.stored_bytes, 2 * MiB, "the journal says how much of it was stored");
    assert.equal(detail.stdout.sha256, sha256Digest(Buffer.alloc(8 * MiB, 0x61)), "the digest is of the whole stream");
  } finally {
    await warden.close({ graceMs: 0 });
  }
});
