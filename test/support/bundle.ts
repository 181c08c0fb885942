/**
 * A child script that a test starts many times (a crash loop's child, killed and started again
 * dozens of times), compiled once into one JavaScript file that plain `node` runs. Started through
 * tsx instead, each child spends most of a second of CPU loading: tsx's loader resolves and reads
 * every one of the script's modules on its own; bundled, the same modules load in a quarter of
 * that. The code is the same: esbuild, the compiler tsx itself uses, compiles the same sources;
 * packages stay outside the bundle and load from node_modules as they do under tsx.
 */
import { build, type Plugin } from "esbuild";
import { readFileSync, symlinkSync } from "node:fs";
import { basename, join } from "node:path";
import { pathToFileURL } from "node:url";
import { repo } from "./node.js";
import { tempDir } from "./temp.js";

/**
 * Each source module keeps its own `import.meta.url`, its file's, as under tsx: a module that finds
 * files beside itself (a worker thread's entry: src/core/worker-entry.ts) finds the same ones.
 */
const ownImportMetaUrl: Plugin = {
  name: "own-import-meta-url",
  setup(build) {
    build.onLoad({ filter: /\.ts$/ }, (args) => ({
      contents: readFileSync(args.path, "utf8").replace(/\bimport\.meta\.url\b/g, JSON.stringify(pathToFileURL(args.path).href)),
      loader: "ts",
    }));
  },
};

const bundles = new Map<string, Promise<string>>();

/** The path of `entry` (a .ts script) compiled into one ES module, built on the first call in this process. */
export function bundledScript(entry: string): Promise<string> {
  let bundle = bundles.get(entry);
  if (bundle === undefined) bundles.set(entry, (bundle = compile(entry)));
  return bundle;
}

async function compile(entry: string): Promise<string> {
  const dir = tempDir("bundle");
  // Packages are imported by name from the bundle: node looks for them in node_modules beside it.
  symlinkSync(join(repo, "node_modules"), join(dir, "node_modules"));
  const out = join(dir, `${basename(entry, ".ts")}.mjs`);
  // Plugins need esbuild's asynchronous API.
  await build({ entryPoints: [entry], outfile: out, bundle: true, platform: "node", format: "esm", target: "node20", packages: "external", plugins: [ownImportMetaUrl], logLevel: "error" });
  // What is left (import.meta.dirname, a package's own import.meta) would name the bundle instead.
  if (readFileSync(out, "utf8").includes("import.meta")) {
    throw new Error(`${entry} reaches a module that uses import.meta other than import.meta.url: it must run through tsx, not bundled`);
  }
  return out;
}
