/**
 * The node's side of change sets: which workspaces are git repositories, each run's worktree
 * under `<home>/worktrees`, the change set computed and stored when the run ends, and the
 * worktrees a dead node left behind (DESIGN.md "Change sets").
 */
import * as fs from "node:fs";
import { join } from "node:path";
import { isWardenError, ValidationError } from "../core/errors.js";
import type { Digest } from "../core/digest.js";
import { removeTree } from "../storage/tree-remove.js";
import { ChangeStore } from "./store.js";
import { computeChangeSet } from "./compute.js";
import { runChangesEvent, type ChangeSetManifest, type RunChangesEvent } from "./format.js";
import { addWorktree, checkBaseRef, gitWorkspace, removeWorktree, resolveBase, worktreeOf, worktreeRuns, type GitWorkspace, type Worktree } from "./worktrees.js";

/** What start() learned of a git workspace before the claim. */
export interface PlannedWorktree {
  readonly workspace: GitWorkspace;
  readonly base: string;
}

export class RunWorktrees {
  readonly dir: string;
  readonly store: ChangeStore;

  readonly #maxBytes: number | undefined;

  /**
   * `home`: the node's home; worktrees go to `<home>/worktrees`, change sets to `<home>/changes`;
   * `maxBytes`: limits.changeSetBytes.
   */
  constructor(home: string, maxBytes?: number) {
    this.dir = join(home, "worktrees");
    this.store = new ChangeStore(join(home, "changes"));
    this.#maxBytes = maxBytes;
  }

  /** The run's cwd as the sandbox profile names it (one profile digest across runs). */
  get profilePath(): string {
    fs.mkdirSync(this.dir, { recursive: true, mode: 0o700 });
    return join(fs.realpathSync(this.dir), "{run_id}");
  }

  /**
   * Before the claim: whether the workspace is a git repository and, if so, the commit its run
   * starts from. A base for a plain directory is refused: it could not be honoured.
   */
  async plan(workspacePath: string, base: string | undefined): Promise<PlannedWorktree | undefined> {
    if (base !== undefined) checkBaseRef(base);
    const workspace = await gitWorkspace(workspacePath);
    if (workspace === undefined) {
      if (base !== undefined) {
        throw new ValidationError("workspace-not-git", "the request names a base, but its workspace is not a git repository", { status: 422, details: { field: "base" } });
      }
      return undefined;
    }
    return { workspace, base: await resolveBase(workspace, base) };
  }

  add(planned: PlannedWorktree, runId: string): Promise<Worktree> {
    return addWorktree(planned.workspace, this.dir, runId, planned.base);
  }

  /** The change set of a worktree as it stands, stored; the `run.changes` event that records it (or says why there is none). */
  async record(wt: Worktree, base: string): Promise<{ event: RunChangesEvent; manifest?: ChangeSetManifest; digest?: Digest }> {
    try {
      const { manifest, digest } = await computeChangeSet(wt, base, this.store, this.#maxBytes);
      return { event: runChangesEvent(manifest, digest), manifest, digest };
    } catch (error) {
      const code = isWardenError(error) ? error.code : "change-set-failed";
      return { event: { type: "run.changes", base, error: { code, detail: error instanceof Error ? error.message : String(error) } } };
    }
  }

  remove(wt: Worktree): Promise<void> {
    return removeWorktree(wt);
  }

  /** A run's worktree left on this home, found through a configured workspace's git metadata (never the agent's `.git` file). */
  async find(runId: string, workspacePaths: readonly string[]): Promise<Worktree | undefined> {
    if (!fs.existsSync(join(this.dir, runId))) return undefined;
    for (const path of workspacePaths) {
      const ws = await gitWorkspace(path).catch(() => undefined);
      if (ws === undefined) continue;
      const wt = worktreeOf(ws, this.dir, runId);
      if (fs.existsSync(wt.adminDir)) return wt;
    }
    return undefined;
  }

  /**
   * At start: removes every worktree whose run `keep` does not name (runs still unresolved keep
   * theirs until reconciled). A directory no workspace knows is removed as a stray.
   */
  async sweep(workspacePaths: readonly string[], keep: (runId: string) => Promise<boolean>): Promise<string[]> {
    const removed: string[] = [];
    for (const runId of worktreeRuns(this.dir)) {
      if (await keep(runId)) continue;
      const wt = await this.find(runId, workspacePaths);
      if (wt !== undefined) await this.remove(wt);
      else await removeTree(join(this.dir, runId));
      removed.push(runId);
    }
    return removed;
  }
}
