/**
 * kill -9 of the node mid-run (DESIGN.md "Change sets"): the run reads unresolved, the next node
 * keeps its worktree, `inspect` stores and reports the worktree's change set with its digest, a
 * review citing that digest reconciles the run, and the worktree is then removed.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import * as fs from "node:fs";
import { join } from "node:path";
import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import { openWarden } from "../../src/warden/facade.js";
import { tempDir } from "../support/temp.js";
import { waitFor } from "../support/wait.js";
import { b64, editingAgent, git, makeRepo, prompt } from "./helpers.js";

const CHILD = fileURLToPath(new URL("./children/node.ts", import.meta.url));

test("kill -9 mid-run: unresolved, worktree kept, inspect shows its change set, a review citing it reconciles, then the worktree goes", async (t) => {
  const root = tempDir("changes-crash");
  t.after(() => fs.rmSync(root, { recursive: true, force: true }));
  const repo = join(root, "repo");
  makeRepo(repo);
  const agent = editingAgent(join(root, "agents"));
  const home = join(root, "home");
  const ops = [
    { op: "write" as const, path: "half-done.txt", base64: b64("written before the crash\n") },
    { op: "rm" as const, path: "gone.txt" },
    { op: "write" as const, path: "written.flag", base64: b64("") },
    { op: "gate" as const }, // never opened: the agent is mid-run when its node dies
  ];
  const child = spawn(process.execPath, ["--import", "tsx", CHILD, home, repo, agent, prompt(ops)], { stdio: ["ignore", "pipe", "pipe"] });
  t.after(() => void (child.exitCode === null && child.signalCode === null && child.kill("SIGKILL")));
  let out = "";
  let err = "";
  child.stdout.on("data", (c: Buffer) => void (out += c.toString()));
  child.stderr.on("data", (c: Buffer) => void (err += c.toString()));
  const [runId, id] = await waitFor(`the child node to print the run id (stderr: ${err})`, () => {
    const m = /^([0-9a-f-]{36}) ([0-9a-f-]{36})\n/.exec(out);
    return m === null ? undefined : [m[1]!, m[2]!];
  });
  const worktree = join(home, "worktrees", runId);
  await waitFor("the agent to write in its worktree", () => (fs.existsSync(join(worktree, "written.flag")) ? true : undefined));
  child.kill("SIGKILL");
  await new Promise((resolve) => child.once("exit", resolve));

  const warden = await openWarden({ home, workspaces: { repo }, providers: { claude: { command: agent } }, agentEnv: { PATH: process.env.PATH } });
  t.after(() => warden.close());
  assert.ok(fs.existsSync(worktree), "an unresolved run's worktree is kept at start");
  const inspection = await warden.inspect("crash", id);
  assert.equal(inspection.report.status, "unresolved");
  const changes = inspection.report.changes;
  assert.ok(changes !== undefined && "change_set" in changes, JSON.stringify(changes));
  assert.deepEqual(changes.files.map((f) => [f.path, f.status]), [["gone.txt", "deleted"], ["half-done.txt", "added"], ["written.flag", "added"]]);
  // The digest names a stored change set, which reads back whole.
  const manifest = await warden.changes.store.manifest(changes.change_set);
  assert.equal(manifest.files.length, 3);

  const review = {
    snapshot_hash: inspection.snapshot_hash,
    outcome: "failed",
    rationale: "The node was killed mid-run; the worktree's change set is the evidence of what the agent had done.",
    evidence: [{ reference: `change set of run ${runId}`, sha256: changes.change_set }],
    effects_stopped: true,
  };
  const { receipt } = await warden.reconcile("crash", id, review, "operator");
  assert.equal(receipt.review.evidence[0]!.sha256, changes.change_set);
  assert.ok(!fs.existsSync(worktree), "the worktree is removed once the run is reconciled");
  assert.ok(!git(repo, "worktree", "list", "--porcelain").includes(runId));
  assert.equal(git(repo, "status", "--porcelain"), "", "the repository's checkout is untouched");
});

