/**
 * Names of the files a node keeps at the top of its home that other processes look at (the CLI
 * checks the lock): in a module of their own, so that reading them loads no store.
 */

/** Held by the process serving the home for its whole life (home-backend.ts). */
export const HOME_LOCK_FILE = "node.lock";
/** The backend the home served, recorded on its first start (home-backend.ts). */
export const HOME_BACKEND_FILE = "backend";
