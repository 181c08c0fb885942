/**
 * One provider CLI as a child process in its own process group, so a timeout (or the run's end)
 * can stop everything it started — MCP servers, shells, subagents — with one signal to the group.
 * stdin is /dev/null: a non-interactive agent must never wait for input (codex exec reads stdin
 * when it is a pipe).
 */
import { spawn, type ChildProcess } from "node:child_process";
import { errnoCode } from "../core/errors.js";

export interface AgentExit {
  /** false when the command could not be started at all (ENOENT, EACCES): nothing ran */
  readonly spawned: boolean;
  readonly exit_code: number | null;
  readonly signal: NodeJS.Signals | null;
  readonly timed_out: boolean;
  /** errno code of a spawn failure */
  readonly spawn_error?: string;
}

export interface AgentSpawn {
  readonly command: string;
  readonly args: readonly string[];
  readonly cwd: string;
  readonly env: NodeJS.ProcessEnv;
  readonly timeoutMs: number;
  /** time between SIGTERM and SIGKILL of the group on timeout */
  readonly killGraceMs: number;
  /**
   * Called with the pid synchronously right after the fork, before this process returns to its
   * event loop: the child cannot have been reaped yet, so /proc still shows it. Must not throw.
   */
  readonly onSpawn?: (pid: number) => void;
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
    const child = spawn(options.command, [...options.args], {
      cwd: options.cwd,
      env: options.env,
      detached: true, // its own process group (setsid): the group id is its pid
      stdio: ["ignore", "pipe", "pipe"],
    });
    if (child.pid !== undefined) options.onSpawn?.(child.pid);
    let agent!: AgentProcess;
    const exit = new Promise<AgentExit>((resolve) => {
      let spawned = false;
      let timer: NodeJS.Timeout | undefined;
      let killer: NodeJS.Timeout | undefined;
      child.once("spawn", () => {
        spawned = true;
        timer = setTimeout(() => {
          agent.#timedOut = true;
          agent.signalGroup("SIGTERM");
          killer = setTimeout(() => agent.signalGroup("SIGKILL"), options.killGraceMs);
        }, options.timeoutMs);
      });
      child.once("error", (error) => {
        if (spawned) return; // a later error (e.g. a failed kill) does not change how it ended
        resolve({ spawned: false, exit_code: null, signal: null, timed_out: false, spawn_error: errnoCode(error) ?? "spawn-failed" });
      });
      // 'close' comes after 'exit' and after stdout/stderr ended: nothing more will arrive.
      child.once("close", (code, signal) => {
        clearTimeout(timer);
        clearTimeout(killer);
        if (!spawned) return;
        resolve({ spawned: true, exit_code: code, signal, timed_out: agent.#timedOut });
      });
      child.once("exit", () => {
        // Whatever the agent left running in its group (servers, shells) ends with it; this
        // also closes pipes a straggler held open, so 'close' can come.
        if (spawned) agent.signalGroup("SIGKILL");
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
