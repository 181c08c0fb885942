/**
 * A git repository and an agent that edits its worktree as told, for the change-set tests. The
 * agent (editing-agent.mjs) sits beside a copy of the fixture agents, as a confined run sees its
 * command's directory only: it applies the operations its prompt carries (`OPS=<base64 JSON>`),
 * records what it could see of the repository, then carries on as the claude fixture.
 */
import * as fs from "node:fs";
import { join } from "node:path";
import { execFileSync } from "node:child_process";
import { fileURLToPath } from "node:url";

export const fixtureAgents = fileURLToPath(new URL("../fixtures/agents", import.meta.url));

export type Op =
  | { op: "write"; path: string; base64: string; mode?: number }
  | { op: "rm"; path: string }
  | { op: "mv"; from: string; to: string }
  | { op: "chmod"; path: string; mode: number }
  | { op: "symlink"; target: string; path: string }
  | { op: "nest"; path: string; depth: number }
  | { op: "bytes"; path: string; size: number }
  | { op: "gate" };

const EDITING_AGENT = `#!/usr/bin/env node
import * as fs from "node:fs";
import { dirname, join } from "node:path";
const prompt = process.argv[process.argv.length - 1] ?? "";
const m = /OPS=([A-Za-z0-9+/=]+)/.exec(prompt);
const ops = m === null ? [] : JSON.parse(Buffer.from(m[1], "base64").toString("utf8"));
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
for (const o of ops) {
  if (o.op === "gate") {
    // The test opens the gate once every run it started is running: runs overlap for sure.
    while (!fs.existsSync(".gate")) await sleep(20);
    fs.rmSync(".gate");
  } else if (o.op === "write") {
    fs.mkdirSync(dirname(o.path), { recursive: true });
    // "{cwd}" in a file's text stands for the worktree's path (the same inside the sandbox).
    fs.writeFileSync(o.path, Buffer.from(Buffer.from(o.base64, "base64").toString("latin1").split("{cwd}").join(process.cwd()), "latin1"));
    if (o.mode !== undefined) fs.chmodSync(o.path, o.mode);
  } else if (o.op === "rm") fs.rmSync(o.path);
  else if (o.op === "mv") { fs.mkdirSync(dirname(o.to), { recursive: true }); fs.renameSync(o.from, o.to); }
  else if (o.op === "chmod") fs.chmodSync(o.path, o.mode);
  else if (o.op === "symlink") fs.symlinkSync(o.target, o.path);
  else if (o.op === "bytes") fs.writeFileSync(o.path, (await import("node:crypto")).randomBytes(o.size));
  else if (o.op === "nest") {
    // Directories nested by descending, deeper than a path can name.
    const top = process.cwd();
    fs.mkdirSync(o.path);
    process.chdir(o.path);
    for (let i = 0; i < o.depth; i++) { fs.mkdirSync("d"); process.chdir("d"); }
    process.chdir(top);
  }
}
if (process.env.WARDEN_REPO_PROBE) {
  // What the agent can see of the operator's repository: the test expects nothing.
  let seen = [];
  for (const p of [process.env.WARDEN_REPO_PROBE, join(process.env.WARDEN_REPO_PROBE, ".git")]) if (fs.existsSync(p)) seen.push(p);
  const gitFile = fs.existsSync(".git") ? fs.readFileSync(".git", "utf8").trim().replace(/^gitdir: /, "") : "";
  if (gitFile !== "" && fs.existsSync(gitFile)) seen.push("worktree-gitdir");
  fs.writeFileSync("repo-probe.txt", seen.join("\\n"));
}
await import("./claude.mjs");
`;

/** Copies the fixture agents to `dir` with the editing agent beside them; its path. */
export function editingAgent(dir: string): string {
  fs.cpSync(fixtureAgents, dir, { recursive: true });
  const path = join(dir, "editing-agent.mjs");
  fs.writeFileSync(path, EDITING_AGENT, { mode: 0o755 });
  return path;
}

export function prompt(ops: readonly Op[]): string {
  return `edit the tree OPS=${Buffer.from(JSON.stringify(ops)).toString("base64")}`;
}

export function git(repo: string, ...args: string[]): string {
  return execFileSync("git", ["-C", repo, "-c", "user.name=t", "-c", "user.email=t@example.com", ...args], { encoding: "utf8" });
}

export function b64(text: string | Buffer): string {
  return Buffer.from(text).toString("base64");
}

/** A repository with one commit of files of every kind a change set records. */
export function makeRepo(dir: string): string {
  fs.mkdirSync(dir, { recursive: true });
  git(dir, "init", "-q", "-b", "main");
  fs.writeFileSync(join(dir, "a.txt"), "one\ntwo\nthree\n");
  fs.writeFileSync(join(dir, "gone.txt"), "to be deleted\n");
  fs.writeFileSync(join(dir, "move.txt"), "a file long enough\nthat git sees it\nmoved, not rewritten\n");
  fs.writeFileSync(join(dir, "run.sh"), "echo hi\n");
  fs.writeFileSync(join(dir, "blob.bin"), Buffer.from([0, 1, 2, 3, 255, 0]));
  fs.symlinkSync("a.txt", join(dir, "link"));
  fs.writeFileSync(join(dir, ".gitignore"), "*.log\n");
  git(dir, "add", "-A");
  git(dir, "commit", "-qm", "base");
  return git(dir, "rev-parse", "HEAD").trim();
}
