/**
 * scripts/test-build.mjs's check, on a project of its own: the runner compiles src/ again when a
 * compiled file is missing or older than its source, so that the compiled CLI the tests start is
 * never older than the source they test; the console (built apart) does not count.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync, utimesSync, writeFileSync } from "node:fs";
import { join } from "node:path";
// @ts-expect-error: a plain .mjs script, without type declarations
import { staleSource } from "../../scripts/test-build.mjs";
import { tempDir } from "../support/temp.js";

test("dist is stale when a compiled file is missing or older than its source, and current otherwise", (t) => {
  const root = tempDir("test-build", (remove) => t.after(remove));
  const file = (path: string, seconds: number): void => {
    mkdirSync(join(root, path, ".."), { recursive: true });
    writeFileSync(join(root, path), "");
    utimesSync(join(root, path), seconds, seconds);
  };
  file("src/cli/run.ts", 1000);
  file("src/core/errors.ts", 1000);
  file("src/api/types.d.ts", 5000);
  file("src/console/app.ts", 5000);
  file("dist/src/cli/run.js", 2000);
  assert.equal(staleSource(root), "src/core/errors.ts", "a source with no compiled file");

  file("dist/src/core/errors.js", 2000);
  assert.equal(staleSource(root), undefined, "every compiled file newer than its source; declarations and the console aside");

  file("src/cli/run.ts", 3000);
  assert.equal(staleSource(root), "src/cli/run.ts", "a source edited after the build");
});
