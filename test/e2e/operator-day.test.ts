/**
 * An operator's day against one real node, driven with the CLI and HTTP API:
 * - a tree `warden materialize` leaves on the node names its session (the only handle to remove
 *   it, and the node keeps at most limits.materializations of them);
 * - a review or request with a value outside a fixed list is refused naming the values that are
 *   allowed, not "must be equal to constant";
 * - a push refused because every upload stage is taken names the open stages (an interrupted push
 *   never printed its own), when the longest idle one expires, and how to drop one;
 * - `--provider codex` runs in a workspace that is not a git repository (the default one,
 *   `<home>/workspaces/default`, never is). codex-cli 0.171 `exec` refuses to run there ("Not inside a trusted directory and --skip-git-repo-check was not specified.",
 *   exit 1), so with the old launch every codex run was recorded as a failure whose only reason
 *   sat in `<home>/outputs/<run>.stderr`. The stand-in is the fixture codex behind the same check.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { cpSync, existsSync, mkdirSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { WardenClient } from "../../src/client/client.js";
import { compileDirectory } from "../../src/delivery/compile/directory.js";
import { fixtureAgents, httpCall, removeHome, repo, startNode, type CliRun, type NodeProcess } from "../support/node.js";
import { tempDir } from "../support/temp.js";
import { wardenInProcess } from "../support/cli.js";

const example = join(repo, "examples", "review-bundle");
const GIT_CHECKING_CODEX = `#!/usr/bin/env node
import { existsSync } from "node:fs";
import { dirname, join } from "node:path";
let dir = process.cwd();
let inRepository = false;
for (;;) {
  if (existsSync(join(dir, ".git"))) { inRepository = true; break; }
  const up = dirname(dir);
  if (up === dir) break;
  dir = up;
}
if (!inRepository && !process.argv.includes("--skip-git-repo-check")) {
  process.stderr.write("Not inside a trusted directory and --skip-git-repo-check was not specified.\\n");
  process.exit(1);
}
await import("./codex.mjs");
`;

const UUID = /[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/;

describe("operator: a day against a real node", () => {
  let node: NodeProcess;
  let revision: string;
  const scratch = tempDir("operator-day");

  const warden = (args: readonly string[], cwd = repo): Promise<CliRun> => wardenInProcess(args, { env: { WARDEN_HOME: node.home }, cwd });

  before(async () => {
    const workspace = join(scratch, "workspace");
    mkdirSync(workspace);
    // Beside a copy of the fixture agents: a confined run sees the directory of its command, no more.
    const agents = join(scratch, "agents");
    cpSync(fixtureAgents, agents, { recursive: true });
    const codex = join(agents, "git-checking-codex.mjs");
    writeFileSync(codex, GIT_CHECKING_CODEX, { mode: 0o755 });
    node = await startNode({
      // One upload stage at a time: a push left open takes the node's only place.
      config: { limits: { activeStages: 1 } },
      args: [
        ...["--workspace", `demo=${workspace}`],
        ...["--provider", `claude=${join(fixtureAgents, "claude.mjs")}`, "--provider", `codex=${codex}`, "--log-level", "warn"],
      ],
    });
    const push = await warden(["push", example, "--no-progress", "--json"]);
    assert.equal(push.code, 0, push.stderr);
    revision = (JSON.parse(push.stdout) as { receipt: { revision: string } }).receipt.revision;
  });

  after(async () => {
    await node?.stop();
    removeHome(node);
    rmSync(scratch, { recursive: true, force: true });
  });

  it("materialize without --dir prints the session the node keeps the tree under, and how to remove it", async () => {
    const run = await warden(["materialize", "review-bundle", "--provider", "claude"]);
    assert.equal(run.code, 0, run.stderr);
    const session = /^\s*session\s+(\S+)$/m.exec(run.stdout)?.[1];
    assert.ok(session !== undefined && UUID.test(session), `names the session: ${run.stdout}`);
    assert.ok(existsSync(join(node.home, "materializations", session)), "the session is the node's tree");
    assert.ok(run.stdout.includes(`DELETE /v1/materializations/${session}`), `says how to remove it: ${run.stdout}`);
    const removed = await httpCall(node.url, node.token, "DELETE", `/v1/materializations/${session}`);
    assert.equal(removed.status, 204);
    assert.ok(!existsSync(join(node.home, "materializations", session)));
  });

  it("a provider outside the list is refused naming the providers there are", async () => {
    const reply = await httpCall(node.url, node.token, "POST", `/v1/bundles/review-bundle/${revision}/materializations`, { body: { provider: "gemini" } });
    assert.equal(reply.status, 400);
    const problem = reply.body as { code: string; detail: string };
    assert.equal(problem.code, "materialization-field-invalid");
    assert.match(problem.detail, /"provider" must be one of "claude", "codex", "kimi"/);
  });

  it("a review left with the template's outcome is refused naming the outcomes there are", async () => {
    const id = randomUUID();
    const invoke = await warden(["invoke", "--id", id, "--provider", "claude", "--workspace", "demo", "--", "review #kill"]);
    assert.equal(invoke.code, 2, `unresolved: ${invoke.stdout} ${invoke.stderr}`);
    const evidence = join(scratch, "notes.txt");
    writeFileSync(evidence, "checked: the agent is gone\n");
    const template = await warden(["inspect", "api:operator", id, "--review-template", "--evidence", evidence], scratch);
    assert.equal(template.code, 0, template.stderr);
    const review = JSON.parse(template.stdout) as Record<string, unknown>;
    review.effects_stopped = true; // everything filled in but the outcome
    review.rationale = "the fixture killed itself; nothing else ran";
    const file = join(scratch, "review.json");
    writeFileSync(file, JSON.stringify(review));
    const run = await warden(["reconcile", "api:operator", id, "--review", file]);
    assert.equal(run.code, 1);
    assert.match(run.stderr, /^warden: review\.outcome must be one of completed, failed, no_effects \(review-invalid-outcome\)\n$/);
  });

  it("a push refused for want of an upload stage names the open stage and how to drop it", async () => {
    const left = join(scratch, "left-open");
    mkdirSync(join(left, "docs"), { recursive: true });
    writeFileSync(join(left, "docs", "notes.md"), "an upload interrupted before its first byte\n");
    const { manifest } = await compileDirectory(left, { bundleId: "left-open", revision: "r1" });
    const open = await new WardenClient({ url: node.url, token: node.token }).beginStage(manifest);
    assert.ok(!("committed" in open) || open.committed !== true, "the stage is open");
    const next = join(scratch, "next-bundle");
    mkdirSync(next);
    writeFileSync(join(next, "notes.md"), "the next push\n");
    const refused = await warden(["push", next, "--no-progress"]);
    assert.equal(refused.code, 1, refused.stdout);
    assert.match(refused.stderr, /\(stage-capacity-exhausted\)\n$/);
    assert.ok(refused.stderr.includes(open.stage_id), `names the open stage: ${refused.stderr}`);
    assert.match(refused.stderr, /expires in \d+ s/);
    assert.ok(refused.stderr.includes("DELETE /v1/stages/"), `says how to drop it: ${refused.stderr}`);
    const dropped = await httpCall(node.url, node.token, "DELETE", `/v1/stages/${open.stage_id}`);
    assert.equal(dropped.status, 204);
  });

  it("codex runs in a workspace that is not a git repository and records a clean result", async () => {
    const reply = await httpCall(node.url, node.token, "POST", "/v1/invocations", {
      headers: { "idempotency-key": randomUUID(), prefer: "wait=20" },
      body: { provider: "codex", prompt: "list skills", workspace: "demo" },
    });
    assert.equal(reply.status, 200, reply.text);
    const body = reply.body as { status: string; result?: { exit_code: number | null } };
    assert.equal(body.status, "recorded", reply.text);
    assert.equal(body.result?.exit_code, 0, `codex ran: ${reply.text}`);
  });
});
