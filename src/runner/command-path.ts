/**
 * Whether a provider's command can be started here, checked before an invocation claims its id:
 * a node whose CLI is missing (not installed, a typo in `--provider`) would otherwise record the
 * run as a failure and use the id up for good, for a run that could never have started.
 */
import * as fs from "node:fs";
import { delimiter, isAbsolute, join } from "node:path";

/** The executable file `command` names, as the spawn would find it (PATH of `env`), or undefined. */
export function findCommand(command: string, env: Readonly<Record<string, string | undefined>>, cwd: string): string | undefined {
  if (command.includes("/")) {
    const path = isAbsolute(command) ? command : join(cwd, command);
    return executableFile(path) ? path : undefined;
  }
  for (const dir of (env.PATH ?? "").split(delimiter)) {
    if (dir === "") continue;
    const path = join(dir, command);
    if (executableFile(path)) return path;
  }
  return undefined;
}

function executableFile(path: string): boolean {
  try {
    if (!fs.statSync(path).isFile()) return false;
    fs.accessSync(path, fs.constants.X_OK);
    return true;
  } catch {
    return false;
  }
}
