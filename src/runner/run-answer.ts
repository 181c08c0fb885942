/**
 * What a run's result says besides its exit: the CLI's final answer (Claude Code's `result`,
 * Codex's last `agent_message`), its token usage, the error it reported, and the tool calls it
 * refused. A CLI that reports an error makes the run a failure whatever its exit code: a run is
 * never recorded as a success the CLI itself did not report.
 */
import type { JsonValue } from "../core/canonical.js";
import type { ParsedEvent } from "./events.js";

/** Bounds, so a chatty CLI cannot grow the result past the result payload limit. */
const MAX_ANSWER_CHARS = 64 * 1024;
const MAX_ERROR_CHARS = 4096;
const MAX_REFUSED = 32;

export interface RefusedCall {
  readonly [key: string]: JsonValue;
  readonly tool: string;
  readonly effect_id: string;
  readonly reason: string;
}

/** A claude session id as `--resume` takes it (a UUID): anything else from the stream is not passed on as an argument. */
const SESSION_ID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

export class RunAnswer {
  readonly #names = new Map<string, string>();
  #answer: string | undefined;
  #usage: Record<string, number> | undefined;
  #error: { code: string; message: string } | undefined;
  readonly #refused: RefusedCall[] = [];
  #session: string | undefined;
  #deferred = false;

  /** The CLI's session id, once its stream said it. */
  get session(): string | undefined {
    return this.#session;
  }

  /** The CLI stopped on a call its pre-tool hook deferred. */
  get deferred(): boolean {
    return this.#deferred;
  }

  take(event: ParsedEvent): void {
    switch (event.type) {
      case "start":
        this.#names.set(event.id, event.name);
        return;
      case "finish":
        if (event.refused !== undefined && this.#refused.length < MAX_REFUSED) {
          this.#refused.push({ tool: this.#names.get(event.id) ?? "unknown", effect_id: event.id, reason: event.refused });
        }
        return;
      case "answer":
        this.#answer = event.text;
        return;
      case "session":
        // Only a UUID is passed on to `--resume`: the id comes from the agent's stream.
        if (SESSION_ID_RE.test(event.id)) this.#session ??= event.id;
        return;
      case "deferred":
        this.#deferred = true;
        return;
      case "usage": {
        // Several turns (or a report repeated) add up.
        const sum: Record<string, number> = { ...(this.#usage ?? {}) };
        for (const [k, v] of Object.entries(event.usage)) sum[k] = (sum[k] ?? 0) + v;
        this.#usage = sum;
        return;
      }
      case "error":
        this.#error ??= event.code === undefined ? { code: "agent-reported-error", message: event.message } : { code: event.code, message: event.message };
        return;
      default:
        return;
    }
  }

  /** The error the CLI reported, if any. */
  get error(): string | undefined {
    return this.#error?.message;
  }

  /** The result's fields: `answer`, `usage`, `refused` when there were any. */
  fields(): { [key: string]: JsonValue } {
    return {
      ...(this.#answer === undefined ? {} : { answer: cut(this.#answer, MAX_ANSWER_CHARS) }),
      ...(this.#usage === undefined ? {} : { usage: this.#usage }),
      ...(this.#refused.length === 0 ? {} : { refused: this.#refused }),
    };
  }

  /** The reported error as a result's `error` member. */
  errorDetail(): { code: string; message: string } | undefined {
    return this.#error === undefined ? undefined : { code: this.#error.code, message: cut(this.#error.message, MAX_ERROR_CHARS) };
  }
}

function cut(text: string, chars: number): string {
  return text.length > chars ? `${text.slice(0, chars)}…` : text;
}
