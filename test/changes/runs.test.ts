/**
 * Runs in a git workspace (DESIGN.md "Change sets"), through the library and a confined fixture
 * agent that edits its worktree: each kind of change is recorded as git itself sees it, two runs at
 * once get exactly their own change sets, the repository's checkout is never touched, the agent
 * sees nothing of the repository's .git, and worktrees go once their change set is stored.
 */
import { describe, test } from "node:test";
import assert from "node:assert/strict";
import * as fs from "node:fs";
import { join } from "node:path";
import { randomUUID, createHash } from "node:crypto";
import { spawnSync } from "node:child_process";
import { openWarden, type Warden } from "../../src/warden/facade.js";
import type { ExistingOutcome } from "../../src/invocations/types.js";
import type { JournalEvent } from "../../src/journal/types.js";
import { tempDir } from "../support/temp.js";
import { waitFor } from "../support/wait.js";
import { b64, editingAgent, git, makeRepo, prompt, type Op } from "./helpers.js";

const SCOPE = "changes";

interface Env {
  root: string;
  repo: string;
  base: string;
  warden: Warden;
  launched: string[];
}

async function setup(t: { after(fn: () => unknown): void }, probe = false, limits?: { changeSetBytes: number }): Promise<Env> {
  const root = tempDir("changes-runs");
  const repo = join(root, "repo");
  const base = makeRepo(repo);
  const agent = editingAgent(join(root, "agents"));
  const launched: string[] = [];
  const warden = await openWarden({
    home: join(root, "home"),
    workspaces: { repo, plain: fs.mkdirSync(join(root, "plain"), { recursive: true }) ?? join(root, "plain") },
    defaultWorkspace: "repo",
    providers: { claude: { command: agent } },
    agentEnv: { PATH: process.env.PATH, ...(probe ? { WARDEN_REPO_PROBE: repo } : {}) },
    runnerHooks: { afterLaunch: (_pid, runId) => void launched.push(runId) },
    ...(limits === undefined ? {} : { limits }),
  });
  t.after(async () => {
    await warden.close();
    fs.rmSync(root, { recursive: true, force: true });
  });
  return { root, repo, base, warden, launched };
}

function eventsOf(bytes: Uint8Array): JournalEvent[] {
  return Buffer.from(bytes)
    .toString("utf8")
    .split("\n")
    .filter((l) => l !== "")
    .map((l) => (JSON.parse(l) as { entry: { event: JournalEvent } }).entry.event);
}

async function run(env: Env, ops: readonly Op[], extra: Record<string, unknown> = {}): Promise<{ run_id: string; outcome: ExistingOutcome }> {
  const started = await env.warden.start(SCOPE, randomUUID(), { provider: "claude", prompt: prompt(ops), timeout_s: 120, ...extra });
  assert.equal(started.status, "started");
  if (started.status !== "started") throw new Error("not started");
  return { run_id: started.run_id, outcome: await started.done };
}

/** Applies `ops` to a fresh checkout of the base with plain fs calls: the tree the run should leave. */
function applyByHand(dir: string, ops: readonly Op[]): void {
  for (const o of ops) {
    if (o.op === "write") {
      fs.mkdirSync(join(dir, o.path, ".."), { recursive: true });
      fs.writeFileSync(join(dir, o.path), Buffer.from(o.base64, "base64"));
      if (o.mode !== undefined) fs.chmodSync(join(dir, o.path), o.mode);
    } else if (o.op === "rm") fs.rmSync(join(dir, o.path));
    else if (o.op === "mv") {
      fs.mkdirSync(join(dir, o.to, ".."), { recursive: true });
      fs.renameSync(join(dir, o.from), join(dir, o.to));
    } else if (o.op === "chmod") fs.chmodSync(join(dir, o.path), o.mode);
    else if (o.op === "symlink") fs.symlinkSync(o.target, join(dir, o.path));
    else if (o.op === "nest" || o.op === "bytes") throw new Error(`applyByHand does not ${o.op}`);
  }
}

/** Every tracked-or-untracked, not ignored file of a tree: path → mode and bytes (a symlink: its target). */
function treeOf(dir: string): Map<string, string> {
  const out = new Map<string, string>();
  const listed = git(dir, "ls-files", "-z", "--cached", "--others", "--exclude-standard").split("\0").filter((p) => p !== "");
  for (const p of listed) {
    const full = join(dir, p);
    if (!fs.existsSync(full) && !isLink(full)) continue;
    const st = fs.lstatSync(full);
    const body = st.isSymbolicLink() ? `link:${fs.readlinkSync(full)}` : createHash("sha256").update(fs.readFileSync(full)).digest("hex");
    out.set(p, `${st.isSymbolicLink() ? "l" : (st.mode & 0o111) !== 0 ? "x" : "f"} ${body}`);
  }
  return out;
}

function isLink(p: string): boolean {
  try {
    return fs.lstatSync(p).isSymbolicLink();
  } catch {
    return false;
  }
}

const EVERY_KIND: Op[] = [
  { op: "write", path: "a.txt", base64: b64("one\n2\nthree\nfour\n") },
  { op: "rm", path: "gone.txt" },
  { op: "mv", from: "move.txt", to: "sub/moved.txt" },
  { op: "chmod", path: "run.sh", mode: 0o755 },
  { op: "write", path: "new/untracked.txt", base64: b64("fresh\n") },
  { op: "write", path: "blob.bin", base64: b64(Buffer.from([0, 9, 8, 7, 0, 255, 254])) },
  { op: "write", path: "tool.sh", base64: b64("#!/bin/sh\n"), mode: 0o755 },
  { op: "rm", path: "link" },
  { op: "symlink", target: "run.sh", path: "link" },
  { op: "symlink", target: "new/untracked.txt", path: "new-link" },
  { op: "write", path: "debug.log", base64: b64("ignored by .gitignore\n") },
];

describe("change sets of runs in a git workspace", () => {
  test("each kind of change is recorded as git sees it; the patch rebuilds the tree; checkout untouched; worktree removed; the agent saw no .git", async (t) => {
    const env = await setup(t, true);
    const headBefore = git(env.repo, "rev-parse", "HEAD");
    const { run_id, outcome } = await run(env, EVERY_KIND);
    assert.equal(outcome.status, "recorded", JSON.stringify(outcome));

    const events = eventsOf(await env.warden.readJournal(run_id));
    const started = events[0]!;
    assert.equal(started.type === "run.started" && started.base, env.base, "run.started records the base commit");
    const at = events.findIndex((e) => e.type === "run.changes");
    assert.ok(at > 0 && events[events.length - 1]!.type === "run.terminated" && at < events.length - 1, "run.changes comes before run.terminated");
    const recorded = events[at]!;
    assert.ok(recorded.type === "run.changes" && "change_set" in recorded, JSON.stringify(recorded));

    const { change_set, manifest } = await env.warden.changes.read(run_id);
    assert.equal(change_set, recorded.change_set);
    assert.equal(manifest.base, env.base);
    assert.equal(recorded.files_total, manifest.files.length);
    assert.deepEqual(recorded.files.map((f) => f.path), manifest.files.map((f) => f.path));

    // git's own view of the same edits, made by hand in a checkout of the base.
    const byHand = join(env.root, "by-hand");
    git(env.repo, "worktree", "add", "--detach", "-q", byHand, env.base);
    applyByHand(byHand, EVERY_KIND);
    fs.writeFileSync(join(byHand, "repo-probe.txt"), ""); // the agent saw nothing of the repository
    git(byHand, "add", "-A");
    const nameStatus = git(byHand, "diff", "--cached", "-M", "--name-status", "-z", env.base).split("\0").filter((s) => s !== "");
    const expected = new Map<string, string>();
    for (let i = 0; i < nameStatus.length; ) {
      const letter = nameStatus[i++]!.charAt(0);
      if (letter === "R") {
        i++;
        expected.set(nameStatus[i++]!, "renamed");
      } else expected.set(nameStatus[i++]!, { A: "added", D: "deleted", M: "modified", T: "modified" }[letter] ?? letter);
    }
    assert.deepEqual(new Map(manifest.files.map((f) => [f.path, f.status])), expected);

    const file = (p: string) => manifest.files.find((f) => f.path === p)!;
    assert.equal(file("sub/moved.txt").old_path, "move.txt");
    assert.deepEqual([file("run.sh").old_mode, file("run.sh").new_mode], ["100644", "100755"]);
    assert.equal(file("blob.bin").binary, true);
    assert.equal(file("blob.bin").lines_added, null);
    assert.deepEqual([file("a.txt").lines_added, file("a.txt").lines_deleted], [2, 1]);
    assert.deepEqual([file("link").new_mode, file("link").symlink_target], ["120000", "run.sh"]);
    assert.equal(file("new-link").symlink_target, "new/untracked.txt");
    assert.equal(file("new/untracked.txt").new_sha256, `sha256:${createHash("sha256").update("fresh\n").digest("hex")}`);
    assert.equal(file("repo-probe.txt").new_size, 0, "the confined agent could not see the repository or its .git");
    assert.ok(!manifest.files.some((f) => f.path === "debug.log"), "ignored files are not part of the change set");
    // Every new side's bytes are stored and check against their digests.
    for (const f of manifest.files) if (f.new_sha256 !== null) await env.warden.changes.blob(run_id, f.new_sha256);

    // The stored patch, applied to a clean checkout of the base, gives the tree git's view has.
    const patch = await env.warden.changes.blob(run_id, manifest.patch.sha256);
    const applied = join(env.root, "applied");
    git(env.repo, "worktree", "add", "--detach", "-q", applied, env.base);
    fs.writeFileSync(join(env.root, "run.patch"), patch);
    git(applied, "apply", "--binary", join(env.root, "run.patch"));
    assert.deepEqual(treeOf(applied), treeOf(byHand));

    // The repository's own checkout is as it was, and the run's worktree is gone.
    assert.equal(git(env.repo, "rev-parse", "HEAD"), headBefore);
    assert.equal(git(env.repo, "status", "--porcelain"), "");
    assert.ok(!fs.existsSync(join(env.root, "home", "worktrees", run_id)), "the worktree is removed once its change set is stored");
    assert.ok(!git(env.repo, "worktree", "list", "--porcelain").includes(run_id), "git's record of it too");
  });

  test("two runs at once on one repository each get exactly their own change set", async (t) => {
    const env = await setup(t);
    const ops = (who: string): Op[] => [
      { op: "gate" },
      { op: "write", path: "a.txt", base64: b64(`written by ${who}\n`) },
      { op: "write", path: `only-${who}.txt`, base64: b64(`${who}\n`) },
    ];
    const first = run(env, ops("first"));
    const second = run(env, ops("second"));
    // Both agents are running before either may write: the runs overlap.
    await waitFor("both agents launched", () => (env.launched.length === 2 ? true : undefined));
    for (const runId of env.launched) fs.writeFileSync(join(env.root, "home", "worktrees", runId, ".gate"), "");
    const runs = await Promise.all([first, second]);
    for (const [who, r] of [["first", runs[0]], ["second", runs[1]]] as const) {
      assert.equal(r.outcome.status, "recorded", JSON.stringify(r.outcome));
      const { manifest } = await env.warden.changes.read(r.run_id);
      assert.deepEqual(manifest.files.map((f) => [f.path, f.status]), [["a.txt", "modified"], [`only-${who}.txt`, "added"]]);
      const a = manifest.files[0]!;
      assert.equal((await env.warden.changes.blob(r.run_id, a.new_sha256!)).toString(), `written by ${who}\n`);
    }
    assert.equal(git(env.repo, "status", "--porcelain"), "", "the repository's checkout is untouched");
    assert.equal(fs.readFileSync(join(env.repo, "a.txt"), "utf8"), "one\ntwo\nthree\n");
  });

  test("a run that changes nothing says so; a base names the commit; bad bases are refused before any claim", async (t) => {
    const env = await setup(t);
    fs.writeFileSync(join(env.repo, "a.txt"), "moved on\n");
    git(env.repo, "commit", "-qam", "second");
    const { run_id, outcome } = await run(env, [], { base: "main~1" });
    assert.equal(outcome.status, "recorded");
    const changes = eventsOf(await env.warden.readJournal(run_id)).find((e) => e.type === "run.changes");
    assert.ok(changes !== undefined && "no_changes" in changes);
    assert.equal(changes.no_changes, true);
    assert.deepEqual(changes.files, []);
    assert.equal(changes.base, env.base, "main~1 resolved to the first commit");

    for (const [request, code] of [
      [{ base: "no-such-ref" }, "workspace-base-unknown"],
      [{ base: "--output=/tmp/x" }, "invoke-base-invalid"],
      [{ base: "HEAD", workspace: "plain" }, "workspace-not-git"],
    ] as const) {
      const id = randomUUID();
      await assert.rejects(env.warden.start(SCOPE, id, { provider: "claude", prompt: "x", ...request }), (e: { code?: string; status?: number }) => e.code === code && e.status === 422);
      assert.equal(await env.warden.lookup(SCOPE, id), undefined, `${code}: nothing claimed`);
    }
    // A plain directory runs as before: no base, no change set.
    const plain = await run(env, [], { workspace: "plain" });
    assert.equal(plain.outcome.status, "recorded");
    assert.ok(!eventsOf(await env.warden.readJournal(plain.run_id)).some((e) => e.type === "run.changes"));
    await assert.rejects(env.warden.changes.read(plain.run_id), (e: { code?: string }) => e.code === "run-changes-not-found");
  });

  test("a worktree the agent nested deeper than a path can name is removed, and a node restarted on its home sweeps the next one", async (t) => {
    const env = await setup(t);
    // Under an ignored name (*.log), so the change set is the edit alone; 3,000 levels is past
    // what a removal by path (or Node's recursive rm, whose stack it overflows) can take.
    const nest: Op[] = [
      { op: "nest", path: "deep.log", depth: 3000 },
      { op: "write", path: "a.txt", base64: b64("changed\n") },
    ];
    const { run_id, outcome } = await run(env, nest);
    assert.equal(outcome.status, "recorded", JSON.stringify(outcome));
    assert.deepEqual((await env.warden.changes.read(run_id)).manifest.files.map((f) => f.path), ["a.txt"]);
    await waitFor("the deep worktree removed", () => (fs.existsSync(join(env.root, "home", "worktrees", run_id)) ? undefined : true));
    // A worktree left by a node that died is swept at the next start: one nested as deep.
    const left = join(env.root, "home", "worktrees", randomUUID());
    fs.mkdirSync(left);
    const built = spawnSync(process.execPath, ["-e", 'const fs = require("node:fs"); process.chdir(process.argv[1]); for (let i = 0; i < 3000; i++) { fs.mkdirSync("d"); process.chdir("d"); }', left], { encoding: "utf8" });
    assert.equal(built.status, 0, built.stderr);
    await env.warden.close();
    const again = await openWarden({ home: join(env.root, "home"), workspaces: { repo: env.repo }, defaultWorkspace: "repo", providers: { claude: { command: join(env.root, "agents", "editing-agent.mjs") } } });
    await again.close();
    assert.equal(fs.existsSync(left), false, "the start swept the deep worktree");
  });

  test("a change set past limits.changeSetBytes is refused from git's object sizes, before any content is read; the run is recorded, its worktree kept until its result is pruned; the repository's objects are untouched", async (t) => {
    const env = await setup(t, false, { changeSetBytes: 1024 * 1024 });
    const objects = (): string => git(env.repo, "count-objects", "-v");
    const before = objects();
    const { run_id, outcome } = await run(env, [
      { op: "bytes", path: "big.bin", size: 3 * 1024 * 1024 },
      { op: "write", path: "a.txt", base64: b64("changed\n") },
    ]);
    assert.equal(outcome.status, "recorded", JSON.stringify(outcome));
    const changes = eventsOf(await env.warden.readJournal(run_id)).find((e) => e.type === "run.changes") as { error?: { code: string; detail: string } } | undefined;
    assert.equal(changes?.error?.code, "change-set-too-large", JSON.stringify(changes));
    assert.match(changes.error.detail, /^the run's changed files hold 31457\d\d bytes \(both sides\), over 1048576 \(limits\.changeSetBytes\)$/);
    // The worktree is the only copy of the agent's work now: kept, and the answer says where.
    const kept = join(env.root, "home", "worktrees", run_id);
    assert.equal(fs.statSync(join(kept, "big.bin")).size, 3 * 1024 * 1024);
    await assert.rejects(env.warden.changes.read(run_id), (e: unknown) => (e as { code?: string }).code === "run-changes-not-found" && (e as Error).message.includes(`its worktree is kept at ${kept} until its result is pruned`));
    // The agent's 3 MiB went into the run's own object directory: the repository's object store
    // did not grow by a byte.
    assert.equal(objects(), before);
    // A restart keeps it; the retention pass that prunes the run's result removes it.
    await env.warden.close();
    const options = { home: join(env.root, "home"), workspaces: { repo: env.repo }, defaultWorkspace: "repo", providers: { claude: { command: join(env.root, "agents", "editing-agent.mjs") } } };
    const again = await openWarden({ ...options, limits: { changeSetBytes: 1024 * 1024 } });
    await again.close();
    assert.ok(fs.existsSync(kept), "the start swept the worktree of a run whose result is kept");
    const pruning = await openWarden({ ...options, limits: { changeSetBytes: 1024 * 1024, resultRetentionMs: 1 }, retentionIntervalMs: 50 });
    try {
      await waitFor("retention to remove the worktree of the run whose result it pruned", () => (fs.existsSync(kept) ? undefined : true));
      assert.equal(objects(), before);
    } finally {
      await pruning.close();
    }
  });

  test("an agent that rewrites its worktree's .git to a repository of its own gets no command run by the node's git", async (t) => {
    const env = await setup(t);
    const marker = join(env.root, "pwned");
    const hook = `#!/bin/sh\necho pwned > ${marker}\n`;
    const ops: Op[] = [
      { op: "write", path: "evil/HEAD", base64: b64("ref: refs/heads/main\n") },
      { op: "write", path: "evil/objects/.keep", base64: b64("") },
      { op: "write", path: "evil/refs/heads/.keep", base64: b64("") },
      { op: "write", path: "evil/fsmonitor.sh", base64: b64(hook), mode: 0o755 },
      { op: "write", path: "evil/config", base64: b64("[core]\n\trepositoryformatversion = 0\n\tfsmonitor = {cwd}/evil/fsmonitor.sh\n") },
      { op: "write", path: ".git", base64: b64("gitdir: evil\n") },
      { op: "write", path: "a.txt", base64: b64("changed\n") },
    ];
    const { run_id, outcome } = await run(env, ops);
    assert.equal(outcome.status, "recorded", JSON.stringify(outcome));
    assert.ok(!fs.existsSync(marker), "the agent's fsmonitor hook never ran on the node");
    const { manifest } = await env.warden.changes.read(run_id);
    assert.equal(manifest.base, env.base);
    const paths = manifest.files.map((f) => f.path);
    assert.ok(paths.includes("a.txt") && paths.includes("evil/config"), paths.join(", "));
    assert.equal(git(env.repo, "status", "--porcelain"), "");
  });
});
