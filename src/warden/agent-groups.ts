/**
 * The process groups of agents this node launched (the runner starts each agent as the leader of
 * its own group), each with its run. At shutdown, agents still running past the grace period are
 * killed as whole groups: their runs then end `unresolved` instead of doing work nobody will
 * journal, and the node records which runs' agents it killed (warden/stopped-agents.ts).
 */
export interface KilledGroup {
  readonly run_id: string;
  readonly pids: readonly number[];
}

export class AgentGroups {
  /** group leader pid → its run */
  readonly #groups = new Map<number, string>();

  add(pid: number, runId: string): void {
    this.#groups.set(pid, runId);
  }

  /** Forgets groups that no longer exist (their agent exited and the runner killed the rest). */
  prune(): void {
    for (const pid of this.#groups.keys()) if (!groupAlive(pid)) this.#groups.delete(pid);
  }

  /** Kills every group still alive; returns those it signalled, by run. */
  killAll(): KilledGroup[] {
    const killed = new Map<string, number[]>();
    for (const [pid, runId] of this.#groups) {
      try {
        process.kill(-pid, "SIGKILL");
        killed.set(runId, [...(killed.get(runId) ?? []), pid]);
      } catch {
        // already gone
      }
    }
    this.#groups.clear();
    return [...killed].map(([run_id, pids]) => ({ run_id, pids }));
  }
}

function groupAlive(pid: number): boolean {
  try {
    process.kill(-pid, 0);
    return true;
  } catch {
    return false;
  }
}
