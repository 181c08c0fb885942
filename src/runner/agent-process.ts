/**
 * One provider CLI as a child process in its own process group, so a timeout (or the run's end)
 * can stop everything it started — MCP servers, shells, subagents — with one signal to the group.
 * stdin is /dev/null: a non-interactive agent must never wait for input (codex exec reads stdin
 * when it is a pipe).
 */
import { spawn, type ChildProcess } from "node:child_process";
import { closeSync, openSync } from "node:fs";
import { errnoCode } from "../core/errors.js";
import { PROC, procStat } from "./proc-stat.js";
import { RUN_TAG_VAR, killRunStragglers } from "./stragglers.js";

export interface AgentExit {
  /** false when the command could not be started at all (ENOENT, EACCES): nothing ran */
  readonly spawned: boolean;
  readonly exit_code: number | null;
  readonly signal: NodeJS.Signals | null;
  readonly timed_out: boolean;
  /** errno code of a spawn failure */
  readonly spawn_error?: string;
  /** processes that left the agent's group, found by the run tag and killed when it exited */
  readonly stragglers_killed: number;
  /**
   * true when the agent's output was still held open, by a process outside its group that no
   * kill could find, for the grace period after it exited: reading was cut off, and what that
   * process does is not known
   */
  readonly output_held_open: boolean;
}

export interface AgentSpawn {
  readonly command: string;
  readonly args: readonly string[];
  readonly cwd: string;
  /** the run's private home (HOME): a sandbox around the agent binds it read-write */
  readonly home?: string;
  readonly env: NodeJS.ProcessEnv;
  readonly timeoutMs: number;
  /** time between SIGTERM and SIGKILL of the group on timeout */
  readonly killGraceMs: number;
  /**
   * Given to the agent as RUN_TAG_VAR: when it exits, the processes still carrying it — those
   * that left its process group — are killed too (stragglers.ts).
   */
  readonly runTag?: string;
  /**
   * Called with the pid synchronously right after the fork, before this process returns to its
   * event loop: the child cannot have been reaped yet, so /proc still shows it. Must not throw.
   */
  readonly onSpawn?: (pid: number) => void;
  /** a file the child gets open for reading as its fd 3 (a sandbox's seccomp program) */
  readonly fd3?: string;
}

/** Least time the output must stay quiet after the agent's exit before it is cut off. */
const MIN_QUIET_MS = 500;

function bytesRead(child: ChildProcess): number {
  return [child.stdout, child.stderr].reduce((sum, s) => sum + ((s as { bytesRead?: number } | null)?.bytesRead ?? 0), 0);
}

/** A reader paused (its consumer is writing what came) or with bytes not yet consumed is not idle. */
function behind(child: ChildProcess): boolean {
  return [child.stdout, child.stderr].some((s) => s !== null && (s.readableFlowing === false || s.readableLength > 0));
}

export class AgentProcess {
  readonly child: ChildProcess;
  readonly #exit: Promise<AgentExit>;
  #timedOut = false;

  private constructor(child: ChildProcess, exit: Promise<AgentExit>) {
    this.child = child;
    this.#exit = exit;
  }

  /** Spawns the agent; resolves once it is running (or known not to have started). */
  static start(options: AgentSpawn): Promise<AgentProcess> {
    const fd3 = options.fd3 === undefined ? undefined : openSync(options.fd3, "r");
    let child: ChildProcess;
    try {
      child = spawn(options.command, [...options.args], {
        cwd: options.cwd,
        env: options.runTag === undefined ? options.env : { ...options.env, [RUN_TAG_VAR]: options.runTag },
        detached: true, // its own process group (setsid): the group id is its pid
        stdio: fd3 === undefined ? ["ignore", "pipe", "pipe"] : ["ignore", "pipe", "pipe", fd3],
      });
    } finally {
      // The child has its own copy (or none: it did not start).
      if (fd3 !== undefined) closeSync(fd3);
    }
    if (child.pid !== undefined) options.onSpawn?.(child.pid);
    // Read before this process returns to its event loop, which could reap the child: /proc
    // still shows it. Its descendants, the only processes that can carry its run tag, start later.
    const agentStartTicks = child.pid !== undefined && options.runTag !== undefined ? procStat(PROC, child.pid)?.startTicks : undefined;
    let agent!: AgentProcess;
    const exit = new Promise<AgentExit>((resolve) => {
      let spawned = false;
      let timer: NodeJS.Timeout | undefined;
      let killer: NodeJS.Timeout | undefined;
      let holder: NodeJS.Timeout | undefined;
      let exited = false;
      let stragglers = 0;
      let heldOpen = false;
      const cutOutput = (): void => {
        heldOpen = true;
        // 'close' waits for both streams: destroyed, they close, whoever still holds the pipes.
        child.stdout?.destroy();
        child.stderr?.destroy();
      };

      child.once("spawn", () => {
        spawned = true;
        timer = setTimeout(() => {
          // Past its exit, only a holder of its output is left: it cannot outlast the timeout.
          if (exited) return cutOutput();
          agent.#timedOut = true;
          agent.signalGroup("SIGTERM");
          killer = setTimeout(() => agent.signalGroup("SIGKILL"), options.killGraceMs);
        }, options.timeoutMs);
      });
      child.once("error", (error) => {
        if (spawned) return; // a later error (e.g. a failed kill) does not change how it ended
        resolve({
          spawned: false,
          exit_code: null,
          signal: null,
          timed_out: false,
          spawn_error: errnoCode(error) ?? "spawn-failed",
          stragglers_killed: 0,
          output_held_open: false,
        });
      });
      // 'close' comes after 'exit' and after stdout/stderr ended: nothing more will arrive.
      child.once("close", (code, signal) => {
        clearTimeout(timer);
        clearTimeout(killer);
        clearInterval(holder);
        if (!spawned) return;
        resolve({ spawned: true, exit_code: code, signal, timed_out: agent.#timedOut, stragglers_killed: stragglers, output_held_open: heldOpen });
      });
      child.once("exit", () => {
        if (!spawned) return;
        exited = true;
        // Whatever the agent left running in its group (servers, shells) ends with it, and so do
        // those that left the group; this also closes pipes they held open, so 'close' can come.
        agent.signalGroup("SIGKILL");
        if (options.runTag !== undefined) stragglers = killRunStragglers(options.runTag, { agentGroup: child.pid, agentStartTicks }).length;
        // What still holds the output open was not found: once nothing more has come for the
        // quiet period while we kept up reading, stop reading, or 'close' would never come.
        const quietMs = Math.max(options.killGraceMs, MIN_QUIET_MS);
        let read = bytesRead(child);
        let since = Date.now();
        holder = setInterval(() => {
          const now = bytesRead(child);
          if (now !== read || behind(child)) {
            read = now;
            since = Date.now();
          } else if (Date.now() - since >= quietMs) {
            cutOutput();
          }
        }, quietMs / 4);
      });
    });
    agent = new AgentProcess(child, exit);
    return new Promise((resolve) => {
      child.once("spawn", () => resolve(agent));
      child.once("error", () => resolve(agent));
    });
  }

  get pid(): number | undefined {
    return this.child.pid;
  }

  /**
   * Sends `signal` to the agent's whole process group. Never throws: it runs from timers and
   * exit handlers, and a group that is already gone (ESRCH) is the goal, not a failure.
   */
  signalGroup(signal: NodeJS.Signals): boolean {
    const pid = this.child.pid;
    if (pid === undefined) return false;
    try {
      process.kill(-pid, signal);
      return true;
    } catch {
      return false;
    }
  }

  /** Stops the agent now (the journal can no longer follow it, or the run was cancelled). */
  kill(): void {
    this.signalGroup("SIGKILL");
  }

  exited(): Promise<AgentExit> {
    return this.#exit;
  }
}
