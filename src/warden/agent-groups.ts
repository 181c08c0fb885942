/**
 * The process groups of agents this node launched (the runner starts each agent as the leader of
 * its own group). At shutdown, agents still running past the grace period are killed as whole
 * groups: their runs then end `unresolved` instead of doing work nobody will journal.
 */
export class AgentGroups {
  readonly #pids = new Set<number>();

  add(pid: number): void {
    this.#pids.add(pid);
  }

  /** Forgets groups that no longer exist (their agent exited and the runner killed the rest). */
  prune(): void {
    for (const pid of this.#pids) if (!groupAlive(pid)) this.#pids.delete(pid);
  }

  killAll(): void {
    for (const pid of this.#pids) {
      try {
        process.kill(-pid, "SIGKILL");
      } catch {
        // already gone
      }
    }
    this.#pids.clear();
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
