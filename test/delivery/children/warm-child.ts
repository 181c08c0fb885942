/**
 * A child process started ahead of time (loading its modules takes a while), that waits for its
 * parameters on stdin: the crash tests start the next child while the current one runs, and kill
 * it (SIGKILL) at a chosen moment. `WarmChild` is the parent's side;
 * `awaitParams` (await-params.ts, apart so that the child loads none of this) the child's.
 * The child script is given bundled (test/support/bundle.ts's bundledScript), run by plain node,
 * not through tsx: a crash test starts dozens, and under tsx each spent about 0.9 s of CPU
 * loading, bundled 0.25 s.
 */
import { spawn, type ChildProcessWithoutNullStreams } from "node:child_process";
import { createInterface } from "node:readline";

export class WarmChild {
  readonly #proc: ChildProcessWithoutNullStreams;
  readonly lines: string[] = [];
  /** When each line arrived (performance.now()). */
  readonly times: number[] = [];
  readonly #waiters: Array<() => void> = [];
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  stderr = "";

  /** `script`: a JavaScript file node runs (bundledScript's). */
  constructor(script: string) {
    this.#proc = spawn(process.execPath, [script], { stdio: ["pipe", "pipe", "pipe"] });
    createInterface({ input: this.#proc.stdout }).on("line", (line) => {
      this.lines.push(line);
      this.times.push(performance.now());
      for (const wake of this.#waiters.splice(0)) wake();
    });
    this.#proc.stderr.on("data", (d: Buffer) => (this.stderr += d.toString()));
    this.exited = new Promise((resolve) => this.#proc.on("exit", (code, signal) => resolve({ code, signal })));
  }

  /** Resolves true once `line` was printed, false if the child exits first. */
  async printed(line: string): Promise<boolean> {
    const gone = this.exited.then(() => false);
    while (!this.lines.includes(line)) {
      const more = new Promise<true>((resolve) => this.#waiters.push(() => resolve(true)));
      if (!(await Promise.race([more, gone]))) return this.lines.includes(line);
    }
    return true;
  }

  start(params: object): void {
    this.#proc.stdin.end(`${JSON.stringify(params)}\n`);
  }

  kill(): void {
    this.#proc.kill("SIGKILL");
  }

  /** Milliseconds between two printed lines. */
  between(first: string, last: string): number {
    return this.times[this.lines.indexOf(last)]! - this.times[this.lines.indexOf(first)]!;
  }
}
