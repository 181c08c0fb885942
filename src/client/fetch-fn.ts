/**
 * The shape of fetch the client sends with. Its own file so that transport.ts and node-fetch.ts
 * (the default fetch, which transport.ts starts) do not import each other.
 */
export type FetchFn = typeof globalThis.fetch;
