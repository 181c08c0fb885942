/** What a command needs from its surroundings; tests and the executable supply it. */
import { resolve } from "node:path";

export interface CliIo {
  stdout(text: string): void;
  stderr(text: string): void;
  /** stdout is a terminal: text an agent wrote is shown with its control characters made visible (terminal-text.ts) */
  readonly terminal?: boolean;
  readonly env: Readonly<Record<string, string | undefined>>;
  readonly cwd: string;
}

export interface CliContext {
  readonly io: CliIo;
  /** Set by the command that ran: 0 success, 1 failure, 2 in progress / unresolved (DESIGN.md "CLI"). */
  exitCode: number;
}

export function processIo(): CliIo {
  return {
    stdout: writerTo(process.stdout),
    stderr: writerTo(process.stderr),
    terminal: process.stdout.isTTY === true,
    env: process.env,
    cwd: process.cwd(),
  };
}

/**
 * A writer to a standard stream whose reader may go first (`warden invocations | head -1`): the
 * EPIPE then arrives as an 'error' event, which unhandled would end the command with a stack trace.
 * What the reader no longer wants is dropped, and the command still ends with its own exit code.
 */
function writerTo(stream: NodeJS.WriteStream): (text: string) => void {
  let open = true;
  stream.on("error", (error: NodeJS.ErrnoException) => {
    open = false;
    if (error.code !== "EPIPE" && stream !== process.stderr) process.stderr.write(`warden: cannot write output: ${error.message}\n`);
  });
  return (text) => {
    if (open) stream.write(text);
  };
}

/** The state directory: --home, else $WARDEN_HOME, else ./.warden. */
export function resolveHome(io: CliIo, flag?: string): string {
  const chosen = flag !== undefined && flag !== "" ? flag : io.env.WARDEN_HOME !== undefined && io.env.WARDEN_HOME !== "" ? io.env.WARDEN_HOME : ".warden";
  return resolve(io.cwd, chosen);
}
