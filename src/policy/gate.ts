/**
 * A run's decision point (DESIGN.md "Governed tool calls"): an HTTP endpoint the node serves for
 * the run's pre-tool hook. One request is one call: `POST /v1/decide` with the CLI's hook input as
 * the body; the node decides with the run's policy, appends the decision to the run's journal and
 * waits until it is durable, then answers 200 with the CLI's own hook output: an empty body for
 * allow, `{"hookSpecificOutput": {…, "permissionDecision": "deny"|"defer", …}}` otherwise (hook.ts).
 * An allow is never answered before its decision is durable (write-ahead, as the egress proxy's
 * connections are); a decision the journal lost is answered as a denial.
 *
 * It is served on the run's unix socket (bound only into the run's sandbox, reached there through
 * the sandbox bridge's decision port, or by the command hook) and, for an unconfined Claude run, on
 * an ephemeral loopback port that answers only a request bearing the run's own token (compared in
 * constant time): any local process can reach a loopback port, only the run's agent has its token.
 * Claude Code's HTTP hook then reaches it with no process started per call.
 *
 * Everything on it comes from the agent's side: a call id is decided once (a second decision for it
 * is refused, so an agent cannot pre-register an allow for a call the model has not made yet and
 * have it count), an input over the bound or not a tool call is refused, and neither is journaled
 * as a decision. Anything but a 200 (a wrong path, method or token) is an error the hook turns
 * into a blocked call.
 */
import * as fs from "node:fs";
import * as http from "node:http";
import type { AddressInfo } from "node:net";
import { timingSafeEqual } from "node:crypto";
import { isWardenError } from "../core/errors.js";
import type { ToolAction } from "./schema.js";
import { hookOutput, type HookAnswer } from "./hook.js";
import { hookToolCall, type HookProvider, type ToolCall } from "./tool-call.js";
import type { ToolDecision, ToolPolicy, ToolRequest, ToolVerdict } from "./tool-policy.js";

/** The journal entry of one decision. */
export interface PolicyDecisionEvent {
  readonly type: "policy.decision";
  readonly call_id: string;
  readonly tool: string;
  readonly action: ToolAction;
  readonly decision: ToolDecision;
  readonly policies: string[];
  readonly fingerprint: string;
  readonly reason?: string;
}

export interface DecisionJournal {
  /** Appends the entry; resolves true once it is durable, false when the journal lost it. */
  append(event: PolicyDecisionEvent): Promise<boolean>;
}

export interface DecisionGateOptions {
  readonly policy: ToolPolicy;
  /** the run's workspace: where relative paths of a call are resolved */
  readonly workspace: string;
  readonly principal: ToolRequest["principal"];
  readonly context: ToolRequest["context"];
  readonly journal: DecisionJournal;
  /**
   * The run can wait for an operator (DESIGN.md "Governed tool calls"): an `ask` is answered
   * `defer`, which stops the CLI with the call unrun, and the runner parks the run. Without it an
   * ask is a denial that says so.
   */
  readonly defers?: boolean;
  /** A call an operator approved after the run was parked on it: its hook, asked again when the CLI resumes, is answered allow once. */
  readonly approved?: { readonly callId: string };
  /** whose hook input the socket reads (default claude) */
  readonly provider?: HookProvider;
}

/** Largest hook input read (a Write call carries the whole file). */
const MAX_INPUT_BYTES = 16 * 1024 * 1024;
/** A hook that sends nothing complete within this time is dropped. */
const INPUT_TIMEOUT_MS = 60_000;
/** Calls decided per run at most: past it every call is denied (the decisions are journaled). */
const MAX_CALLS = 100_000;

export type Answer = HookAnswer;

export class DecisionGate {
  readonly socketPath: string;
  readonly #server: http.Server;
  /** the loopback listener of an unconfined Claude run (listenLoopback) */
  #loopback: http.Server | undefined;
  readonly #options: DecisionGateOptions;
  readonly #decided = new Map<string, ToolVerdict>();
  readonly #pending = new Set<Promise<void>>();
  readonly #listeners = new Set<(callId: string, verdict: ToolVerdict, call: ToolCall) => void>();
  /** the approved call still to be answered allow (once) */
  #approved: string | undefined;

  private constructor(socketPath: string, options: DecisionGateOptions) {
    this.socketPath = socketPath;
    this.#options = options;
    this.#approved = options.approved?.callId;
    this.#server = serverFor((req, res) => this.#serve(req, res));
  }

  /** Listens on `socketPath` (its directory must be private to the node). */
  static async listen(socketPath: string, options: DecisionGateOptions): Promise<DecisionGate> {
    const gate = new DecisionGate(socketPath, options);
    await new Promise<void>((resolve, reject) => {
      gate.#server.once("error", reject);
      gate.#server.listen(socketPath, () => {
        gate.#server.off("error", reject);
        resolve();
      });
    });
    fs.chmodSync(socketPath, 0o600);
    return gate;
  }

  /** The journaled decision for a call, when there is one. */
  decision(callId: string): ToolVerdict | undefined {
    return this.#decided.get(callId);
  }

  /** Called with every decision once it is durable, and the call it decided. */
  onDecision(listener: (callId: string, verdict: ToolVerdict, call: ToolCall) => void): void {
    this.#listeners.add(listener);
  }

  /** Decides one call from the hook's input (exported for the bench: the same path a socket takes). */
  async decide(input: unknown): Promise<Answer> {
    let call: ToolCall;
    try {
      call = hookToolCall(this.#options.provider ?? "claude", input, this.#options.workspace);
    } catch (error) {
      return { decision: "deny", reason: isWardenError(error) ? `${error.message} (${error.code})` : "the tool call could not be read" };
    }
    if (call.callId === this.#approved) {
      // Decided `ask` before the run was parked, and approved since (both journaled): the resumed CLI asks again.
      this.#approved = undefined;
      const approved: ToolVerdict = { decision: "allow", policies: [] };
      this.#decided.set(call.callId, approved);
      for (const listener of this.#listeners) listener(call.callId, approved, call);
      return { decision: "allow" };
    }
    if (this.#decided.has(call.callId) || call.callId === this.#options.approved?.callId) return { decision: "deny", reason: `call ${call.toolUseId} was decided already; a call is decided once` };
    let verdict: ToolVerdict =
      this.#decided.size >= MAX_CALLS
        ? { decision: "deny", policies: [], reason: `this run reached its bound of ${MAX_CALLS} tool calls` }
        : this.#options.policy.decide({ principal: this.#options.principal, action: call.action, callId: call.callId, resource: call.resource, context: this.#options.context });
    // Held before the append: a second connection for the same call, racing this one, is refused.
    this.#decided.set(call.callId, verdict);
    const durable = await this.#options.journal.append({
      type: "policy.decision",
      call_id: call.callId,
      tool: call.resource.tool,
      action: call.action,
      decision: verdict.decision,
      policies: [...verdict.policies],
      fingerprint: call.fingerprint,
      ...(verdict.reason === undefined ? {} : { reason: verdict.reason }),
    });
    if (!durable) {
      verdict = { decision: "deny", policies: verdict.policies, reason: "the decision could not be journaled, so the call is not allowed" };
      this.#decided.set(call.callId, verdict);
      return { decision: "deny", ...(verdict.reason === undefined ? {} : { reason: verdict.reason }) };
    }
    for (const listener of this.#listeners) listener(call.callId, verdict, call);
    if (verdict.decision === "allow") return { decision: "allow" };
    if (verdict.decision === "ask" && this.#options.defers === true) return { decision: "defer", reason: `warden policy: ${verdict.reason ?? "needs an operator's approval"}` };
    // A run that cannot wait for an operator (and Codex's `exec` mode never can: its hooks cannot
    // ask): a call that needs one is denied, and says so.
    const cannotWait = this.#options.provider === "codex" ? "codex exec cannot ask for an approval, so ask is deny" : "this run cannot wait for one, so the call is denied";
    const reason = verdict.decision === "ask" ? `${verdict.reason ?? "needs an operator's approval"}; ${cannotWait}` : verdict.reason;
    return { decision: "deny", ...(reason === undefined ? {} : { reason: `warden policy: ${reason}` }) };
  }

  /**
   * Also serves the run's decisions on an ephemeral port of 127.0.0.1, to a request bearing
   * `Authorization: Bearer <token>` only; resolves the port.
   */
  async listenLoopback(token: string): Promise<number> {
    const expected = Buffer.from(`Bearer ${token}`);
    const server = serverFor((req, res) => {
      const presented = Buffer.from(req.headers.authorization ?? "");
      if (presented.byteLength !== expected.byteLength || !timingSafeEqual(presented, expected)) {
        req.resume();
        return reply(res, 401, "not this run's token");
      }
      this.#serve(req, res);
    });
    this.#loopback = server;
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(0, "127.0.0.1", () => {
        server.off("error", reject);
        resolve();
      });
    });
    return (server.address() as AddressInfo).port;
  }

  #serve(req: http.IncomingMessage, res: http.ServerResponse): void {
    if (req.url !== DECIDE_PATH || req.method !== "POST") {
      req.resume();
      return reply(res, req.url !== DECIDE_PATH ? 404 : 405, `only POST ${DECIDE_PATH}`);
    }
    const chunks: Buffer[] = [];
    let bytes = 0;
    let over = false;
    req.on("data", (chunk: Buffer) => {
      bytes += chunk.length;
      if (bytes > MAX_INPUT_BYTES) over = true;
      else chunks.push(chunk);
    });
    req.on("error", () => res.destroy());
    req.on("end", () => {
      const work = this.#answer(over, chunks).then(
        (answer) => {
          if (!res.destroyed) {
            const body = hookOutput(answer);
            res.writeHead(200, { "content-type": "application/json", "content-length": Buffer.byteLength(body) });
            res.end(body);
          }
        },
        () => {
          res.destroy();
        },
      );
      this.#pending.add(work);
      void work.finally(() => this.#pending.delete(work));
    });
  }

  async #answer(over: boolean, chunks: readonly Buffer[]): Promise<Answer> {
    if (over) return { decision: "deny", reason: `the tool call is over ${MAX_INPUT_BYTES} bytes` };
    let input: unknown;
    try {
      input = JSON.parse(Buffer.concat(chunks).toString("utf8"));
    } catch {
      return { decision: "deny", reason: "the hook's input is not JSON" };
    }
    return this.decide(input);
  }

  /** Stops listening, ends open connections and waits for decisions under way. */
  async close(): Promise<void> {
    const servers = this.#loopback === undefined ? [this.#server] : [this.#server, this.#loopback];
    const closed = Promise.all(servers.map((server) => new Promise<void>((resolve) => server.close(() => resolve()))));
    await Promise.allSettled([...this.#pending]);
    // The agent is gone: a hook still connected has no call left to ask about.
    for (const server of servers) server.closeAllConnections();
    await closed;
  }
}

/** The path of the decision endpoint. */
export const DECIDE_PATH = "/v1/decide";

function serverFor(handler: (req: http.IncomingMessage, res: http.ServerResponse) => void): http.Server {
  const server = http.createServer({ requestTimeout: INPUT_TIMEOUT_MS, headersTimeout: INPUT_TIMEOUT_MS }, handler);
  // A hook that connects and sends nothing is dropped, not kept for the run's length.
  server.setTimeout(INPUT_TIMEOUT_MS, (socket) => socket.destroy());
  server.on("clientError", (_error, socket) => socket.destroy());
  return server;
}

function reply(res: http.ServerResponse, status: number, message: string): void {
  const body = `${message}\n`;
  res.writeHead(status, { "content-type": "text/plain", "content-length": Buffer.byteLength(body) });
  res.end(body);
}
