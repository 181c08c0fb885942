import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn, type ChildProcessWithoutNullStreams } from "node:child_process";
import { randomUUID } from "node:crypto";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { verifyReceipt } from "../../src/invocations/index.js";
import { SCOPE, setup } from "./fixtures/env.js";
import { LONG_TEST_MS, READY_MS } from "../support/wait.js";

const CHILD = fileURLToPath(new URL("./fixtures/child.ts", import.meta.url));
const request = { task: "increment the counter" };

function spawnChild(args: string[]): ChildProcessWithoutNullStreams {
  return spawn(process.execPath, ["--import", "tsx", CHILD, ...args], { stdio: ["pipe", "pipe", "pipe"] });
}

/** Resolves with stdout lines as they come; `until` picks the line to wait for. */
function waitForLine(child: ChildProcessWithoutNullStreams, until: (line: string) => boolean, timeoutMs = READY_MS): Promise<string[]> {
  return new Promise((resolve, reject) => {
    const seen: string[] = [];
    let buffer = "";
    let stderr = "";
    const timer = setTimeout(() => reject(new Error(`child printed no expected line within ${timeoutMs / 1000} s; stdout: ${seen.join("|")} stderr: ${stderr}`)), timeoutMs);
    child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
    child.stdout.on("data", (chunk: Buffer) => {
      buffer += chunk.toString();
      let nl: number;
      while ((nl = buffer.indexOf("\n")) >= 0) {
        const line = buffer.slice(0, nl);
        buffer = buffer.slice(nl + 1);
        seen.push(line);
        if (until(line)) {
          clearTimeout(timer);
          resolve(seen);
        }
      }
    });
    child.on("exit", (code, signal) => {
      clearTimeout(timer);
      reject(new Error(`child exited (${code ?? signal}) before the expected line; stdout: ${seen.join("|")} stderr: ${stderr}`));
    });
  });
}

function exited(child: ChildProcessWithoutNullStreams): Promise<number | null> {
  return new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) resolve(child.exitCode);
    else child.on("exit", (code) => resolve(code));
  });
}

test("8 child processes race on one id: exactly one owns the run, the shared counter is exactly 1", { timeout: LONG_TEST_MS }, async (t) => {
  const env = await setup(t);
  const id = randomUUID();
  const counter = join(env.root, "counter");
  writeFileSync(counter, "");
  // The node key exists before the race: this test is about claims, not concurrent key creation.
  await env.backend.keys.active();
  const children = Array.from({ length: 8 }, () => spawnChild(["race", env.home, SCOPE, id, counter]));
  t.after(() => children.forEach((c) => c.kill("SIGKILL")));
  await Promise.all(children.map((c) => waitForLine(c, (l) => l === "ready")));
  const results = children.map((c) => waitForLine(c, (l) => l.startsWith("{")));
  for (const c of children) c.stdin.write("go\n");
  const statuses = (await Promise.all(results)).map((lines) => (JSON.parse(lines.at(-1)!) as { status: string }).status);
  assert.deepEqual(await Promise.all(children.map(exited)), Array<number>(8).fill(0));
  assert.equal(statuses.filter((s) => s === "fresh").length, 1, `statuses: ${statuses.join(",")}`);
  // The others saw the owner at work or its recorded result — never a second run.
  assert.ok(statuses.every((s) => s === "fresh" || s === "in_progress" || s === "recorded"), statuses.join(","));
  const lines = readFileSync(counter, "utf8").split("\n").filter((l) => l !== "");
  assert.equal(lines.length, 1, `counter has ${lines.length} increments`);
  const final = await env.invocations.lookup(SCOPE, id, request);
  assert.equal(final?.status, "recorded");
  assert.deepEqual(final?.status === "recorded" && final.result, { incremented_by: Number(lines[0]) });
});

test("kill -9 of the owner mid-effect: unresolved with its audit, never fresh, reconciled closes it for good", { timeout: LONG_TEST_MS }, async (t) => {
  const env = await setup(t);
  const id = randomUUID();
  const child = spawnChild(["hold", env.home, SCOPE, id]);
  t.after(() => child.kill("SIGKILL"));
  const lines = await waitForLine(child, (l) => l === "in-effect");
  const runId = (JSON.parse(lines.find((l) => l.startsWith("{"))!) as { run_id: string }).run_id;

  // While the owner lives, everyone (lookups included) sees in_progress, and looking does not
  // disturb the owner's lock.
  for (let i = 0; i < 3; i++) assert.equal((await env.invocations.lookup(SCOPE, id))?.status, "in_progress");
  assert.equal((await env.invocations.open(SCOPE, id, request, "retry")).status, "in_progress");

  child.kill("SIGKILL");
  await exited(child);

  const lookedUp = await env.invocations.lookup(SCOPE, id, request);
  assert.equal(lookedUp?.status, "unresolved");
  assert.equal(lookedUp?.status === "unresolved" && lookedUp.audit.run_id, runId);
  assert.deepEqual(lookedUp?.status === "unresolved" && lookedUp.audit.reasons, ["owner-gone"]);
  for (let i = 0; i < 3; i++) assert.equal((await env.invocations.open(SCOPE, id, request, "retry")).status, "unresolved");

  const inspection = await env.invocations.inspect(SCOPE, id);
  assert.equal(inspection.snapshot.audit.run_id, runId);
  assert.equal(inspection.snapshot.audit.entries, 2); // run.started, effect.started
  assert.deepEqual(inspection.report.journal.open_effects.length, 1);
  assert.ok(inspection.report.journal.findings.some((f) => f.reason === "effect-not-finished"));

  const review = {
    snapshot_hash: inspection.snapshot_hash,
    outcome: "failed",
    rationale: "the job was killed before it wrote anything; checked the target directory",
    evidence: [{ reference: "ticket OPS-1", sha256: "sha256:452b7b642e325cb2b5b20ac28536ada8b0ad312217a98ab7ff23330603b63126" }],
    effects_stopped: true,
  };
  const { receipt, replayed } = await env.invocations.reconcile(SCOPE, id, review, "operator-alice");
  assert.equal(replayed, false);
  assert.equal(verifyReceipt(receipt, await env.invocations.publicKeys(), (await env.invocations.inspect(SCOPE, id)).snapshot).ok, true);
  for (let i = 0; i < 3; i++) {
    const again = await env.invocations.open(SCOPE, id, request, "retry");
    assert.equal(again.status, "reconciled");
  }
  // A new process sees the same.
  await env.close();
  const { openEnv } = await import("./fixtures/env.js");
  const reopened = await openEnv(env.home);
  t.after(() => reopened.close());
  assert.equal((await reopened.invocations.open(SCOPE, id, request, "retry")).status, "reconciled");
});
