/**
 * The version of a provider's CLI as its npm package declares it (DESIGN.md "Queued invocations",
 * labels): the pinned CLIs are npm packages (`node_modules/.bin/claude` links into
 * `@anthropic-ai/claude-code`), so their version is one file read, with no process spawned and
 * nothing the CLI prints to parse. Read once when a node starts, for its queue labels.
 *
 * Only a package that names the executable among its `bin` entries counts: a script that merely
 * lives under some package (a fixture agent inside warden's own tree) has no version this way.
 */
import * as fs from "node:fs";
import { dirname, join, resolve } from "node:path";

/** How far above the executable a package root may be (`<pkg>/bin/cli.js` is one level). */
const MAX_DEPTH = 4;
/** A label value's bound (`queue.labels` values are at most 128 characters). */
const VERSION_RE = /^[0-9A-Za-z][0-9A-Za-z.+_-]{0,127}$/;

/** The `version` of the npm package whose `bin` is `executable`, or undefined. */
export function cliVersionOf(executable: string): string | undefined {
  let real: string;
  try {
    real = fs.realpathSync(executable);
  } catch {
    return undefined;
  }
  let dir = dirname(real);
  for (let depth = 0; depth < MAX_DEPTH; depth++, dir = dirname(dir)) {
    const pkg = readPackage(join(dir, "package.json"));
    if (pkg !== undefined && binsOf(pkg).some((bin) => sameFile(resolve(dir, bin), real))) {
      return typeof pkg.version === "string" && VERSION_RE.test(pkg.version) ? pkg.version : undefined;
    }
    if (dirname(dir) === dir) break;
  }
  return undefined;
}

function readPackage(path: string): { version?: unknown; bin?: unknown } | undefined {
  try {
    const parsed: unknown = JSON.parse(fs.readFileSync(path, "utf8"));
    return parsed !== null && typeof parsed === "object" && !Array.isArray(parsed) ? (parsed as { version?: unknown; bin?: unknown }) : undefined;
  } catch {
    return undefined;
  }
}

function binsOf(pkg: { bin?: unknown }): string[] {
  if (typeof pkg.bin === "string") return [pkg.bin];
  if (pkg.bin !== null && typeof pkg.bin === "object") return Object.values(pkg.bin).filter((v): v is string => typeof v === "string");
  return [];
}

function sameFile(path: string, real: string): boolean {
  try {
    return fs.realpathSync(path) === real;
  } catch {
    return false;
  }
}
