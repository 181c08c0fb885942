/**
 * The source tree's shape (DESIGN.md "Architecture"), read from the imports of every file under
 * src/: no import cycle between files, neither backend imports the other, and witness/ imports no
 * backend. The imports are read with TypeScript's own scanner, so type-only imports count too.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import ts from "typescript";
import { repo } from "../support/node.js";

const SRC = join(repo, "src");

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? sourceFiles(join(dir, e.name)) : /\.tsx?$/.test(e.name) && !e.name.endsWith(".d.ts") ? [join(dir, e.name)] : [],
  );
}

/** file (relative to src/) -> the src files it imports */
function importGraph(): Map<string, string[]> {
  const files = sourceFiles(SRC);
  const known = new Set(files);
  const graph = new Map<string, string[]>();
  for (const file of files) {
    const info = ts.preProcessFile(readFileSync(file, "utf8"), true, true);
    const targets: string[] = [];
    for (const ref of info.importedFiles) {
      if (!ref.fileName.startsWith(".")) continue;
      const base = resolve(dirname(file), ref.fileName).replace(/\.js$/, "");
      const hit = [`${base}.ts`, `${base}.tsx`, join(base, "index.ts")].find((c) => known.has(c));
      if (hit !== undefined) targets.push(relative(SRC, hit));
    }
    graph.set(relative(SRC, file), targets);
  }
  return graph;
}

const graph = importGraph();

test("no import cycle between files under src/", () => {
  const state = new Map<string, "open" | "done">();
  const cycles: string[] = [];
  const visit = (file: string, path: string[]): void => {
    state.set(file, "open");
    for (const next of graph.get(file) ?? []) {
      if (state.get(next) === "open") cycles.push([...path.slice(path.indexOf(next)), next].join(" -> "));
      else if (!state.has(next)) visit(next, [...path, next]);
    }
    state.set(file, "done");
  };
  for (const file of graph.keys()) if (!state.has(file)) visit(file, [file]);
  assert.deepEqual(cycles, [], `import cycles:\n${cycles.join("\n")}`);
});

test("neither backend imports the other, and witness/ imports no backend", () => {
  const bad: string[] = [];
  for (const [file, targets] of graph) {
    for (const t of targets) {
      const crosses =
        (file.startsWith("backends/embedded/") && t.startsWith("backends/postgres/")) ||
        (file.startsWith("backends/postgres/") && t.startsWith("backends/embedded/")) ||
        (file.startsWith("witness/") && t.startsWith("backends/"));
      if (crosses) bad.push(`${file} -> ${t}`);
    }
  }
  assert.deepEqual(bad, []);
});
