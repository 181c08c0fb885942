/**
 * The shape of fetch the client sends with. Its own file so that transport.ts and node-fetch.ts
 * (the default fetch, which transport.ts starts) do not import each other.
 */
export type FetchFn = typeof globalThis.fetch;

/**
 * One reply, read no further than its status and headers. The client's own fetch (node-fetch.ts)
 * answers with one directly: a chunk upload's reply (a 204 and a header) or a small JSON body is
 * then read without building a Response and its web stream, which cost a push's upload more CPU
 * than writing the chunk. A caller's fetch is adapted with `exchangeOf`.
 */
export interface Exchange {
  readonly ok: boolean;
  readonly status: number;
  /** a header by lower-case name (repeated ones joined with ", "), null when absent */
  header(name: string): string | null;
  /** the whole body as text */
  text(): Promise<string>;
  /** drops the body unread; settles once it is gone (a kept-alive connection is then free again) */
  discard(): Promise<void>;
  /** the reply as a standard Response (its body unread); after text() or discard() the body is gone */
  response(): Response;
}

/**
 * A request as the client's own fetch takes it: a fetch's init, or instead of `body` the body's
 * pieces, written back to back without being joined first (a blob pack's frames).
 */
export type ExchangeInit = NonNullable<Parameters<FetchFn>[1]> & { readonly bodyPieces?: readonly Uint8Array[] };

export type ExchangeFn = (input: string, init: ExchangeInit) => Promise<Exchange>;

/** The Exchange of a Response a fetch answered with. */
export function exchangeOf(response: Response): Exchange {
  return {
    ok: response.ok,
    status: response.status,
    header: (name) => response.headers.get(name),
    text: () => response.text(),
    discard: async () => {
      await response.body?.cancel().catch(() => undefined);
    },
    response: () => response,
  };
}
