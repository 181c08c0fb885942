/**
 * The node's reading and keeping of change sets (DESIGN.md "Change sets"): a run's change set by
 * its journal's `run.changes`, an unresolved run's worktree as it stands (for `inspect`), and the
 * removal of worktrees once their run is settled — at start-up and after a reconciliation.
 */
import { isDigest, type Digest } from "../core/digest.js";
import { NotFoundError } from "../core/errors.js";
import type { ChangeSetManifest, ChangeStatus } from "../changes/format.js";
import { manifestBlobs } from "../changes/format.js";
import type { RunWorktrees } from "../changes/run-worktrees.js";
import type { ChangeStore } from "../changes/store.js";
import type { JournalEvent, RunChangesEvent, RunStartedEvent } from "../journal/types.js";
import type { ExistingOutcome } from "../invocations/types.js";

export interface RunChangesSources {
  readonly worktrees: RunWorktrees;
  /** the configured workspaces' directories */
  readonly workspacePaths: () => readonly string[];
  readonly readJournal: (runId: string) => Promise<Uint8Array | undefined>;
  readonly lookup: (scope: string, id: string) => Promise<ExistingOutcome | undefined>;
}

/** `GET /v1/runs/{id}/changes?stat`: what changed, without the contents. */
export interface ChangeStat {
  readonly run_id: string;
  readonly change_set: Digest;
  readonly base: string;
  readonly files_total: number;
  readonly files: readonly {
    path: string;
    old_path: string | null;
    status: ChangeStatus;
    binary: boolean;
    lines_added: number | null;
    lines_deleted: number | null;
  }[];
  readonly lines_added: number;
  readonly lines_deleted: number;
}

export interface RunChangeSet {
  readonly run_id: string;
  readonly change_set: Digest;
  readonly manifest: ChangeSetManifest;
}

function notFound(runId: string, why: string): NotFoundError {
  return new NotFoundError("run-changes-not-found", `run ${runId} has no change set on this node: ${why}`, { details: { run_id: runId } });
}

/** The events of the node's own journal, in order (its lines are checked when the journal is verified; here only read). */
function events(bytes: Uint8Array): JournalEvent[] {
  const out: JournalEvent[] = [];
  for (const line of Buffer.from(bytes).toString("utf8").split("\n")) {
    if (line === "") continue;
    try {
      out.push((JSON.parse(line) as { entry: { event: JournalEvent } }).entry.event);
    } catch {
      break; // an incomplete last line: a node died writing it
    }
  }
  return out;
}

export class RunChanges {
  readonly #s: RunChangesSources;

  constructor(sources: RunChangesSources) {
    this.#s = sources;
  }

  /** Where change sets are stored (by digest): what a review's evidence names can be read back. */
  get store(): ChangeStore {
    return this.#s.worktrees.store;
  }

  async #events(runId: string): Promise<JournalEvent[]> {
    const bytes = await this.#s.readJournal(runId);
    if (bytes === undefined) throw notFound(runId, "no such run");
    return events(bytes);
  }

  /** The run's stored change set, checked against the digest its journal names. */
  async read(runId: string): Promise<RunChangeSet> {
    const recorded = (await this.#events(runId)).find((e): e is RunChangesEvent => e.type === "run.changes");
    if (recorded === undefined) throw notFound(runId, "its journal has no run.changes (a plain-directory workspace, or a run not ended)");
    if (!("change_set" in recorded) || !isDigest(recorded.change_set)) {
      const kept = await this.#s.worktrees.find(runId, this.#s.workspacePaths()).catch(() => undefined);
      const where = kept === undefined ? "" : `; its worktree is kept at ${kept.path} until its result is pruned`;
      throw notFound(runId, `its change set could not be made (${"error" in recorded ? recorded.error.code : "unknown"})${where}`);
    }
    const manifest = await this.#s.worktrees.store.manifest(recorded.change_set);
    return { run_id: runId, change_set: recorded.change_set, manifest };
  }

  async stat(runId: string): Promise<ChangeStat> {
    const { change_set, manifest } = await this.read(runId);
    const files = manifest.files.map((f) => ({ path: f.path, old_path: f.old_path, status: f.status, binary: f.binary, lines_added: f.lines_added, lines_deleted: f.lines_deleted }));
    return {
      run_id: runId,
      change_set,
      base: manifest.base,
      files_total: files.length,
      files,
      lines_added: files.reduce((n, f) => n + (f.lines_added ?? 0), 0),
      lines_deleted: files.reduce((n, f) => n + (f.lines_deleted ?? 0), 0),
    };
  }

  /** One blob of the run's change set (a new file's bytes, or the patch), checked as it is read. */
  async blob(runId: string, digest: Digest): Promise<Buffer> {
    const { manifest } = await this.read(runId);
    const named = manifestBlobs(manifest).find((b) => b.digest === digest);
    if (named === undefined) throw new NotFoundError("run-changes-blob-not-found", `the change set of run ${runId} names no blob ${digest}`, { details: { run_id: runId, digest } });
    return this.#s.worktrees.store.blob(digest, named.size);
  }

  /** The worktree of an unresolved run as it stands, stored as a change set; undefined when it has none here. */
  async ofWorktree(runId: string): Promise<RunChangesEvent | undefined> {
    const wt = await this.#s.worktrees.find(runId, this.#s.workspacePaths());
    if (wt === undefined) return undefined;
    const started = (await this.#events(runId)).find((e): e is RunStartedEvent => e.type === "run.started");
    if (started?.base === undefined) return undefined;
    return (await this.#s.worktrees.record(wt, started.base)).event;
  }

  /** Removes a settled run's worktree (after its reconciliation); a run without one is fine. */
  async release(runId: string): Promise<void> {
    const wt = await this.#s.worktrees.find(runId, this.#s.workspacePaths());
    if (wt !== undefined) await this.#s.worktrees.remove(wt);
  }

  /**
   * At start, and after each retention pass: every worktree goes but those of runs still
   * unresolved (or running, or parked), and of recorded runs whose change set could not be made
   * while their result is kept (the worktree is then the only copy of the agent's work).
   */
  sweep(): Promise<string[]> {
    return this.#s.worktrees.sweep(this.#s.workspacePaths(), async (runId) => {
      // What cannot be read now (the store unavailable) is kept: the next sweep decides.
      let events: JournalEvent[];
      try {
        events = await this.#events(runId);
      } catch (error) {
        return !(error instanceof NotFoundError);
      }
      const started = events.find((e): e is RunStartedEvent => e.type === "run.started");
      // A journal that names no invocation: a stray.
      if (started === undefined) return false;
      let outcome: ExistingOutcome | undefined;
      try {
        outcome = await this.#s.lookup(started.invocation.scope, started.invocation.id);
      } catch {
        return true;
      }
      // No claim (retention pruned it): a settled run's worktree is no one's evidence any more.
      if (outcome === undefined) return false;
      if (outcome.status === "recorded") return !outcome.expired && events.some((e) => e.type === "run.changes" && "error" in e);
      return outcome.status === "unresolved" || outcome.status === "in_progress" || outcome.status === "awaiting_approval";
    });
  }
}
