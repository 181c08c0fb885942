/**
 * The browser's stand-in for src/client/node-fetch.ts: the console always passes its own fetch
 * (the window's, with the session's CSRF header), so this default is never the one used.
 */
import type { FetchFn } from "../../client/fetch-fn.js";

export interface NodeFetch {
  readonly fetch: FetchFn;
  close(): void;
}

export function createNodeFetch(): NodeFetch {
  return { fetch: (input, init) => globalThis.fetch(input, init), close: () => undefined };
}
