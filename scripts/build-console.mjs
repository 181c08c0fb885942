#!/usr/bin/env node
// Builds the operator console (src/console) into dist/console: one hashed JS bundle and one
// hashed CSS file under assets/, and the index.html that names them. The browser bundle reuses
// the typed client (src/client) and the wire types (src/api); the client's Node-only parts (its
// node:http fetch, pushing a directory from disk) are swapped for browser stand-ins here.
import { build } from "esbuild";
import { mkdirSync, readdirSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { basename, dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { gzipSync } from "node:zlib";
import { readFileSync } from "node:fs";

const repo = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const out = join(repo, "dist", "console");
/** What the whole console may weigh, gzipped (the budget). */
const BUDGET_GZIP_BYTES = 250 * 1024;

const browserSwaps = {
  name: "browser-swaps",
  setup(b) {
    b.onResolve({ filter: /^\.\/node-fetch\.js$/ }, (args) =>
      args.importer.includes(`${join("src", "client")}`) ? { path: join(repo, "src", "console", "stubs", "node-fetch.ts") } : undefined,
    );
    b.onResolve({ filter: /^\.\/push\.js$/ }, (args) =>
      args.importer.endsWith(join("src", "client", "client.ts")) ? { path: join(repo, "src", "console", "stubs", "push.ts") } : undefined,
    );
    // Modules the bundle reaches only for code it never runs (hashing a bundle from files): any use throws.
    b.onResolve({ filter: /^node:/ }, (args) => ({ path: args.path, namespace: "node-stub" }));
    b.onLoad({ filter: /.*/, namespace: "node-stub" }, (args) => ({
      contents: `module.exports = new Proxy({}, { get: (_t, name) => () => { throw new Error(${JSON.stringify(args.path)} + "." + String(name) + " is not available in a browser"); } });`,
      loader: "js",
    }));
  },
};

// Built beside the served tree, then moved in file by file (a rename replaces a file whole): a node
// serving the console while another build runs (test files build it concurrently) never finds it
// missing or half written. The names are content hashes, so concurrent builds agree on them.
const staging = join(repo, "dist", `.console-build-${process.pid}`);
rmSync(staging, { recursive: true, force: true });
mkdirSync(join(staging, "assets"), { recursive: true });
mkdirSync(join(out, "assets"), { recursive: true });
const result = await build({
  entryPoints: { console: join(repo, "src", "console", "main.tsx") },
  bundle: true,
  minify: true,
  format: "esm",
  target: ["chrome120", "firefox120", "safari17"],
  platform: "browser",
  outdir: join(staging, "assets"),
  entryNames: "[name]-[hash]",
  jsx: "automatic",
  jsxImportSource: "preact",
  tsconfig: join(repo, "src", "console", "tsconfig.json"),
  metafile: true,
  legalComments: "none",
  plugins: [browserSwaps],
  logLevel: "warning",
});
const files = Object.keys(result.metafile.outputs).map((p) => basename(p));
const js = files.find((f) => f.endsWith(".js"));
const css = files.find((f) => f.endsWith(".css"));
if (js === undefined || css === undefined) throw new Error(`the console build wrote no JS or CSS: ${files.join(", ")}`);
writeFileSync(
  join(staging, "index.html"),
  `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="color-scheme" content="light dark">
<title>warden console</title>
<link rel="icon" href="data:,">
<link rel="stylesheet" href="/ui/assets/${css}">
<script type="module" src="/ui/assets/${js}"></script>
</head>
<body><div id="app"></div></body>
</html>
`,
);
for (const f of [js, css]) renameSync(join(staging, "assets", f), join(out, "assets", f));
renameSync(join(staging, "index.html"), join(out, "index.html"));
rmSync(staging, { recursive: true, force: true });
// Assets of earlier sources: no index.html names them any more.
for (const f of readdirSync(join(out, "assets"))) if (f !== js && f !== css) rmSync(join(out, "assets", f), { force: true });
let gzipped = 0;
for (const f of [join(out, "index.html"), join(out, "assets", js), join(out, "assets", css)]) gzipped += gzipSync(readFileSync(f), { level: 9 }).byteLength;
console.log(`console: ${js}, ${css}: ${(gzipped / 1024).toFixed(1)} KiB gzipped`);
if (gzipped > BUDGET_GZIP_BYTES) {
  console.error(`the console is ${gzipped} bytes gzipped, over its budget of ${BUDGET_GZIP_BYTES}`);
  process.exit(1);
}
