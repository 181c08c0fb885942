import { test } from "node:test";
import assert from "node:assert/strict";
import * as nodePath from "node:path";
import fc from "fast-check";
import { ValidationError } from "../../src/core/errors.js";
import { isDeviceName, pathFoldKey, safeJoin, validateRelativePath } from "../../src/delivery/paths.js";

const ROOT = nodePath.resolve("/srv/warden/materialized/session-1");

function accepted(path: string): boolean {
  try {
    validateRelativePath(path);
    return true;
  } catch (error) {
    // Anything but a ValidationError would be a crash on hostile input.
    assert.ok(error instanceof ValidationError, `validateRelativePath threw ${String(error)}`);
    assert.match(error.code, /^manifest-path-/);
    return false;
  }
}

/** Segments built from the pieces that break path rules, mixed with arbitrary code points. */
const trickySegment = fc.oneof(
  fc.constantFrom("..", ".", "", " ", "a", "ä", "Ä", "\\", ":", "x.", "x ", "CON", "nul.txt", "Lpt9.md", "\u0000", "\uD800", "\uDC00", "~", "%2e%2e", "\u2024\u2024", "．．"),
  fc.string({ unit: "binary", maxLength: 6 }),
  fc.string({ unit: "grapheme-ascii", maxLength: 8 }),
);
const segmentedPath = fc
  .tuple(
    fc.constantFrom("", "/", "./"),
    fc.array(trickySegment, { minLength: 1, maxLength: 6 }),
    fc.constantFrom("", "/"),
  )
  .map(([lead, segments, tail]) => lead + segments.join("/") + tail);
const anyString = fc.oneof(
  fc.string({ unit: "binary", maxLength: 40 }),
  fc.string({ unit: "binary-ascii", maxLength: 40 }),
  segmentedPath,
);

test("property: an accepted path stays inside the root after safeJoin and maps segment for segment", () => {
  let acceptedCount = 0;
  fc.assert(
    fc.property(anyString, (path) => {
      if (!accepted(path)) return;
      acceptedCount++;
      const joined = safeJoin(ROOT, path);
      const resolved = nodePath.resolve(joined);
      assert.equal(resolved, joined, "safeJoin returns a resolved path");
      assert.ok(resolved.startsWith(ROOT + nodePath.sep), `${JSON.stringify(path)} escaped to ${resolved}`);
      // Nothing was normalized away: the path below the root is exactly the validated segments.
      assert.deepEqual(nodePath.relative(ROOT, resolved).split(nodePath.sep), path.split("/"));
    }),
    { numRuns: 3000, seed: 20240611 },
  );
  assert.ok(acceptedCount > 300, `too few accepted paths (${acceptedCount}) for the property to mean anything`);
});

test("property: a path refused by validation is refused by safeJoin with the same code", () => {
  fc.assert(
    fc.property(segmentedPath, (path) => {
      if (accepted(path)) return;
      let code = "";
      try {
        validateRelativePath(path);
      } catch (error) {
        code = (error as ValidationError).code;
      }
      assert.throws(() => safeJoin(ROOT, path), (e: unknown) => e instanceof ValidationError && e.code === code);
    }),
    { numRuns: 500, seed: 7 },
  );
});

test("safeJoin joins below a root given with a trailing separator or as '/'", () => {
  assert.equal(
    safeJoin(ROOT + nodePath.sep, "skills/review/SKILL.md"),
    nodePath.join(ROOT, "skills", "review", "SKILL.md"),
  );
  assert.equal(safeJoin("/", "a/b.md"), "/a/b.md");
});

test("device names: the stem before the first '.', any case, spaces before the extension", () => {
  for (const name of ["CON", "con.txt", "Con.tar.gz", "lpt9.md", "COM1", "com\u00B9", "conin$", "CONOUT$.log", "nul .txt", "aux"]) {
    assert.ok(isDeviceName(name), name);
  }
  for (const name of ["console", "com10", "lpt", "nul_", ".con", "con-x.md", "auxiliary.md"]) {
    assert.ok(!isDeviceName(name), name);
  }
});

test("fold key: case and Unicode normalization differences collide, distinct names do not", () => {
  assert.equal(pathFoldKey("Docs/README.md"), pathFoldKey("docs/readme.md"));
  assert.equal(pathFoldKey("\u00C4"), pathFoldKey("a\u0308"));
  assert.equal(pathFoldKey("\u0130"), pathFoldKey("i\u0307"));
  assert.notEqual(pathFoldKey("stra\u00DFe"), pathFoldKey("strasse"));
  assert.notEqual(pathFoldKey("a.md"), pathFoldKey("b.md"));
});
