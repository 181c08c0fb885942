#!/usr/bin/env node
// What `warden serve` needs from Debian to confine its agents (bubblewrap), installed when
// missing: the README's first command runs it between `npm ci` and `npx warden serve`, so that
// command stays the whole set-up on a fresh machine. Without it the node still starts, and
// refuses every confined run with `sandbox-unavailable`. `--check` only reports.
import { CONFINEMENT_PREREQUISITES, ensurePrerequisites } from "./test-prereqs.mjs";

const problem = ensurePrerequisites({ checkOnly: process.argv.includes("--check"), list: CONFINEMENT_PREREQUISITES, what: "confinement" });
if (problem !== undefined) {
  console.error(problem);
  process.exit(1);
}
