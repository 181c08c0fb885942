/**
 * The node's egress proxy for one run: the only way out of a sandbox with no network of its own.
 * It listens on a unix socket (bound into the sandbox, reached through the bridge, bridge.ts) and
 * speaks the two forms an HTTP client sends a proxy: `CONNECT host:port` (TLS and anything else)
 * and absolute-form plain HTTP (`GET http://host:port/path`, one request per connection). A target is allowed only when its
 * `host:port` is on the run's allowlist, compared exactly (no wildcard, no resolution: an
 * allowlisted name does not allow the address it resolves to, nor the other way round).
 *
 * Every attempt is journaled by the node, as an effect it observed (DESIGN.md "Journal",
 * network effects): effect.started is durable before the upstream connection is opened
 * (write-ahead), effect.finished follows when both sides have closed, with the bytes each way and
 * the duration. A denied attempt is journaled too (started and finished `failed`, allowed false).
 * `close()` ends every open connection and waits for its record, so the run's process effect
 * finishes after all of them (G6).
 */
import * as net from "node:net";
import * as fs from "node:fs";
import { canonicalDigest, type JsonValue } from "../core/canonical.js";

export interface EgressJournal {
  /** Appends the entry; resolves true once it is durable, false when the journal lost it. */
  append(event: EgressEvent): Promise<boolean>;
}

export type EgressEvent =
  | { readonly type: "effect.started"; readonly effect_id: string; readonly kind: "network"; readonly name: string; readonly fingerprint: string }
  | { readonly type: "effect.finished"; readonly effect_id: string; readonly outcome: "succeeded" | "failed"; readonly detail: JsonValue };

/** Longest request head read before the target is known. */
const MAX_HEAD_BYTES = 64 * 1024;
/** Connections open at once per run; more are refused (and journaled as denied). */
const MAX_CONNECTIONS = 256;
/** A client that sends no complete request head within this time is dropped. */
const HEAD_TIMEOUT_MS = 30_000;

/** `host:port` in the form the allowlist uses: lower-case host, IPv6 without brackets. */
export function egressTarget(host: string, port: number): string {
  const bare = host.startsWith("[") && host.endsWith("]") ? host.slice(1, -1) : host;
  return `${bare.toLowerCase()}:${port}`;
}

/** Parses an operator's `host:port` (IPv6 in brackets); undefined when it is not one. */
export function parseEgressEntry(entry: string): string | undefined {
  const m = /^(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.-]+):([0-9]{1,5})$/.exec(entry);
  if (m === null) return undefined;
  const port = Number(m[2]);
  if (port < 1 || port > 65535) return undefined;
  return egressTarget(m[1] as string, port);
}

interface Target {
  readonly host: string;
  readonly port: number;
  readonly connect: boolean;
  /** for plain HTTP: the head to send upstream (origin-form, proxy headers removed) */
  readonly head?: Buffer;
}

export class EgressProxy {
  readonly socketPath: string;
  readonly #server: net.Server;
  readonly #allow: ReadonlySet<string>;
  readonly #journal: EgressJournal;
  readonly #sockets = new Set<net.Socket>();
  readonly #records = new Set<Promise<void>>();
  #seq = 0;
  #closed = false;

  private constructor(socketPath: string, allow: readonly string[], journal: EgressJournal) {
    this.socketPath = socketPath;
    this.#allow = new Set(allow);
    this.#journal = journal;
    this.#server = net.createServer({ allowHalfOpen: true }, (client) => this.#accept(client));
  }

  /** Listens on `socketPath` (its directory must be private to the node). */
  /** `counted`: connections the run's journal has already (a resumed run's first leg): ids go on after them. */
  static async listen(socketPath: string, allow: readonly string[], journal: EgressJournal, counted = 0): Promise<EgressProxy> {
    const proxy = new EgressProxy(socketPath, allow, journal);
    proxy.#seq = counted;
    await new Promise<void>((resolve, reject) => {
      proxy.#server.once("error", reject);
      proxy.#server.listen(socketPath, () => {
        proxy.#server.off("error", reject);
        resolve();
      });
    });
    // Connecting needs write permission on the socket: the sandbox's user is the node's.
    fs.chmodSync(socketPath, 0o600);
    return proxy;
  }

  /** Stops accepting, ends every open connection, and resolves once each is journaled. */
  async close(): Promise<void> {
    this.#closed = true;
    // server.close() calls back only once every connection has ended: end them first, or close()
    // waits for whichever side of a tunnel would have ended it by itself (if ever).
    const stopped = new Promise<void>((resolve) => this.#server.close(() => resolve()));
    for (const s of this.#sockets) s.destroy();
    await stopped;
    while (this.#records.size > 0) await Promise.all([...this.#records]);
  }

  #track(socket: net.Socket): void {
    this.#sockets.add(socket);
    socket.once("close", () => this.#sockets.delete(socket));
  }

  #accept(client: net.Socket): void {
    this.#track(client);
    client.on("error", () => client.destroy());
    if (this.#closed) {
      client.destroy();
      return;
    }
    let head = Buffer.alloc(0);
    const timer = setTimeout(() => client.destroy(), HEAD_TIMEOUT_MS);
    const onData = (chunk: Buffer): void => {
      head = Buffer.concat([head, chunk]);
      const end = head.indexOf("\r\n\r\n");
      if (end < 0) {
        if (head.length > MAX_HEAD_BYTES) {
          clearTimeout(timer);
          client.off("data", onData);
          answer(client, 431, "request head too large");
        }
        return;
      }
      clearTimeout(timer);
      client.off("data", onData);
      client.pause();
      const rest = head.subarray(end + 4);
      const target = parseHead(head.subarray(0, end).toString("latin1"));
      if (target === undefined) {
        answer(client, 400, "warden's egress proxy takes CONNECT host:port or an absolute http:// URL");
        return;
      }
      this.#record(this.#open(client, target, rest));
    };
    client.on("data", onData);
  }

  #record(work: Promise<void>): void {
    const p = work.catch(() => undefined).finally(() => this.#records.delete(p));
    this.#records.add(p);
  }

  async #open(client: net.Socket, target: Target, rest: Buffer): Promise<void> {
    const name = egressTarget(target.host, target.port);
    const effect_id = `egress-${++this.#seq}`;
    const started = Date.now();
    const allowed = this.#allow.has(name) && this.#sockets.size <= MAX_CONNECTIONS * 2;
    const written = await this.#journal.append({
      type: "effect.started",
      effect_id,
      kind: "network",
      name,
      fingerprint: canonicalDigest({ host: name.slice(0, name.lastIndexOf(":")), port: target.port, method: target.connect ? "CONNECT" : "http" }),
    });
    const finish = (outcome: "succeeded" | "failed", extra: Record<string, JsonValue>): Promise<boolean> =>
      this.#journal.append({
        type: "effect.finished",
        effect_id,
        outcome,
        detail: { egress: { target: name, allowed, ...extra, duration_ms: Date.now() - started } },
      });
    if (!allowed || !written || this.#closed) {
      answer(client, 403, `warden: egress to ${name} is not allowed for this run`);
      await finish("failed", { bytes_up: 0, bytes_down: 0, ...(written && allowed ? { error: "run-ended" } : {}) });
      return;
    }
    const upstream = net.connect({ host: target.host.replace(/^\[|\]$/g, ""), port: target.port, allowHalfOpen: true });
    this.#track(upstream);
    let connected = false;
    let error: string | undefined;
    const closed = Promise.all([once(client, "close"), once(upstream, "close")]);
    const drop = (): void => {
      client.destroy();
      upstream.destroy();
    };
    upstream.on("error", (e: NodeJS.ErrnoException) => {
      error ??= e.code ?? "upstream-error";
      if (!connected) answer(client, 502, `warden: ${name}: ${error}`);
      drop();
    });
    client.on("error", drop);
    client.on("close", () => upstream.destroy());
    upstream.once("connect", () => {
      connected = true;
      if (target.connect) client.write("HTTP/1.1 200 Connection Established\r\n\r\n");
      else upstream.write(target.head as Buffer);
      if (rest.length > 0) upstream.write(rest);
      client.pipe(upstream);
      upstream.pipe(client);
      client.resume();
    });
    upstream.on("close", () => {
      if (!client.writableEnded) client.end();
      // Whatever the client still sends has nowhere to go.
      setImmediate(() => client.destroy());
    });
    await closed;
    await finish(connected && error === undefined ? "succeeded" : "failed", {
      bytes_up: upstream.bytesWritten,
      bytes_down: upstream.bytesRead,
      ...(error === undefined ? {} : { error }),
    });
  }
}

function once(socket: net.Socket, event: "close"): Promise<void> {
  return new Promise((resolve) => {
    if (socket.destroyed && socket.closed) resolve();
    else socket.once(event, () => resolve());
  });
}

function answer(client: net.Socket, status: number, message: string): void {
  const reason = { 400: "Bad Request", 403: "Forbidden", 431: "Request Header Fields Too Large", 502: "Bad Gateway" }[status] ?? "Error";
  const body = `${message}\n`;
  client.end(`HTTP/1.1 ${status} ${reason}\r\nContent-Type: text/plain\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`);
}

/** The target of a proxy request head (without its blank line), or undefined when it is none. */
function parseHead(head: string): Target | undefined {
  const lines = head.split("\r\n");
  const m = /^([A-Z]+) (\S+) (HTTP\/1\.[01])$/.exec(lines[0] ?? "");
  if (m === null) return undefined;
  const [, method, uri, version] = m as unknown as [string, string, string, string];
  if (method === "CONNECT") {
    const hp = /^(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.-]+):([0-9]{1,5})$/.exec(uri);
    if (hp === null) return undefined;
    const port = Number(hp[2]);
    return port >= 1 && port <= 65535 ? { host: hp[1] as string, port, connect: true } : undefined;
  }
  let url: URL;
  try {
    url = new URL(uri);
  } catch {
    return undefined;
  }
  if (url.protocol !== "http:" || url.username !== "" || url.password !== "") return undefined;
  const port = url.port === "" ? 80 : Number(url.port);
  // One request per connection: the bytes after it are piped as they come, so a second request on
  // a kept-alive connection would reach the server still in absolute form (and could name another
  // host). `Connection: close` makes the server end the connection after its answer, and the
  // client open a new one (journaled on its own) for its next request.
  const headers = lines.slice(1).filter((l) => !/^(proxy-connection|proxy-authorization|connection|keep-alive):/i.test(l));
  const out = [`${method} ${url.pathname}${url.search} ${version}`, ...headers, "Connection: close", "", ""].join("\r\n");
  return { host: url.hostname, port, connect: false, head: Buffer.from(out, "latin1") };
}
