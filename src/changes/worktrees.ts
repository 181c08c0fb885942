/**
 * Git workspaces and the worktree each run gets (DESIGN.md "Change sets"): the base resolved before
 * the claim, `git worktree add --detach` under the node's home, removal once the change set is
 * stored, and the start-up sweep of what a dead node left.
 */
import * as fs from "node:fs";
import { basename, dirname, join, resolve } from "node:path";
import { ValidationError } from "../core/errors.js";
import { ensurePrivateDirSync } from "../storage/secure-fs.js";
import { removeTree } from "../storage/tree-remove.js";
import { git, GitError } from "./git.js";
import { isCommitId } from "./format.js";

/** A workspace that is the top of a git work tree. */
export interface GitWorkspace {
  readonly path: string;
  /** the repository's (common) git directory: where `worktrees/<name>` administrative dirs live */
  readonly commonDir: string;
}

const BASE_MAX_BYTES = 256;

/** Refuses a base that could be read as an option or that carries control characters. */
export function checkBaseRef(base: string): void {
  const bytes = Buffer.byteLength(base, "utf8");
  // eslint-disable-next-line no-control-regex
  if (bytes === 0 || bytes > BASE_MAX_BYTES || base.startsWith("-") || /[\u0000-\u001f\u007f]/.test(base)) {
    throw new ValidationError("invoke-base-invalid", `base must be a git ref or commit of 1–${BASE_MAX_BYTES} bytes, not starting with "-", without control characters`, {
      status: 422,
      details: { field: "base" },
    });
  }
}

/**
 * The workspace as a git repository, or undefined for a plain directory. A directory holding a
 * `.git` that git cannot read (another owner, a broken repository) is an error, not a plain
 * directory: its runs would otherwise lose their change sets without a word.
 */
export async function gitWorkspace(path: string): Promise<GitWorkspace | undefined> {
  if (!fs.existsSync(join(path, ".git"))) return undefined;
  let out: string;
  try {
    out = (await git({ cwd: path, args: ["rev-parse", "--show-toplevel", "--git-common-dir"] })).toString("utf8");
  } catch (error) {
    throw new ValidationError("workspace-git-invalid", `workspace ${path} holds .git, but git cannot read it: ${(error as Error).message}`, { status: 422, cause: error });
  }
  const [top, common] = out.split("\n");
  if (top === undefined || common === undefined) throw new GitError("git-failed", "git rev-parse gave no top level");
  if (fs.realpathSync(top) !== fs.realpathSync(path)) return undefined;
  return { path, commonDir: fs.realpathSync(resolve(path, common)) };
}

/** The commit `base` (default HEAD) names in the workspace, or `workspace-base-unknown` (422). */
export async function resolveBase(ws: GitWorkspace, base: string | undefined): Promise<string> {
  const ref = base ?? "HEAD";
  let out: string;
  try {
    out = (await git({ gitDir: ws.commonDir, args: ["rev-parse", "--verify", "--quiet", "--end-of-options", `${ref}^{commit}`] })).toString("utf8").trim();
  } catch (error) {
    throw new ValidationError("workspace-base-unknown", `base ${JSON.stringify(ref)} names no commit in the workspace's repository`, { status: 422, details: { field: "base" }, cause: error });
  }
  if (!isCommitId(out)) throw new GitError("git-failed", `git rev-parse answered ${JSON.stringify(out)} for ${ref}`);
  return out;
}

/** Where a run's worktree lives, and git's administrative directory for it. */
export interface Worktree {
  readonly path: string;
  readonly adminDir: string;
  readonly workspace: GitWorkspace;
  /**
   * Where the objects the node's git makes for the run's change set go (`git add` of the agent's
   * files), in the administrative directory and removed with it: never the repository's own
   * object store, which the agent's files would otherwise fill (a multi-gigabyte file stays
   * there, unreachable, until a `git gc` prunes it weeks later).
   */
  readonly objectsDir: string;
}

export function worktreeOf(ws: GitWorkspace, worktreesDir: string, runId: string): Worktree {
  const adminDir = join(ws.commonDir, "worktrees", runId);
  return { path: join(worktreesDir, runId), adminDir, workspace: ws, objectsDir: join(adminDir, "warden-objects") };
}

/** The environment that makes git write a run's new objects to its own directory and read the repository's too. */
export function runObjectsEnv(wt: Worktree): Record<string, string> {
  fs.mkdirSync(wt.objectsDir, { recursive: true, mode: 0o700 });
  return { GIT_OBJECT_DIRECTORY: wt.objectsDir, GIT_ALTERNATE_OBJECT_DIRECTORIES: join(wt.workspace.commonDir, "objects") };
}

/** `git worktree add --detach` at `<worktreesDir>/<run id>`; checks git named its metadata after the run. */
export async function addWorktree(ws: GitWorkspace, worktreesDir: string, runId: string, commit: string): Promise<Worktree> {
  ensurePrivateDirSync(worktreesDir, { create: true, recursive: true });
  const wt = worktreeOf(ws, worktreesDir, runId);
  await git({ gitDir: ws.commonDir, cwd: worktreesDir, args: ["worktree", "add", "--detach", "--quiet", wt.path, commit] });
  fs.chmodSync(wt.path, 0o700);
  const recorded = fs.readFileSync(join(wt.adminDir, "gitdir"), "utf8").trim();
  if (recorded !== join(wt.path, ".git")) throw new GitError("git-failed", `git put the worktree's metadata elsewhere than ${wt.adminDir}`);
  return wt;
}

/** Removes a run's worktree and git's record of it; a worktree already gone is fine. */
export async function removeWorktree(wt: Worktree): Promise<void> {
  if (fs.existsSync(wt.adminDir)) {
    await git({ gitDir: wt.workspace.commonDir, cwd: dirname(wt.path), args: ["worktree", "remove", "--force", "--force", wt.path] }).catch(() => undefined);
  }
  // Whatever git left (the agent may have made the tree unreadable to it, or nested it deeper
  // than a path can name): by descriptor, no symlink followed (storage/tree-remove.ts).
  await removeTree(wt.path);
  await removeTree(wt.adminDir);
}

/** The run ids that have a worktree directory here. */
export function worktreeRuns(worktreesDir: string): string[] {
  try {
    return fs.readdirSync(worktreesDir).filter((name) => basename(name) === name && !name.startsWith("."));
  } catch {
    return [];
  }
}
