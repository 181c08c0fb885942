/** What a command needs from its surroundings; tests and the executable supply it. */
import { resolve } from "node:path";

export interface CliIo {
  stdout(text: string): void;
  stderr(text: string): void;
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
    stdout: (text) => void process.stdout.write(text),
    stderr: (text) => void process.stderr.write(text),
    env: process.env,
    cwd: process.cwd(),
  };
}

/** The state directory: --home, else $WARDEN_HOME, else ./.warden. */
export function resolveHome(io: CliIo, flag?: string): string {
  const chosen = flag !== undefined && flag !== "" ? flag : io.env.WARDEN_HOME !== undefined && io.env.WARDEN_HOME !== "" ? io.env.WARDEN_HOME : ".warden";
  return resolve(io.cwd, chosen);
}
