/**
 * A model server on loopback that answers from a script, for rehearsing a bundle with the real
 * Claude Code and Codex CLIs offline, and for testing warden with them. Each `POST /v1/messages`
 * (Anthropic) or `POST /v1/responses` (OpenAI) takes the next turn of the script; every request,
 * answered or not, is recorded with its parsed body (never its headers: they carry the API key).
 * A request past the end of the script is answered with a 400 error the CLIs do not retry.
 *
 * Only node:http: the server is loaded by `warden model-serve`, which must start light.
 */
import * as http from "node:http";
import type { AddressInfo, Socket } from "node:net";
import { anthropicEvents, errorBody, openaiEvents, sseFrame, type Protocol, type SseEvent } from "./protocols.js";
import type { ModelScript, ScriptTurn } from "./script.js";

export interface ModelRequest {
  /** 0, 1, … in arrival order */
  readonly seq: number;
  readonly protocol: Protocol | null;
  readonly method: string;
  /** path and query, as sent */
  readonly path: string;
  /** index of the script turn that answered it; null when none did (unknown route, script exhausted) */
  readonly turn: number | null;
  /** the JSON body; null when there was none or it was not JSON */
  readonly body: unknown;
  /** what the server did: `answered`, `dropped`, `exhausted`, `not-found`, `bad-request`, `aborted` */
  outcome: string;
}

export interface ScriptedModelOptions {
  readonly script: ModelScript;
  readonly host?: string;
  /** 0 (default): any free port */
  readonly port?: number;
  /** called with each request once its answer is decided */
  readonly onRequest?: (request: ModelRequest) => void;
}

const MAX_BODY_BYTES = 64 * 1024 * 1024;
/** How many events of a dropped turn are sent before the connection is cut. */
const DROP_AFTER_EVENTS = 2;

function protocolOf(method: string, path: string): Protocol | null {
  if (method !== "POST") return null;
  const route = path.split("?")[0];
  if (route === "/v1/messages") return "anthropic";
  if (route === "/v1/responses") return "openai";
  return null;
}

export class ScriptedModelServer {
  readonly #server: http.Server;
  readonly #sockets = new Set<Socket>();
  readonly #onRequest: ((request: ModelRequest) => void) | undefined;
  readonly #requests: ModelRequest[] = [];
  readonly #waiters = new Set<() => void>();
  #script: ModelScript;
  #next = 0;
  #url = "";

  private constructor(options: ScriptedModelOptions) {
    this.#script = options.script;
    this.#onRequest = options.onRequest;
    this.#server = http.createServer((req, res) => void this.#handle(req, res));
    this.#server.on("connection", (socket) => {
      this.#sockets.add(socket);
      socket.on("close", () => this.#sockets.delete(socket));
    });
  }

  static async start(options: ScriptedModelOptions): Promise<ScriptedModelServer> {
    const server = new ScriptedModelServer(options);
    await new Promise<void>((resolve, reject) => {
      server.#server.once("error", reject);
      server.#server.listen(options.port ?? 0, options.host ?? "127.0.0.1", () => resolve());
    });
    const address = server.#server.address() as AddressInfo;
    const host = address.family === "IPv6" ? `[${address.address}]` : address.address;
    server.#url = `http://${host}:${address.port}`;
    return server;
  }

  /** `http://host:port` (the CLIs' base URL: Claude Code takes it as is, Codex with `/v1`). */
  get url(): string {
    return this.#url;
  }

  /** Every request so far, in arrival order. */
  get requests(): readonly ModelRequest[] {
    return this.#requests;
  }

  /** Requests a script turn answered or was cut on (not the refused ones). */
  get turnsTaken(): number {
    return this.#next;
  }

  /** Replaces the script and starts again at its first turn; the request log is kept. */
  load(script: ModelScript): void {
    this.#script = script;
    this.#next = 0;
  }

  /** Resolves once `count` requests have arrived (whatever their answer). */
  async waitForRequests(count: number): Promise<void> {
    while (this.#requests.length < count) {
      await new Promise<void>((resolve) => this.#waiters.add(resolve));
    }
  }

  async close(): Promise<void> {
    const closed = new Promise<void>((resolve) => this.#server.close(() => resolve()));
    for (const socket of this.#sockets) socket.destroy();
    await closed;
  }

  #record(request: ModelRequest): void {
    this.#requests.push(request);
    for (const wake of this.#waiters) wake();
    this.#waiters.clear();
  }

  async #handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const method = req.method ?? "GET";
    const path = req.url ?? "/";
    const protocol = protocolOf(method, path);
    const raw = await readBody(req);
    let body: unknown = null;
    if (raw !== undefined && raw.byteLength > 0) {
      try {
        body = JSON.parse(raw.toString("utf8")) as unknown;
      } catch {
        body = null;
      }
    }
    const request: ModelRequest = { seq: this.#requests.length, protocol, method, path, turn: null, body, outcome: "" };
    if (raw === undefined) return this.#refuse(request, res, 413, "bad-request", "request body too large");
    if (protocol === null) return this.#refuse(request, res, 404, "not-found", `no route ${method} ${path.split("?")[0]}`);
    if (typeof body !== "object" || body === null) return this.#refuse(request, res, 400, "bad-request", "the body is not a JSON object");
    const turn = this.#script.turns[this.#next];
    if (turn === undefined) {
      return this.#refuse(request, res, 400, "exhausted", `scripted model: the script has no turn ${this.#next + 1} (it has ${this.#script.turns.length})`);
    }
    const index = this.#next++;
    const answered: ModelRequest = { ...request, turn: index, outcome: turn.drop === true ? "dropped" : "answered" };
    this.#record(answered);
    this.#onRequest?.(answered);
    await this.#answer(req, res, turn, protocol === "anthropic" ? anthropicEvents(turn, answered.seq) : openaiEvents(turn, answered.seq), answered);
  }

  #refuse(request: ModelRequest, res: http.ServerResponse, status: number, outcome: string, message: string): void {
    const refused = { ...request, outcome };
    this.#record(refused);
    this.#onRequest?.(refused);
    const payload = JSON.stringify(errorBody(request.protocol ?? "anthropic", message));
    res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(payload) });
    res.end(payload);
  }

  async #answer(req: http.IncomingMessage, res: http.ServerResponse, turn: ScriptTurn, events: SseEvent[], record: ModelRequest): Promise<void> {
    if (turn.delay_ms !== undefined && turn.delay_ms > 0) {
      const waited = await new Promise<boolean>((resolve) => {
        const timer = setTimeout(() => resolve(true), turn.delay_ms);
        // The client gave up (a CLI killed or timed out): nothing more to send.
        res.once("close", () => {
          clearTimeout(timer);
          resolve(false);
        });
      });
      if (!waited) {
        record.outcome = "aborted";
        return;
      }
    }
    // No `connection` header of our own: Node answers keep-alive or close as the request asked.
    // Claude Code confined asks through warden's egress proxy, which sends `Connection: close`; a
    // `keep-alive` here told the CLI to reuse the socket the server was closing, and its next
    // request failed ("API Error: 400 status code (no body)").
    res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
    const sent = turn.drop === true ? events.slice(0, DROP_AFTER_EVENTS) : events;
    for (const e of sent) res.write(sseFrame(e));
    if (turn.drop === true) {
      // Cut mid-stream: the client sees the connection end before the answer completes.
      await new Promise<void>((resolve) => res.write("", () => resolve()));
      req.socket.destroy();
      return;
    }
    res.end();
  }
}

/** The whole body, or undefined past the bound (the rest is drained, not kept). */
function readBody(req: http.IncomingMessage): Promise<Buffer | undefined> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let bytes = 0;
    req.on("data", (chunk: Buffer) => {
      bytes += chunk.byteLength;
      if (bytes <= MAX_BODY_BYTES) chunks.push(chunk);
    });
    req.on("end", () => resolve(bytes > MAX_BODY_BYTES ? undefined : Buffer.concat(chunks)));
    req.on("error", () => resolve(undefined));
  });
}
