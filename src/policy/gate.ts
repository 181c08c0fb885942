/**
 * A run's decision point (DESIGN.md "Governed tool calls"): a unix socket the node listens on for
 * the run's pre-tool hook (hook.ts). One connection is one call: the hook sends the CLI's hook
 * input and half-closes; the node decides with the run's policy, appends the decision to the
 * run's journal and waits until it is durable, then answers `{decision, reason?}` and closes. An
 * allow is never answered before its decision is durable (write-ahead, as the egress proxy's
 * connections are); a decision the journal lost is answered as a denial.
 *
 * Everything on the socket comes from the agent's side: a call id is decided once (a second
 * decision for it is refused, so an agent cannot pre-register an allow for a call the model has
 * not made yet and have it count), an input over the bound or not a tool call is refused, and
 * neither is journaled as a decision.
 */
import * as fs from "node:fs";
import * as net from "node:net";
import { isWardenError } from "../core/errors.js";
import type { ToolAction } from "./schema.js";
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
  /** whose hook input the socket reads (default claude) */
  readonly provider?: HookProvider;
}

/** Largest hook input read (a Write call carries the whole file). */
const MAX_INPUT_BYTES = 16 * 1024 * 1024;
/** A hook that sends nothing complete within this time is dropped. */
const INPUT_TIMEOUT_MS = 60_000;
/** Calls decided per run at most: past it every call is denied (the decisions are journaled). */
const MAX_CALLS = 100_000;

export interface Answer {
  readonly decision: "allow" | "deny";
  readonly reason?: string;
}

export class DecisionGate {
  readonly socketPath: string;
  readonly #server: net.Server;
  readonly #options: DecisionGateOptions;
  readonly #decided = new Map<string, ToolVerdict>();
  readonly #sockets = new Set<net.Socket>();
  readonly #pending = new Set<Promise<void>>();
  readonly #listeners = new Set<(callId: string, verdict: ToolVerdict, call: ToolCall) => void>();

  private constructor(socketPath: string, options: DecisionGateOptions) {
    this.socketPath = socketPath;
    this.#options = options;
    this.#server = net.createServer({ allowHalfOpen: true }, (socket) => this.#accept(socket));
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
    if (this.#decided.has(call.callId)) return { decision: "deny", reason: `call ${call.toolUseId} was decided already; a call is decided once` };
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
    // A run cannot wait for an operator yet (and Codex's `exec` mode never can: its hooks cannot
    // ask): a call that needs one is denied, and says so.
    const cannotWait = this.#options.provider === "codex" ? "codex exec cannot ask for an approval, so ask is deny" : "this run cannot wait for one, so the call is denied";
    const reason = verdict.decision === "ask" ? `${verdict.reason ?? "needs an operator's approval"}; ${cannotWait}` : verdict.reason;
    return { decision: "deny", ...(reason === undefined ? {} : { reason: `warden policy: ${reason}` }) };
  }

  #accept(socket: net.Socket): void {
    this.#sockets.add(socket);
    const chunks: Buffer[] = [];
    let bytes = 0;
    let over = false;
    socket.setTimeout(INPUT_TIMEOUT_MS, () => socket.destroy());
    socket.on("error", () => socket.destroy());
    socket.on("close", () => this.#sockets.delete(socket));
    socket.on("data", (chunk: Buffer) => {
      bytes += chunk.length;
      if (bytes > MAX_INPUT_BYTES) over = true;
      else chunks.push(chunk);
    });
    socket.on("end", () => {
      socket.setTimeout(0);
      const work = this.#answer(over, chunks).then(
        (answer) => {
          if (!socket.destroyed) socket.end(`${JSON.stringify(answer)}\n`);
        },
        () => {
          socket.destroy();
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
    const closed = new Promise<void>((resolve) => this.#server.close(() => resolve()));
    await Promise.allSettled([...this.#pending]);
    // The agent is gone: a hook still connected has no call left to ask about.
    for (const socket of this.#sockets) socket.destroy();
    await closed;
  }
}
