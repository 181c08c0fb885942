/**
 * The client's default `fetch`: the same contract as the global fetch (Request in, Response out),
 * implemented on node:http(s) with a keep-alive agent. The global fetch (undici) copies every
 * request body and pushes it through web streams; for chunk uploads that made pushes several
 * times slower than the node could receive. Here a Uint8Array body is written to the socket as
 * is. Replies are wrapped in a standard Response, so everything above this layer (and any custom
 * `fetch` a caller passes instead) sees one interface; `exchange` is the same request for the
 * transport, which reads a reply's status, headers and small JSON body without that wrapping.
 */
import * as http from "node:http";
import * as https from "node:https";
import { Readable } from "node:stream";
import type { Exchange, ExchangeFn, ExchangeInit, FetchFn } from "./fetch-fn.js";

/** Statuses whose Response must have a null body. */
const NULL_BODY_STATUSES = new Set([101, 103, 204, 205, 304]);

export interface NodeFetch {
  readonly fetch: FetchFn;
  /** the same request, its reply read no further than status and headers until asked (fetch-fn.ts) */
  readonly exchange: ExchangeFn;
  /** Closes the kept-alive connections. */
  close(): void;
}

type FetchInit = NonNullable<Parameters<FetchFn>[1]>;

/**
 * Request headers as node:http takes them (lower-case names; node:http validates them). The plain
 * object Transport passes on every request is copied directly: building a Headers for it cost a
 * chunk upload more than writing its headers.
 */
function headerRecord(init: FetchInit["headers"]): Record<string, string> {
  const out: Record<string, string> = {};
  if (init !== undefined && init !== null && Object.getPrototypeOf(init) === Object.prototype) {
    for (const [key, value] of Object.entries(init as Record<string, string>)) {
      const name = key.toLowerCase();
      out[name] = out[name] === undefined ? String(value) : `${out[name]}, ${String(value)}`;
    }
    return out;
  }
  new Headers(init).forEach((value, key) => {
    out[key] = value;
  });
  return out;
}

function responseHeaders(message: http.IncomingMessage): Headers {
  const headers = new Headers();
  for (const [key, value] of Object.entries(message.headers)) {
    if (value === undefined) continue;
    for (const v of Array.isArray(value) ? value : [value]) headers.append(key, v);
  }
  return headers;
}

/** A body as pieces to write in order (one, or the pieces the caller gave: never joined here). */
function bodyPieces(init: ExchangeInit): readonly (Uint8Array | string)[] | undefined {
  if (init.bodyPieces !== undefined) {
    if (init.body !== undefined && init.body !== null) throw new TypeError("a request has either a body or body pieces, not both");
    return init.bodyPieces;
  }
  const body = init.body;
  if (body === undefined || body === null) return undefined;
  if (typeof body === "string" || body instanceof Uint8Array) return [body];
  throw new TypeError("the client's fetch sends string or Uint8Array bodies only");
}

/** The Exchange of a node:http reply; its Response is built only if asked for. */
function exchangeOfMessage(message: http.IncomingMessage, method: string): Exchange {
  const status = message.statusCode ?? 0;
  const nullBody = NULL_BODY_STATUSES.has(status) || method === "HEAD";
  if (nullBody) message.resume();
  let response: Response | undefined;
  return {
    ok: status >= 200 && status <= 299,
    status,
    header: (name) => {
      const value = message.headers[name];
      return value === undefined ? null : Array.isArray(value) ? value.join(", ") : value;
    },
    text: async () => {
      if (nullBody) return "";
      const chunks: Buffer[] = [];
      for await (const chunk of message) chunks.push(chunk as Buffer);
      return Buffer.concat(chunks).toString("utf8");
    },
    discard: () =>
      new Promise<void>((done) => {
        message.resume();
        if (message.readableEnded || message.destroyed) return done();
        // A reply whose body is cut off closes its connection: either way, it is gone.
        message.once("end", done).once("close", done).once("error", done);
      }),
    response: () => {
      const stream = nullBody ? null : (Readable.toWeb(message) as ReadableStream<Uint8Array>);
      response ??= new Response(stream, { status, statusText: message.statusMessage ?? "", headers: responseHeaders(message) });
      return response;
    },
  };
}

export function createNodeFetch(options: { maxSockets?: number } = {}): NodeFetch {
  const agentOptions = { keepAlive: true, maxSockets: options.maxSockets ?? 16 };
  const agents = { "http:": new http.Agent(agentOptions), "https:": new https.Agent(agentOptions) };

  const exchange: ExchangeFn = (input, init) =>
    new Promise<Exchange>((resolve, reject) => {
      const url = new URL(input);
      if (url.protocol !== "http:" && url.protocol !== "https:") return reject(new TypeError(`unsupported protocol ${url.protocol}`));
      const method = init.method ?? "GET";
      const pieces = bodyPieces(init);
      const headers = headerRecord(init.headers);
      if (pieces !== undefined) headers["content-length"] = String(pieces.reduce((sum, p) => sum + (typeof p === "string" ? Buffer.byteLength(p) : p.byteLength), 0));
      const send = url.protocol === "https:" ? https.request : http.request;
      const request = send(url, { method, headers, agent: agents[url.protocol], ...(init.signal ? { signal: init.signal } : {}) }, (message) =>
        resolve(exchangeOfMessage(message, method)),
      );
      request.on("error", reject);
      if (pieces === undefined || pieces.length <= 1) return void request.end(pieces?.[0]);
      // Corked, the headers and every piece leave in one writev.
      request.cork();
      for (const piece of pieces) request.write(piece);
      request.uncork();
      request.end();
    });

  return {
    fetch: async (input, init) => (await exchange(input instanceof Request ? input.url : String(input), init ?? {})).response(),
    exchange,
    close: () => {
      agents["http:"].destroy();
      agents["https:"].destroy();
    },
  };
}
