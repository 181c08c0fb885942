/**
 * Imported first (for its effect) by whatever starts nodes to measure them: those nodes are the
 * compiled CLI, bin/warden.cjs on a current dist/, as `npx warden serve` starts one. Through tsx,
 * every module a node loads, and every worker thread's, goes through tsx's loader, with source
 * maps on: work no operator's node does. Runs before test/support/node.ts reads the variable.
 */
// @ts-expect-error: a plain .mjs script, without type declarations
import { ensureBuilt } from "../scripts/test-build.mjs";

const stale = (ensureBuilt as (options: { log: (line: string) => void }) => string | undefined)({ log: (line) => console.log(line) });
if (stale !== undefined) {
  console.error(stale);
  process.exit(1);
}
process.env.WARDEN_TEST_CLI = "dist";
// Nor does any real `warden serve` check each of its replies against its schema, as the suite's
// nodes do (test/support/node.ts).
process.env.WARDEN_CHECK_REPLIES = "0";
