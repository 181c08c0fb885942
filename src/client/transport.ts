/**
 * One HTTP exchange with a node: base URL, bearer token, JSON or binary bodies, problem replies
 * turned into WardenHttpError, and bounded retries with backoff for requests that are safe to
 * repeat (every route of HTTP API v1 is, except creating a materialization).
 */
import { WardenConnectionError, WardenHttpError, type Problem } from "./errors.js";
import { joinPieces } from "../delivery/blob-pack-frame.js";
import { exchangeOf, type Exchange, type FetchFn } from "./fetch-fn.js";
import { createNodeFetch, type NodeFetch } from "./node-fetch.js";

export type { FetchFn };

export interface TransportOptions {
  /** base URL of the node, e.g. http://127.0.0.1:7420 */
  readonly url: string;
  /** bearer token; absent only for /healthz */
  readonly token?: string;
  /** how requests are sent (default: node:http(s) with keep-alive, see node-fetch.ts) */
  readonly fetch?: FetchFn;
  /** extra attempts after a transient failure (see `isTransient`); default 3 */
  readonly retries?: number;
  /** first backoff delay in ms, doubled per attempt up to 2 s; default 100 */
  readonly backoffMs?: number;
}

export interface RequestSpec {
  readonly method: "GET" | "POST" | "PATCH" | "DELETE";
  /** path below the base URL, already encoded, e.g. /v1/stages */
  readonly path: string;
  readonly query?: Readonly<Record<string, string | number | undefined>>;
  readonly json?: unknown;
  /** the body: bytes, or pieces sent back to back (joined into one body only for a fetch the caller passed) */
  readonly bytes?: Uint8Array | readonly Uint8Array[];
  /** the media type of `bytes` (default application/octet-stream) */
  readonly contentType?: string;
  readonly headers?: Readonly<Record<string, string>>;
  /** false for a request that must not be repeated blindly */
  readonly retry?: boolean;
  readonly signal?: AbortSignal;
  /** ask for this media type (default application/json) */
  readonly accept?: string;
}

const MAX_BACKOFF_MS = 2000;
/** A gateway's answers: the node behind it may answer the next request. */
const GATEWAY_STATUSES = new Set([502, 504]);
/**
 * The 503s that name a passing state: the node's database is unreachable, slow or busy, or the
 * node is shutting down (a restarted one answers). Every other 503 is a state someone must change
 * — `provider-unavailable` stays until an operator installs the agent's CLI — and a 503 with no
 * problem code of the node's (`http-503`) is a proxy's, which may pass.
 */
const TRANSIENT_503_CODES = new Set(["storage-unavailable", "storage-timeout", "storage-busy", "node-shutting-down", "not-ready", "http-503"]);
/** Problem documents are small; a larger error body is not one. */
const MAX_PROBLEM_BYTES = 64 * 1024;

/**
 * Failures worth trying again: the connection failed, a gateway could not reach the node, or the
 * node said it could not answer now for a reason that passes by itself (TRANSIENT_503_CODES).
 * Every other error is an answer: a configuration error stays until an operator changes it, 507
 * capacity-exhausted until one makes room, and a 500 names a damaged record or a bug. Retrying
 * those only delays the error the caller must see.
 */
export function isTransient(error: unknown): boolean {
  if (error instanceof WardenConnectionError) return true;
  if (!(error instanceof WardenHttpError)) return false;
  return GATEWAY_STATUSES.has(error.status) || (error.status === 503 && TRANSIENT_503_CODES.has(error.code));
}

/** Delay before retry number `attempt` (0-based): exponential with full jitter, capped. */
export function backoffDelay(attempt: number, baseMs: number): number {
  const ceiling = Math.min(MAX_BACKOFF_MS, baseMs * 2 ** attempt);
  return ceiling / 2 + Math.random() * (ceiling / 2);
}

export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted === true) return reject(signal.reason as Error);
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    const onAbort = (): void => {
      clearTimeout(timer);
      reject(signal?.reason as Error);
    };
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

export class Transport {
  readonly baseUrl: string;
  readonly retries: number;
  readonly backoffMs: number;
  readonly #token: string | undefined;
  readonly #fetch: FetchFn;
  readonly #own: NodeFetch | undefined;

  constructor(options: TransportOptions) {
    this.baseUrl = normalizeBaseUrl(options.url);
    this.#token = options.token;
    this.#own = options.fetch === undefined ? createNodeFetch() : undefined;
    this.#fetch = options.fetch ?? this.#own!.fetch;
    this.retries = options.retries ?? 3;
    this.backoffMs = options.backoffMs ?? 100;
  }

  /** Closes kept-alive connections (only those of the built-in fetch; a caller's fetch is the caller's). */
  close(): void {
    this.#own?.close();
  }

  /** Sends the request (retrying transient failures when allowed); resolves only for a 2xx reply. */
  async send(spec: RequestSpec): Promise<Response> {
    return (await this.#exchange(spec)).response();
  }

  /**
   * Sends a request whose successful reply's body is not wanted (a chunk upload: a 204 and its
   * headers); the body is dropped and no Response is built.
   */
  async sendForHeaders(spec: RequestSpec): Promise<{ readonly status: number; header(name: string): string | null }> {
    const reply = await this.#exchange(spec);
    await reply.discard();
    return reply;
  }

  /** Sends and parses a JSON reply. */
  async json<T>(spec: RequestSpec): Promise<{ status: number; header(name: string): string | null; body: T }> {
    const reply = await this.#exchange(spec);
    return { status: reply.status, header: (name) => reply.header(name), body: (await readJson(reply, spec)) as T };
  }

  async #exchange(spec: RequestSpec): Promise<Exchange> {
    const attempts = spec.retry === false ? 1 : this.retries + 1;
    for (let attempt = 0; ; attempt++) {
      try {
        return await this.#once(spec);
      } catch (error) {
        if (attempt + 1 >= attempts || !isTransient(error)) throw error;
        await sleep(backoffDelay(attempt, this.backoffMs), spec.signal);
      }
    }
  }

  async #once(spec: RequestSpec): Promise<Exchange> {
    const url = this.baseUrl + spec.path + queryString(spec.query);
    const headers: Record<string, string> = { accept: spec.accept ?? "application/json", ...spec.headers };
    if (this.#token !== undefined) headers.authorization = `Bearer ${this.#token}`;
    let body: string | Uint8Array | undefined;
    let pieces: readonly Uint8Array[] | undefined;
    if (spec.json !== undefined) {
      headers["content-type"] = "application/json";
      body = JSON.stringify(spec.json);
    } else if (spec.bytes !== undefined) {
      headers["content-type"] = spec.contentType ?? "application/octet-stream";
      // Pieces go as they are through the client's own fetch. A caller's fetch takes one body, and
      // none over shared memory, which WHATWG fetch refuses: a compile's contents are views on it.
      if (this.#own !== undefined) {
        if (spec.bytes instanceof Uint8Array) body = spec.bytes;
        else pieces = spec.bytes;
      } else if (!(spec.bytes instanceof Uint8Array)) body = joinPieces(spec.bytes);
      // Tested as "not an ArrayBuffer": a browser that is not cross-origin isolated has no SharedArrayBuffer to name.
      else body = spec.bytes.buffer instanceof ArrayBuffer ? spec.bytes : new Uint8Array(spec.bytes);
    }
    // The DOM's BodyInit (the console's build) takes only ArrayBuffer-backed views; every fetch takes these bytes.
    const init = { method: spec.method, headers, body: body as NonNullable<Parameters<FetchFn>[1]>["body"], signal: spec.signal };
    let reply: Exchange;
    try {
      reply = this.#own !== undefined ? await this.#own.exchange(url, pieces === undefined ? init : { ...init, bodyPieces: pieces }) : exchangeOf(await this.#fetch(url, init));
    } catch (error) {
      if (spec.signal?.aborted === true) throw error;
      throw new WardenConnectionError(this.baseUrl, error);
    }
    if (reply.ok) return reply;
    throw new WardenHttpError(reply.status, await readProblem(reply), { method: spec.method, path: spec.path });
  }
}

function normalizeBaseUrl(url: string): string {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new TypeError(`not a URL: ${JSON.stringify(url)}`);
  }
  if (parsed.protocol !== "http:" && parsed.protocol !== "https:") throw new TypeError(`not an http(s) URL: ${url}`);
  return parsed.href.replace(/\/+$/, "");
}

function queryString(query: RequestSpec["query"]): string {
  if (query === undefined) return "";
  const params = new URLSearchParams();
  for (const [key, value] of Object.entries(query)) if (value !== undefined) params.set(key, String(value));
  const text = params.toString();
  return text === "" ? "" : `?${text}`;
}

async function readJson(reply: Exchange, spec: RequestSpec): Promise<unknown> {
  const text = await reply.text();
  if (text === "") return undefined;
  try {
    return JSON.parse(text) as unknown;
  } catch {
    throw new WardenHttpError(
      reply.status,
      { code: "reply-not-json", detail: `the node answered ${spec.method} ${spec.path} with a body that is not JSON` },
      spec,
    );
  }
}

/** The problem document of an error reply, or a stand-in naming the status when there is none. */
async function readProblem(reply: Exchange): Promise<Problem> {
  const response = reply.response();
  const fallback: Problem = { code: `http-${response.status}`, status: response.status, detail: `HTTP ${response.status} ${response.statusText}`.trim() };
  let text: string;
  try {
    text = await response.text();
  } catch {
    return fallback;
  }
  if (text.length > MAX_PROBLEM_BYTES) return fallback;
  try {
    const parsed = JSON.parse(text) as unknown;
    if (typeof parsed === "object" && parsed !== null && typeof (parsed as { code?: unknown }).code === "string") return parsed as Problem;
  } catch {
    // not JSON: fall through
  }
  return fallback;
}
