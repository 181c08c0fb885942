/**
 * A test file's process ends by SIGTERM when its run is interrupted (Ctrl-C: run() kills the
 * files' processes on abort, scripts/run-test-files.mjs), and a signal's default action skips the
 * "exit" handlers that stop what the file started: a PostgreSQL server (daemonized by pg_ctl, so
 * nothing else stops it), nodes, temp directories. Imported for its effect by the helpers that
 * register such handlers (a module runs once per process, however many import it), it turns those
 * signals into an exit with the signal's conventional status (128 + its number), so the handlers run.
 */
import { constants } from "node:os";

for (const signal of ["SIGTERM", "SIGINT", "SIGHUP"] as const) {
  process.once(signal, () => process.exit(128 + constants.signals[signal]));
}
