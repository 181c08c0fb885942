/**
 * Starts a throwaway PostgreSQL through the tests' helper, prints its postmaster's pid and data
 * directory on one line, and waits to be signalled (test/tooling/exit-on-signal.test.ts).
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { startTestPostgres } from "../../support/postgres.js";

const pg = await startTestPostgres();
// postgresql://postgres@<the cluster's directory, URI-encoded>:<port>/<database>
const base = decodeURIComponent(/^postgresql:\/\/postgres@([^:/]+):/.exec(await pg.createDatabase("signalled"))![1]!);
const postmaster = Number(readFileSync(join(base, "data", "postmaster.pid"), "utf8").split("\n")[0]);
console.log(JSON.stringify({ postmaster, base }));
setInterval(() => undefined, 1 << 30);
