/**
 * Issue 30's real-agent case: the pinned Claude Code, confined under a real `warden serve` in a
 * git workspace, against the scripted model. The model makes Claude Code's own tools write a new
 * file (Write), edit a committed one (Read, then Edit) and delete another (Bash `rm`) in the run's
 * worktree; the run's `run.changes` entry and `GET /v1/runs/{id}/changes` list exactly those
 * three paths with their statuses, the stored blobs are the bytes the model asked for, the
 * repository's own checkout is untouched, and `warden apply` turns a clean checkout of the base
 * into the tree the model's edits describe.
 *
 * The model names paths relative to the working directory: the run's worktree is
 * `<home>/worktrees/<run_id>`, and the run id is the node's to choose, after the script is loaded.
 */
import { scriptedProvider, scriptedNodeEnv } from "./policy-support.js";
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { createHash, randomUUID } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { ScriptedModelServer } from "../../src/scripted-model/index.js";
import { httpCall, repo, startNode, type CliRun, type NodeProcess, runJournal } from "../support/node.js";
import { tempDir } from "../support/temp.js";
import { treeDifferences, treeOf } from "../changes/trees.js";
import { wardenInProcess } from "../support/cli.js";

const TOKEN = "changes-agents-operator-token-0123456789abcdef";
const RUN_WAIT_S = 120;

/** The committed files, and what the model makes of them. */
const KEEP = "keep.txt";
const KEEP_TEXT = "left alone\n";
const EDITED = "notes.md";
const EDITED_BEFORE = "# notes\n\nstatus: draft\nowner: nobody\n";
const EDITED_AFTER = "# notes\n\nstatus: reviewed by the agent\nowner: nobody\n";
const GONE = "obsolete.txt";
const GONE_TEXT = "to be removed by the agent\n";
const ADDED = "src/greeting.txt";
const ADDED_TEXT = "hello from Claude Code's Write tool\nsecond line\n";

const sha256 = (text: string): string => `sha256:${createHash("sha256").update(text).digest("hex")}`;

interface ChangedFile {
  path: string;
  old_path: string | null;
  status: string;
  old_sha256: string | null;
  new_sha256: string | null;
  lines_added: number | null;
  lines_deleted: number | null;
}
interface Entry {
  entry: { seq: number; event: { type: string; effect_id?: string; kind?: string; name?: string; outcome?: string; base?: string; change_set?: string; no_changes?: boolean; files_total?: number; files?: ChangedFile[] } };
}

const cli = join(repo, "node_modules", ".bin", "claude");
const skip = existsSync(cli) ? false : `${cli} is not installed (npm install puts the pinned CLI there)`;

describe("real claude in a git workspace: the change set is what its tools did", { skip }, () => {
  const root = tempDir("agents-changes");
  const home = join(root, "home");
  const workspace = join(root, "workspace");
  let base = "";
  let model: ScriptedModelServer;
  let node: NodeProcess | undefined;

  const git = (cwd: string, ...args: string[]): string =>
    execFileSync("git", ["-c", "user.name=t", "-c", "user.email=t@example.invalid", ...args], { cwd, encoding: "utf8", env: { ...process.env, GIT_CONFIG_NOSYSTEM: "1", HOME: root } }).trim();
  const warden = (args: readonly string[]): Promise<CliRun> => wardenInProcess(args, { env: { WARDEN_URL: node!.url, WARDEN_TOKEN: TOKEN }, cwd: root });
  const journal = (runId: string): Promise<Entry[]> => runJournal<Entry>(node!.url, TOKEN, runId);
  /** A clean checkout of the base, as an operator makes one to apply a run's change set to. */
  const checkout = (name: string): string => {
    const dir = join(root, name);
    git(workspace, "worktree", "add", "--detach", "-q", dir, base);
    return dir;
  };

  before(async () => {
    mkdirSync(workspace);
    git(workspace, "init", "-q", "-b", "main");
    for (const [path, text] of [[KEEP, KEEP_TEXT], [EDITED, EDITED_BEFORE], [GONE, GONE_TEXT]] as const) writeFileSync(join(workspace, path), text);
    git(workspace, "add", "-A");
    git(workspace, "commit", "-qm", "base");
    base = git(workspace, "rev-parse", "HEAD");
    mkdirSync(home, { mode: 0o700 });
    model = await ScriptedModelServer.start({ script: { turns: [] } });
    node = await startNode({
      home,
      // The default isolation (the sandbox) and the default permission mode (Claude's acceptEdits).
      config: {
        workspaces: { repo: workspace },
        defaultWorkspace: "repo",
        providers: { claude: scriptedProvider(cli, model.url) },
        logLevel: "warn",
      },
      env: scriptedNodeEnv(root, TOKEN),
      timeoutMs: 60_000,
    });
  });
  after(async () => {
    await node?.kill();
    await model.close();
    rmSync(root, { recursive: true, force: true });
  });

  it("Write, Edit and a Bash rm give a change set of exactly those three files; warden apply reproduces them on a clean checkout", async () => {
    model.load({
      turns: [
        { tool: { name: "Bash", input: { command: `rm ${GONE}`, description: "remove the obsolete file" } } },
        { tool: { name: "Write", input: { file_path: ADDED, content: ADDED_TEXT } } },
        // Claude Code edits only a file it has read in the session.
        { tool: { name: "Read", input: { file_path: EDITED } } },
        { tool: { name: "Edit", input: { file_path: EDITED, old_string: "status: draft", new_string: "status: reviewed by the agent" } } },
        { text: "Wrote, edited and removed." },
      ],
    });
    const run = await warden(["invoke", "--id", randomUUID(), "--provider", "claude", "--wait", String(RUN_WAIT_S), "--json", "--", "tidy the repository"]);
    assert.equal(run.code, 0, run.stdout + run.stderr);
    const view = JSON.parse(run.stdout) as { status: string; run_id: string; result: { answer?: string; refused?: unknown } };
    assert.equal(view.status, "recorded", run.stdout);
    assert.equal(view.result.answer, "Wrote, edited and removed.");
    assert.equal(view.result.refused, undefined, run.stdout);
    const runId = view.run_id;

    // Claude Code's own tools did it, each journaled as a success.
    const entries = await journal(runId);
    const events = entries.map((e) => e.entry.event);
    const tools = events
      .filter((e) => e.type === "effect.started" && e.kind === "tool")
      .map((e) => [e.name, events.find((f) => f.type === "effect.finished" && f.effect_id === e.effect_id)?.outcome]);
    assert.deepEqual(tools, [
      ["Bash", "succeeded"],
      ["Write", "succeeded"],
      ["Read", "succeeded"],
      ["Edit", "succeeded"],
    ]);
    assert.equal(events[0]?.base, base, "run.started records the base commit");
    // The run was confined: the isolation the journal records is the sandbox's.
    const isolation = (events[0] as { isolation?: { profile?: { kind?: string; mounts?: { path: string; access: string; what: string }[] } } }).isolation?.profile;
    assert.equal(isolation?.kind, "bubblewrap", JSON.stringify(isolation));
    // The worktree is the run's one writable workspace; the repository itself is not mounted.
    assert.deepEqual(isolation?.mounts?.filter((m) => m.what === "workspace").map((m) => [m.path, m.access]), [[join(home, "worktrees", "{run_id}"), "rw"]]);

    // run.changes, before run.terminated: exactly the three paths, with the bytes the model asked for.
    const at = events.findIndex((e) => e.type === "run.changes");
    assert.ok(at > 0 && at < events.length - 1 && events.at(-1)?.type === "run.terminated", "run.changes comes before run.terminated");
    const changes = events[at]!;
    assert.equal(changes.base, base);
    assert.equal(changes.no_changes, false);
    const expected: ChangedFile[] = [
      { path: EDITED, old_path: null, status: "modified", old_sha256: sha256(EDITED_BEFORE), new_sha256: sha256(EDITED_AFTER), lines_added: 1, lines_deleted: 1 },
      { path: GONE, old_path: null, status: "deleted", old_sha256: sha256(GONE_TEXT), new_sha256: null, lines_added: 0, lines_deleted: 1 },
      { path: ADDED, old_path: null, status: "added", old_sha256: null, new_sha256: sha256(ADDED_TEXT), lines_added: 2, lines_deleted: 0 },
    ];
    assert.deepEqual(changes.files, expected);
    assert.equal(changes.files_total, 3);

    // The API serves the same change set, its manifest verified, and each new side's bytes.
    const served = await httpCall(node!.url, TOKEN, "GET", `/v1/runs/${runId}/changes`);
    assert.equal(served.status, 200, served.text);
    assert.equal(served.body.change_set, changes.change_set);
    const manifest = served.body.manifest as { base: string; files: (ChangedFile & { new_mode: string | null; binary: boolean })[] };
    assert.equal(manifest.base, base);
    assert.deepEqual(
      manifest.files.map((f) => [f.path, f.status, f.old_sha256, f.new_sha256, f.new_mode, f.binary]),
      expected.map((f) => [f.path, f.status, f.old_sha256, f.new_sha256, f.new_sha256 === null ? null : "100644", false]),
    );
    for (const [digest, text] of [[sha256(ADDED_TEXT), ADDED_TEXT], [sha256(EDITED_AFTER), EDITED_AFTER]] as const) {
      const blob = await fetch(`${node!.url}/v1/runs/${runId}/changes/blobs/${digest}`, { headers: { authorization: `Bearer ${TOKEN}` } });
      assert.equal(blob.status, 200, digest);
      assert.equal(Buffer.from(await blob.arrayBuffer()).toString("utf8"), text);
    }
    const stat = await warden(["changes", runId, "--stat"]);
    assert.equal(stat.code, 0, stat.stderr);
    for (const path of [ADDED, EDITED, GONE]) assert.ok(stat.stdout.includes(path), stat.stdout);

    // The repository's own checkout is as it was; the run's worktree is gone.
    assert.equal(git(workspace, "rev-parse", "HEAD"), base);
    assert.equal(git(workspace, "status", "--porcelain", "--untracked-files=all"), "");
    assert.equal(readFileSync(join(workspace, EDITED), "utf8"), EDITED_BEFORE);
    assert.equal(readFileSync(join(workspace, GONE), "utf8"), GONE_TEXT);
    assert.equal(existsSync(join(workspace, ADDED)), false);
    assert.equal(existsSync(join(home, "worktrees", runId)), false, "the worktree is removed once the change set is stored");

    // warden apply to a clean checkout of the base gives the tree the model's edits describe.
    const expectedTree = checkout("by-hand");
    mkdirSync(join(expectedTree, ADDED, ".."), { recursive: true });
    writeFileSync(join(expectedTree, ADDED), ADDED_TEXT);
    writeFileSync(join(expectedTree, EDITED), EDITED_AFTER);
    rmSync(join(expectedTree, GONE));
    const target = checkout("applied");
    const applied = await warden(["apply", runId, "--to", target]);
    assert.equal(applied.code, 0, applied.stdout + applied.stderr);
    assert.match(applied.stdout, new RegExp(`^applied change set ${changes.change_set} of run ${runId} \\(base ${base}\\)`, "m"));
    assert.deepEqual(treeDifferences(treeOf(expectedTree), treeOf(target)), []);
    assert.equal(readFileSync(join(target, ADDED), "utf8"), ADDED_TEXT);

    const verification = await httpCall(node!.url, TOKEN, "GET", `/v1/runs/${runId}/verification`);
    assert.equal(verification.body.ok, true, verification.text);
  });
});
