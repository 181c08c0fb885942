/**
 * The console's built files (`npm run build` writes them to dist/console): read once at start-up
 * into memory, gzipped once, served from there. File names under assets/ carry their content hash,
 * so they are cached immutably; index.html is never cached (it names the current hashes).
 */
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { dirname, extname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { gzipSync } from "node:zlib";

export interface ConsoleAsset {
  readonly type: string;
  readonly body: Buffer;
  readonly gzip: Buffer;
}

export interface ConsoleAssets {
  readonly index: ConsoleAsset;
  /** by file name under assets/ */
  readonly files: ReadonlyMap<string, ConsoleAsset>;
}

const TYPES: Readonly<Record<string, string>> = {
  ".js": "text/javascript; charset=utf-8",
  ".css": "text/css; charset=utf-8",
  ".html": "text/html; charset=utf-8",
  ".svg": "image/svg+xml",
  ".png": "image/png",
};
/** Only hashed names the build writes: nothing else under the directory is ever served. */
const ASSET_NAME = /^[a-z0-9-]+-[A-Z0-9]{8,}\.(js|css|svg|png)$/;

function asset(path: string): ConsoleAsset {
  const body = readFileSync(path);
  return { type: TYPES[extname(path)] ?? "application/octet-stream", body, gzip: gzipSync(body, { level: 9 }) };
}

/** This package's root, found by walking up from this module (src/ and dist/src/ sit at different depths). */
function packageRoot(): string | undefined {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (let i = 0; i < 6; i++) {
    if (existsSync(join(dir, "package.json"))) return dir;
    dir = dirname(dir);
  }
  return undefined;
}

export function defaultConsoleDir(): string | undefined {
  const root = packageRoot();
  return root === undefined ? undefined : join(root, "dist", "console");
}

/** The package's version, for the overview. */
export function packageVersion(): string {
  const root = packageRoot();
  try {
    const version = (JSON.parse(readFileSync(join(root ?? ".", "package.json"), "utf8")) as { version?: unknown }).version;
    return typeof version === "string" ? version : "0.0.0";
  } catch {
    return "0.0.0";
  }
}

/** The built console under `dir`, or undefined when it has not been built. */
export function loadConsoleAssets(dir: string | undefined): ConsoleAssets | undefined {
  if (dir === undefined || !existsSync(join(dir, "index.html"))) return undefined;
  const files = new Map<string, ConsoleAsset>();
  const assetsDir = join(dir, "assets");
  if (existsSync(assetsDir)) {
    for (const name of readdirSync(assetsDir)) if (ASSET_NAME.test(name)) files.set(name, asset(join(assetsDir, name)));
  }
  return { index: asset(join(dir, "index.html")), files };
}
