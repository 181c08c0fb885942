import { test } from "node:test";
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as path from "node:path";
import { randomUUID } from "node:crypto";
import { spawn, type ChildProcess } from "node:child_process";
import { fileURLToPath } from "node:url";

import { isAlive, journalOf, openRunnerEnv, starts, SCOPE } from "./helpers.js";
import { killGroupIfStillRecorded } from "../support/processes.js";
import { LONG_TEST_MS, waitFor } from "../support/wait.js";
import { tempDir } from "../support/temp.js";

const CHILD = fileURLToPath(new URL("./children/invoke.ts", import.meta.url));

function runChild(root: string, id: string, request: unknown): { done: Promise<{ code: number | null; signal: string | null; stdout: string; stderr: string }>; child: ChildProcess } {
  const child = spawn(process.execPath, ["--import", "tsx", CHILD, root, id, JSON.stringify(request)], { stdio: ["ignore", "pipe", "pipe"] });
  let stdout = "";
  let stderr = "";
  child.stdout.on("data", (c: Buffer) => (stdout += c.toString()));
  child.stderr.on("data", (c: Buffer) => (stderr += c.toString()));
  const done = new Promise<{ code: number | null; signal: string | null; stdout: string; stderr: string }>((resolve) =>
    child.on("close", (code, signal) => resolve({ code, signal, stdout, stderr })),
  );
  return { done, child };
}

test("kill -9 of the node mid-run: after restart the id reads unresolved and the agent is not started again", { timeout: LONG_TEST_MS }, async (t) => {
  const root = tempDir("runner-crash");
  const startsFile = path.join(root, "starts.log");
  t.after(() => {
    for (const s of starts(startsFile)) killGroupIfStillRecorded(s);
    fs.rmSync(root, { recursive: true, force: true });
  });
  const id = randomUUID();
  const request = { provider: "claude", prompt: "work #hang", bundle: { bundle_id: "review-tools", revision: "r1" }, timeout_s: 600 };

  const first = runChild(root, id, request);
  await waitFor("the agent to start", () => starts(startsFile).length === 1 || undefined);
  first.child.kill("SIGKILL");
  const killed = await first.done;
  assert.equal(killed.signal, "SIGKILL", killed.stderr);
  // The agent lives in its own process group; it outlived the node (an operator stops it).
  const agentPid = starts(startsFile)[0]!.pid;
  assert.equal(isAlive(agentPid), true);

  const second = runChild(root, id, request);
  const after = await second.done;
  assert.equal(after.code, 0, after.stderr);
  const outcome = JSON.parse(after.stdout.trim().split("\n").at(-1) as string) as { status: string; audit: { run_id: string; reasons: string[] } };
  assert.equal(outcome.status, "unresolved");
  assert.ok(outcome.audit.reasons.includes("owner-gone"), JSON.stringify(outcome.audit));
  assert.equal(starts(startsFile).length, 1);

  // The journal of the killed run proves what was happening: the agent process had started.
  const env = await openRunnerEnv(root);
  try {
    const j = await journalOf(env, outcome.audit.run_id);
    assert.equal(j.ok, true);
    assert.equal(j.inspection.requires_reconciliation, true);
    assert.ok(j.inspection.open_effects.includes("process"));
    assert.equal((await env.invocations.lookup(SCOPE, id))?.status, "unresolved");
    // The restarted node swept the dead run's materialization.
    assert.ok(!fs.existsSync(path.join(env.matRoot, outcome.audit.run_id)));
  } finally {
    await env.close();
  }
});
