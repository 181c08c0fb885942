/**
 * The browser's stand-in for src/client/node-fetch.ts: the console always passes its own fetch
 * (the window's, with the session's CSRF header), so this default is never the one used.
 */
import { exchangeOf, type ExchangeFn, type FetchFn } from "../../client/fetch-fn.js";

export interface NodeFetch {
  readonly fetch: FetchFn;
  readonly exchange: ExchangeFn;
  close(): void;
}

export function createNodeFetch(): NodeFetch {
  const fetch: FetchFn = (input, init) => globalThis.fetch(input, init);
  return { fetch, exchange: async (input, init) => exchangeOf(await fetch(input, init)), close: () => undefined };
}
