/**
 * Bounds on the node's open connections (DESIGN.md "Limits"): `limits.connections` in all and
 * `limits.connectionsPerClient` from one remote address, so that idle sockets cannot take the
 * node to its descriptor limit (25,000 from one local client once did, and a real request failed).
 *
 * The operator keeps a way in: a connection over a bound first closes the oldest connection that
 * is not an operator's and has no request in flight — one that never sent a request before any
 * other — and only when there is none is the new connection refused (`503
 * connections-exhausted`, or `client-connections-exhausted` for one address, then closed). A
 * connection that sends no request within FIRST_REQUEST_MS is closed.
 */
import type { Server } from "node:http";
import type { Socket } from "node:net";
import { problemBody, type ProblemSpec } from "./problem.js";
import { PROBLEM_CONTENT_TYPE } from "../api/problem.js";

/** How long a new connection may take to send its first request's first bytes. */
export const FIRST_REQUEST_MS = 10_000;

export interface ConnectionBounds {
  readonly total: number;
  readonly perClient: number;
  readonly firstRequestMs?: number;
}

interface Tracked {
  readonly client: string;
  /** requests whose answer has not ended */
  inFlight: number;
  /** sent at least one request */
  spoke: boolean;
  /** an operator's request came over it: never closed to make room */
  operator: boolean;
  timer: NodeJS.Timeout | undefined;
}

export class ConnectionGuard {
  /** Insertion order is age: the first is the oldest. */
  readonly #open = new Map<Socket, Tracked>();
  readonly #perClient = new Map<string, number>();
  readonly #bounds: ConnectionBounds;
  /** connections refused or closed to make room (for the metrics and tests) */
  refused = 0;
  evicted = 0;

  constructor(bounds: ConnectionBounds) {
    this.#bounds = bounds;
  }

  /** Watches `server`'s connections and requests. */
  attach(server: Server): void {
    server.on("connection", (socket: Socket) => this.#admit(socket));
    server.on("request", (request: { socket: Socket }, response: { once(event: "close", f: () => void): void }) => {
      const tracked = this.#open.get(request.socket);
      if (tracked === undefined) return;
      tracked.spoke = true;
      tracked.inFlight++;
      if (tracked.timer !== undefined) {
        clearTimeout(tracked.timer);
        tracked.timer = undefined;
      }
      response.once("close", () => tracked.inFlight--);
    });
  }

  /** Marks the connection of an operator's authenticated request: it is never closed to make room. */
  markOperator(socket: Socket): void {
    const tracked = this.#open.get(socket);
    if (tracked !== undefined) tracked.operator = true;
  }

  get open(): number {
    return this.#open.size;
  }

  #admit(socket: Socket): void {
    const client = socket.remoteAddress ?? "unknown";
    if ((this.#perClient.get(client) ?? 0) >= this.#bounds.perClient && !this.#makeRoom(client)) {
      return this.#refuse(socket, { status: 503, code: "client-connections-exhausted", detail: `this address holds ${this.#bounds.perClient} connections to the node, its limit; close one and try again` });
    }
    if (this.#open.size >= this.#bounds.total && !this.#makeRoom(undefined)) {
      return this.#refuse(socket, { status: 503, code: "connections-exhausted", detail: `the node holds ${this.#bounds.total} connections, its limit; try again later` });
    }
    const tracked: Tracked = { client, inFlight: 0, spoke: false, operator: false, timer: undefined };
    tracked.timer = setTimeout(() => socket.destroy(), this.#bounds.firstRequestMs ?? FIRST_REQUEST_MS);
    tracked.timer.unref();
    this.#open.set(socket, tracked);
    this.#perClient.set(client, (this.#perClient.get(client) ?? 0) + 1);
    socket.once("close", () => this.#forget(socket));
  }

  /** Closes the connection that matters least (of `client`, or any): true when one was closed. */
  #makeRoom(client: string | undefined): boolean {
    let idle: Socket | undefined;
    for (const [socket, t] of this.#open) {
      if (t.operator || t.inFlight > 0 || (client !== undefined && t.client !== client)) continue;
      if (!t.spoke) {
        idle = socket;
        break;
      }
      idle ??= socket;
    }
    if (idle === undefined) return false;
    this.#forget(idle);
    idle.destroy();
    this.evicted++;
    return true;
  }

  #forget(socket: Socket): void {
    const tracked = this.#open.get(socket);
    if (tracked === undefined) return;
    if (tracked.timer !== undefined) clearTimeout(tracked.timer);
    this.#open.delete(socket);
    const left = (this.#perClient.get(tracked.client) ?? 1) - 1;
    if (left <= 0) this.#perClient.delete(tracked.client);
    else this.#perClient.set(tracked.client, left);
  }

  /** Answers a refused connection with its problem, then closes it (nothing it sends is read). */
  #refuse(socket: Socket, spec: ProblemSpec): void {
    this.refused++;
    const body = JSON.stringify(problemBody(spec));
    socket.on("error", () => {});
    socket.end(
      `HTTP/1.1 ${spec.status} Service Unavailable\r\nContent-Type: ${PROBLEM_CONTENT_TYPE}\r\nContent-Length: ${Buffer.byteLength(body)}\r\n` +
        `Retry-After: 1\r\nConnection: close\r\n\r\n${body}`,
    );
    // The HTTP server's own listener already took the socket: it must not parse what follows.
    socket.destroySoon();
  }
}
