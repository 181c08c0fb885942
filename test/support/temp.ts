/** Temporary directories for tests, all named `warden-<area>-…` under the run's private TMPDIR. */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

/**
 * A new temporary directory. With `removeWith` (`(fn) => after(fn)`, `(fn) => t.after(fn)`) it is
 * removed when that hook runs; without, it is the caller's to remove (scripts/run-tests.mjs removes
 * whatever is left when the run ends).
 */
export function tempDir(area: string, removeWith?: (remove: () => void) => void): string {
  const dir = mkdtempSync(join(tmpdir(), `warden-${area}-`));
  removeWith?.(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}
