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

/** A file's room: its top folder under src/ (a backend is `backends/<name>`; `index` is src/index.ts). */
function roomOf(file: string): string {
  const parts = file.split("/");
  if (parts.length === 1) return parts[0]!.replace(/\.tsx?$/, "");
  return parts[0] === "backends" ? `backends/${parts[1]}` : parts[0]!;
}

/** DESIGN.md's ```layers block: one line per layer, bottom first. */
function designLayers(): Map<string, number> {
  const design = readFileSync(join(repo, "docs", "DESIGN.md"), "utf8");
  const block = /^```layers\n([\s\S]*?)^```/m.exec(design);
  assert.ok(block, "DESIGN.md has no ```layers block in its Architecture section");
  const layers = new Map<string, number>();
  block[1]!
    .split("\n")
    .filter((line) => line.trim() !== "")
    .forEach((line, level) => {
      for (const room of line.trim().split(/\s+/)) {
        assert.ok(!layers.has(room), `DESIGN.md's layers name ${room} twice`);
        layers.set(room, level);
      }
    });
  return layers;
}

test("every import points down DESIGN.md's layers, and every room is placed in them", () => {
  const layers = designLayers();
  const unplaced = new Set<string>();
  const upward: string[] = [];
  for (const [file, targets] of graph) {
    const from = roomOf(file);
    const level = layers.get(from);
    if (level === undefined) {
      unplaced.add(from);
      continue;
    }
    for (const target of targets) {
      const to = roomOf(target);
      if (to === from) continue;
      const targetLevel = layers.get(to);
      if (targetLevel === undefined) unplaced.add(to);
      else if (targetLevel >= level) upward.push(`${file} -> ${target} (${from} may not import ${to})`);
    }
  }
  assert.deepEqual([...unplaced], [], "rooms under src/ missing from DESIGN.md's layers block");
  assert.deepEqual(upward, [], `imports that do not point down:\n${upward.join("\n")}`);
});

test("no domain room imports the server, the CLI, or a database or HTTP library", () => {
  const domain = new Set(["core", "signing", "journal", "tlog", "delivery", "sandbox", "invocations", "providers", "runner"]);
  const bad: string[] = [];
  for (const file of sourceFiles(SRC)) {
    const name = relative(SRC, file);
    if (!domain.has(roomOf(name))) continue;
    for (const ref of ts.preProcessFile(readFileSync(file, "utf8"), true, true).importedFiles) {
      const spec = ref.fileName;
      if (/^(fastify|@fastify\/|pg$|better-sqlite3$)/.test(spec) || /\/(server|cli)\//.test(spec)) bad.push(`${name} -> ${spec}`);
    }
  }
  assert.deepEqual(bad, []);
});
