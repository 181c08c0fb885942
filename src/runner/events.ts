/**
 * Reads the structured event streams of the provider CLIs: their tool calls, each of which the
 * runner journals as its own effect (DESIGN.md "Journal": kind `tool`), their final answer, token
 * usage and reported errors, which make the run's result, and everything else worth keeping as a
 * journal note.
 *
 * - claude `--output-format stream-json`: content blocks of type `tool_use` (and the API's
 *   `server_tool_use` / `mcp_tool_use`) in `assistant` messages start a call; a block with a
 *   `tool_use_id` whose type ends in `tool_result` finishes it, `is_error` meaning failed, and a
 *   permission decision `reject` in the line's `tool_result_meta` (or a denial text) meaning
 *   refused. The `result` line carries the answer (`result`), `usage`, and `is_error`.
 * - codex `exec --json`: `item.started` / `item.completed` of tool items (command_execution,
 *   mcp_tool_call, file_change, web_search); items that only ever complete (file_change,
 *   web_search) start and finish at once. `completed` is succeeded; `failed` failed; `declined`
 *   refused. The last `agent_message` is the answer, `turn.completed` the usage, `turn.failed`
 *   an error.
 * Event types neither reader knows become notes: a newer CLI's events are kept, never a failure.
 * Lines that are not JSON are ignored; the caller decides what an oversized line means.
 */
import { callFingerprint, type JsonValue } from "../core/canonical.js";
import type { EventFormat } from "../providers/profiles.js";

export type ToolEvent =
  | {
      readonly type: "start";
      readonly id: string;
      readonly name: string;
      readonly fingerprint: string;
      /** a Codex command's line as printed (`/bin/bash -lc '<command>'`): pairs it with its hook's call (codex-calls.ts) */
      readonly command?: string;
    }
  | {
      readonly type: "finish";
      readonly id: string;
      readonly outcome: "succeeded" | "failed";
      /** the CLI did not run the call: its permission mode or sandbox policy refused it */
      readonly refused?: string;
      readonly detail?: JsonValue;
    };

/** A small summary line worth keeping as a journal note (the provider's own end-of-run report). */
export interface ProviderReport {
  readonly type: "report";
  readonly report: { readonly [key: string]: JsonValue };
}

/** What the run's result is made of: the CLI's final answer, its token usage, an error it reported. */
export type AnswerEvent =
  | { readonly type: "answer"; readonly text: string }
  | { readonly type: "usage"; readonly usage: { readonly [key: string]: number } }
  /** `code`: a failure warden recognizes in the stream, as the run's `result.error.code` (else agent-reported-error) */
  | { readonly type: "error"; readonly message: string; readonly code?: string }
  /** the CLI stopped with a call a pre-tool hook deferred (claude's result `stop_reason: "tool_deferred"`) */
  | { readonly type: "deferred" };

/** Kept in the journal as a note: what the agent session was, or an event of no known meaning. */
export interface NoteFromEvent {
  readonly type: "note";
  readonly note: { readonly [key: string]: JsonValue };
}

/**
 * One model turn's token usage as the stream reports it, for the spend meter (spend.ts). The same
 * `id` may come again with larger counts (Claude Code prints an assistant line per content block):
 * the latest counts of an id replace its earlier ones. `total` is the CLI's own end-of-run sum.
 */
export interface TurnUsage {
  readonly type: "turn";
  readonly id: string;
  readonly model?: string;
  readonly input_tokens: number;
  readonly output_tokens: number;
  readonly total?: true;
}

/** The CLI's own session id (Claude Code's `session_id`, Codex's `thread_id`): a trace's conversation id. */
export interface SessionEvent {
  readonly type: "session";
  readonly id: string;
}

export type ParsedEvent = ToolEvent | ProviderReport | AnswerEvent | NoteFromEvent | TurnUsage | SessionEvent;

type Json = Record<string, unknown>;

function isObject(value: unknown): value is Json {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function pick(source: Json, keys: readonly string[]): { [key: string]: JsonValue } {
  const out: { [key: string]: JsonValue } = {};
  for (const k of keys) {
    const v = source[k];
    if (typeof v === "string" || typeof v === "number" || typeof v === "boolean" || v === null) out[k] = v;
  }
  return out;
}

const NOTE_STRING_CHARS = 512;
const NOTE_KEYS = 16;
const NOTE_LIST_ITEMS = 64;

/** A bounded summary of an event: its scalar fields, long strings cut (a note stays small). */
function summary(event: Json): { [key: string]: JsonValue } {
  const out: { [key: string]: JsonValue } = {};
  for (const [k, v] of Object.entries(event).slice(0, NOTE_KEYS)) {
    if (typeof v === "string") out[k] = v.length > NOTE_STRING_CHARS ? `${v.slice(0, NOTE_STRING_CHARS)}…` : v;
    else if (typeof v === "number" || typeof v === "boolean" || v === null) out[k] = v;
  }
  return out;
}

function names(value: unknown, key?: string): string[] {
  if (!Array.isArray(value)) return [];
  const out: string[] = [];
  for (const v of value.slice(0, NOTE_LIST_ITEMS)) {
    const name = key === undefined ? v : isObject(v) ? v[key] : undefined;
    if (typeof name === "string") out.push(name.slice(0, NOTE_STRING_CHARS));
  }
  return out;
}

function numbers(source: unknown, keys: readonly string[]): { [key: string]: number } {
  const out: { [key: string]: number } = {};
  if (!isObject(source)) return out;
  for (const k of keys) if (typeof source[k] === "number" && Number.isFinite(source[k])) out[k] = source[k] as number;
  return out;
}

const CLAUDE_KNOWN = new Set(["assistant", "user", "result", "stream_event"]);
/** Claude Code's words for a call it did not run because no rule or mode allowed it. */
const CLAUDE_DENIAL_RE = /^(Error: )?(Permission to use \S+ has been denied|Claude requested permissions? to|.{0,300}\bneeds approval\b)/;

function claudeRefusal(event: Json, block: Json): string | undefined {
  const meta = Array.isArray(event.tool_result_meta) ? (event.tool_result_meta as unknown[]) : [];
  for (const m of meta) {
    if (!isObject(m) || m.id !== block.tool_use_id) continue;
    const decision = isObject(m.permission_decision) ? m.permission_decision : undefined;
    if (decision !== undefined && (decision.decision === "reject" || decision.decision === "deny")) {
      return `permission ${String(decision.decision)}${typeof decision.reason_type === "string" ? ` (${decision.reason_type})` : ""}`;
    }
  }
  if (block.is_error !== true) return undefined;
  const text = typeof block.content === "string" ? block.content : Array.isArray(block.content) ? names(block.content, "text").join("\n") : "";
  return CLAUDE_DENIAL_RE.test(text) ? "permission denied" : undefined;
}

function claudeEvents(event: Json): ParsedEvent[] {
  if (event.type === "result") {
    const out: ParsedEvent[] = [
      { type: "report", report: { provider: "claude", ...pick(event, ["subtype", "is_error", "num_turns", "duration_ms", "total_cost_usd"]) } },
    ];
    if (isObject(event.usage)) {
      const usage = numbers(event.usage, ["input_tokens", "output_tokens", "cache_creation_input_tokens", "cache_read_input_tokens"]);
      out.push({ type: "usage", usage });
      out.push({ type: "turn", id: "result", ...claudeTokens(usage), total: true });
    }
    const text = typeof event.result === "string" ? event.result : undefined;
    if (text !== undefined) out.push({ type: "answer", text });
    if (event.stop_reason === "tool_deferred") out.push({ type: "deferred" });
    if (event.is_error === true || (typeof event.subtype === "string" && event.subtype !== "success")) {
      out.push({ type: "error", message: text ?? `claude reported ${String(event.subtype)}` });
    }
    return out;
  }
  if (event.type === "system" && event.subtype === "init") {
    const session = {
      provider: "claude",
      ...pick(event, ["model", "permissionMode", "claude_code_version"]),
      skills: names(event.skills),
      plugins: names(event.plugins, "name"),
    };
    const note: ParsedEvent = { type: "note", note: { agent_session: session } };
    return typeof event.session_id === "string" && event.session_id !== "" ? [note, { type: "session", id: event.session_id }] : [note];
  }
  if (typeof event.type !== "string" || !CLAUDE_KNOWN.has(event.type)) return [{ type: "note", note: { provider_event: summary(event) } }];
  const message = event.message;
  if ((event.type !== "assistant" && event.type !== "user") || !isObject(message) || !Array.isArray(message.content)) return [];
  const out: ParsedEvent[] = [];
  if (event.type === "assistant" && typeof message.id === "string" && message.id !== "" && isObject(message.usage)) {
    const usage = numbers(message.usage, ["input_tokens", "output_tokens", "cache_creation_input_tokens", "cache_read_input_tokens"]);
    out.push({ type: "turn", id: `claude:${message.id}`, ...(typeof message.model === "string" ? { model: message.model } : {}), ...claudeTokens(usage) });
  }
  for (const block of message.content as unknown[]) {
    if (!isObject(block) || typeof block.type !== "string") continue;
    if (block.type.endsWith("tool_use") && typeof block.id === "string" && block.id !== "") {
      const name = typeof block.name === "string" && block.name !== "" ? block.name : block.type;
      out.push({ type: "start", id: `claude:${block.id}`, name, fingerprint: callFingerprint({ name, input: block.input ?? null }) });
    } else if (block.type.endsWith("tool_result") && typeof block.tool_use_id === "string" && block.tool_use_id !== "") {
      const refused = claudeRefusal(event, block);
      const failed = block.is_error === true || refused !== undefined;
      out.push({
        type: "finish",
        id: `claude:${block.tool_use_id}`,
        outcome: failed ? "failed" : "succeeded",
        ...(refused === undefined ? {} : { refused }),
        ...(failed ? { detail: { is_error: true, ...(refused === undefined ? {} : { refused }) } } : {}),
      });
    }
  }
  return out;
}

/** Every token the model read counts as input, cached or not (the price table prices them alike). */
function claudeTokens(usage: { readonly [key: string]: number }): { input_tokens: number; output_tokens: number } {
  return {
    input_tokens: (usage.input_tokens ?? 0) + (usage.cache_creation_input_tokens ?? 0) + (usage.cache_read_input_tokens ?? 0),
    output_tokens: usage.output_tokens ?? 0,
  };
}

const CODEX_TOOL_ITEMS = new Set(["command_execution", "mcp_tool_call", "file_change", "web_search"]);

function codexIdentity(item: Json): { name: string; fingerprint: string; command?: string } {
  switch (item.type) {
    case "command_execution":
      return { name: "command_execution", fingerprint: callFingerprint({ command: item.command ?? null }), ...(typeof item.command === "string" ? { command: item.command } : {}) };
    case "mcp_tool_call":
      return {
        name: `mcp:${String(item.server)}/${String(item.tool)}`,
        fingerprint: callFingerprint({ server: item.server ?? null, tool: item.tool ?? null, arguments: item.arguments ?? null }),
      };
    case "file_change":
      return { name: "file_change", fingerprint: callFingerprint({ changes: item.changes ?? null }) };
    default:
      return { name: String(item.type), fingerprint: callFingerprint({ query: item.query ?? null }) };
  }
}

const CODEX_QUIET = new Set(["thread.started", "turn.started", "item.updated"]);

/**
 * What a command's output starts with when Codex's own sandbox (bubblewrap) could not start: bwrap
 * prints its errors under its name before it ever runs the command (`bwrap: execvp
 * codex-linux-sandbox: No such file or directory`, `bwrap: Can't mount proc ...`). Codex reports it
 * as an ordinary failed command and may still answer and exit 0: the run must not read as a success.
 */
const CODEX_SANDBOX_FAILURE_RE = /^bwrap: [^\n]*/;

function codexSandboxFailure(item: Json): ParsedEvent[] {
  if (item.type !== "command_execution" || item.status === "completed" || typeof item.aggregated_output !== "string") return [];
  const line = CODEX_SANDBOX_FAILURE_RE.exec(item.aggregated_output)?.[0];
  if (line === undefined) return [];
  return [{ type: "error", code: "provider-sandbox-failed", message: `codex's sandbox could not start, so its commands could not run: ${line.slice(0, NOTE_STRING_CHARS)}` }];
}
const CODEX_QUIET_ITEMS = new Set(["reasoning", "todo_list"]);

/** Codex needs memory of which items it saw start, to start the ones that only complete. */
export class CodexEventReader {
  readonly #started = new Set<string>();
  #turns = 0;

  read(event: Json): ParsedEvent[] {
    if (event.type === "turn.completed" && isObject(event.usage)) {
      const usage = numbers(event.usage, ["input_tokens", "cached_input_tokens", "output_tokens", "reasoning_output_tokens"]);
      // Codex's input_tokens already count the cached ones; its exec prints no model per turn.
      const turn: TurnUsage = { type: "turn", id: `codex:turn-${++this.#turns}`, input_tokens: usage.input_tokens ?? 0, output_tokens: usage.output_tokens ?? 0 };
      return [{ type: "report", report: { provider: "codex", ...pick(event.usage, ["input_tokens", "cached_input_tokens", "output_tokens"]) } }, { type: "usage", usage }, turn];
    }
    if (event.type === "turn.failed") {
      const message = isObject(event.error) && typeof event.error.message === "string" ? event.error.message : "codex reported turn.failed";
      return [{ type: "error", message }];
    }
    if (event.type === "thread.started" && typeof event.thread_id === "string" && event.thread_id !== "") return [{ type: "session", id: event.thread_id }];
    if (typeof event.type === "string" && CODEX_QUIET.has(event.type)) return [];
    if (event.type !== "item.started" && event.type !== "item.completed") return [{ type: "note", note: { provider_event: summary(event) } }];
    const item = event.item;
    if (!isObject(item) || typeof item.id !== "string" || item.id === "") return [];
    if (!CODEX_TOOL_ITEMS.has(String(item.type))) {
      if (event.type !== "item.completed") return [];
      if (item.type === "agent_message") return typeof item.text === "string" ? [{ type: "answer", text: item.text }] : [];
      if (CODEX_QUIET_ITEMS.has(String(item.type))) return [];
      // An `error` item (a warning codex goes on after) or an item type newer than this reader.
      return [{ type: "note", note: { provider_item: summary(item) } }];
    }
    const id = `codex:${item.id}`;
    const out: ParsedEvent[] = [];
    if (!this.#started.has(id)) {
      this.#started.add(id);
      out.push({ type: "start", id, ...codexIdentity(item) });
    }
    if (event.type === "item.completed") {
      const ok = item.status === "completed";
      const refused = item.status === "declined" ? "declined" : undefined;
      const detail = { ...pick(item, ["status", "exit_code"]), ...(refused === undefined ? {} : { refused }) };
      out.push({ type: "finish", id, outcome: ok ? "succeeded" : "failed", ...(refused === undefined ? {} : { refused }), detail });
      out.push(...codexSandboxFailure(item));
    }
    return out;
  }
}

/**
 * What Codex prints on stderr at its start when it could not put its sandbox helper in place
 * (codex-cli 0.171.0: `WARNING: proceeding, even though we could not create PATH aliases:
 * Refusing to create helper binaries under temporary dir ...`): every command it then runs in its
 * sandbox fails (`bwrap: execvp codex-linux-sandbox`), and it does not always print those
 * commands' items on stdout, so stdout alone cannot be relied on to tell.
 */
const CODEX_HELPER_MISSING_RE = /could not create PATH aliases/;
/** The longest stderr line the reader looks at; a longer one is not one of the lines above. */
export const STDERR_LINE_BYTES = 4096;

/** A line reader for one provider's stderr: only the failures warden recognizes there. */
export function stderrReader(format: EventFormat): ((line: string) => ParsedEvent[]) | undefined {
  if (format !== "codex-jsonl") return undefined;
  return (line: string): ParsedEvent[] =>
    CODEX_HELPER_MISSING_RE.test(line)
      ? [{ type: "error", code: "provider-sandbox-failed", message: `codex's sandbox could not start, so its commands could not run: ${line.slice(0, NOTE_STRING_CHARS)}` }]
      : [];
}

/**
 * An event line parsed into a value the journal can hold (RFC 8785 JSON). The agent is hostile,
 * and its CLI may cut an emoji in half: whatever it prints must not crash its own run. A lone
 * surrogate becomes U+FFFD; a number past a double's range (`1e400`, which JSON.parse makes
 * Infinity) is kept as the text it was written as.
 */
export function representableEvent(line: string): unknown {
  const parsed: unknown = JSON.parse(line);
  if (!mendStrings(parsed)) return parsed;
  const mended: unknown = JSON.parse(quoteOverflowingNumbers(line));
  mendStrings(mended);
  return mended;
}

/** A lone UTF-16 surrogate (a pair is one code point under the u flag, never matched). */
const LONE_SURROGATE_RE = /\p{Cs}/u;

function wellFormed(text: string): string {
  return text.replace(/\p{Cs}/gu, "\uFFFD");
}

/**
 * Replaces lone surrogates in every string and key of `value`, in place (iteratively: an agent's
 * line may nest deeper than the stack). True when a number out of range was seen.
 */
function mendStrings(value: unknown): boolean {
  let overflow = false;
  const pending: unknown[] = [value];
  while (pending.length > 0) {
    const v = pending.pop();
    if (typeof v !== "object" || v === null) {
      if (typeof v === "number" && !Number.isFinite(v)) overflow = true;
      continue;
    }
    if (Array.isArray(v)) {
      for (let i = 0; i < v.length; i++) {
        const item: unknown = v[i];
        if (typeof item === "string") {
          if (LONE_SURROGATE_RE.test(item)) v[i] = wellFormed(item);
        } else pending.push(item);
      }
      continue;
    }
    const object = v as Json;
    for (const key of Object.keys(object)) {
      let item = object[key];
      if (typeof item === "string" && LONE_SURROGATE_RE.test(item)) item = object[key] = wellFormed(item);
      if (LONE_SURROGATE_RE.test(key)) {
        delete object[key];
        object[wellFormed(key)] = item;
      }
      if (typeof item !== "string") pending.push(item);
    }
  }
  return overflow;
}

/** The line with each number literal JSON.parse would make infinite written as a string instead. */
function quoteOverflowingNumbers(line: string): string {
  let out = "";
  let from = 0;
  let inString = false;
  for (let i = 0; i < line.length; i++) {
    const c = line[i]!;
    if (inString) {
      if (c === "\\") i++;
      else if (c === '"') inString = false;
      continue;
    }
    if (c === '"') inString = true;
    else if (c === "-" || (c >= "0" && c <= "9")) {
      const token = /^-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?/.exec(line.slice(i, i + 4096))?.[0] ?? c;
      if (!Number.isFinite(Number(token))) {
        out += `${line.slice(from, i)}${JSON.stringify(token)}`;
        from = i + token.length;
      }
      i += token.length - 1;
    }
  }
  return out + line.slice(from);
}

/** A stateful line reader for one provider's stdout. */
export function eventReader(format: EventFormat): ((line: string) => ParsedEvent[]) | undefined {
  if (format === "text") return undefined;
  const codex = format === "codex-jsonl" ? new CodexEventReader() : undefined;
  return (line: string): ParsedEvent[] => {
    if (line.trim() === "") return [];
    let event: unknown;
    try {
      event = representableEvent(line);
    } catch {
      return [];
    }
    if (!isObject(event)) return [];
    return codex !== undefined ? codex.read(event) : claudeEvents(event);
  };
}
