/**
 * Which executable a provider's command names, found before an invocation claims its id (a node
 * whose CLI is missing — not installed, a typo in `--provider` — would otherwise record the run as
 * a failure and use the id up for good) and then launched, so what was checked is what runs.
 *
 * A command with a `/` is that file. A bare name (`claude`, the default) is looked up first in
 * this package's own `node_modules/.bin`, where `npm ci` puts the pinned CLIs, then on the agents'
 * PATH: `node bin/warden.cjs serve` finds what `npx warden serve` finds (npx puts that directory
 * first on PATH), and a pinned CLI wins over whatever else the machine has on its PATH. A bare
 * name the operator configured (`--provider claude=claude`) is looked up on PATH alone: naming a
 * command is choosing it over the pinned one.
 */
import * as fs from "node:fs";
import { delimiter, dirname, isAbsolute, join } from "node:path";
import { fileURLToPath } from "node:url";

/** `<package root>/node_modules/.bin` of the warden package this module belongs to (src/ or dist/src/). */
export const PINNED_BIN_DIR: string | undefined = packageBinDir(dirname(fileURLToPath(import.meta.url)));

function packageBinDir(from: string): string | undefined {
  for (let dir = from; ; dir = dirname(dir)) {
    try {
      const pkg = JSON.parse(fs.readFileSync(join(dir, "package.json"), "utf8")) as { name?: unknown };
      if (pkg.name === "warden") return join(dir, "node_modules", ".bin");
    } catch {
      // no package.json here, or not ours: look further up
    }
    if (dirname(dir) === dir) return undefined;
  }
}

/**
 * The executable file `command` names (a path, or a bare name in `pinnedBin`, then on PATH of
 * `env`), or undefined. `pinnedBin` null: PATH alone.
 */
export function findCommand(
  command: string,
  env: Readonly<Record<string, string | undefined>>,
  cwd: string,
  pinnedBin: string | null | undefined = PINNED_BIN_DIR,
): string | undefined {
  if (command.includes("/")) {
    const path = isAbsolute(command) ? command : join(cwd, command);
    return executableFile(path) ? path : undefined;
  }
  for (const dir of [...(pinnedBin == null ? [] : [pinnedBin]), ...(env.PATH ?? "").split(delimiter)]) {
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
