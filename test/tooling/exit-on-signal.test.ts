/**
 * An interrupted run (Ctrl-C: the runner kills each test file's process with SIGTERM) must not
 * leave behind what a test file started: a signal's default action skips a process's "exit"
 * handlers, and a PostgreSQL server started by pg_ctl runs on by itself. The helpers import
 * test/support/exit-on-signal.ts, which turns the signal into an exit that runs them.
 */
import { it } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { isAlive } from "../support/processes.js";
import { waitFor } from "../support/wait.js";

const CHILD = fileURLToPath(new URL("./children/postgres-until-signalled.ts", import.meta.url));
const skip = (process.platform !== "linux" && "needs /proc") || (process.env.WARDEN_TEST_POSTGRES_URL ? "an external PostgreSQL is not the helper's to stop" : false);

for (const signal of ["SIGTERM", "SIGINT"] as const) {
  it(`a test process ended by ${signal} stops the PostgreSQL server it started and removes its directory`, { skip }, async () => {
    const child = spawn(process.execPath, ["--import", "tsx", CHILD], { stdio: ["ignore", "pipe", "inherit"] });
    const exited = new Promise<number | null>((done) => child.once("exit", (code) => done(code)));
    let out = "";
    child.stdout.setEncoding("utf8").on("data", (s: string) => (out += s));
    const started = await waitFor("the child to print its PostgreSQL server's pid (it started the server)", () =>
      out.includes("\n") ? (JSON.parse(out.split("\n")[0]!) as { postmaster: number; base: string }) : undefined,
    );
    assert.ok(isAlive(started.postmaster), "the server runs before the signal");
    child.kill(signal);
    assert.equal(await exited, 128 + (signal === "SIGTERM" ? 15 : 2), "the child exits with the signal's conventional status");
    await waitFor(`the postmaster (pid ${started.postmaster}) to stop`, () => !isAlive(started.postmaster) || undefined);
    assert.equal(existsSync(started.base), false, "the cluster's directory is removed");
  });
}
