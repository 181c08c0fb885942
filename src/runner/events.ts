/**
 * Reads the structured event streams of the provider CLIs and extracts their tool calls, each of
 * which the runner journals as its own effect (DESIGN.md "Journal": kind `tool`).
 *
 * - claude `--output-format stream-json`: content blocks of type `tool_use` (and the API's
 *   `server_tool_use` / `mcp_tool_use`) in `assistant` messages start a call; a block with a
 *   `tool_use_id` whose type ends in `tool_result` finishes it, `is_error` meaning failed.
 * - codex `exec --json`: `item.started` / `item.completed` of tool items (command_execution,
 *   mcp_tool_call, file_change, web_search); items that only ever complete (file_change,
 *   web_search) start and finish at once. `completed` is succeeded; `failed` / `declined` failed.
 * Lines that are not JSON, or JSON of no interest, are ignored; the caller decides what an
 * oversized line means.
 */
import { canonicalDigest, type JsonValue } from "../core/canonical.js";
import { sha256Digest } from "../core/digest.js";
import type { EventFormat } from "../providers/profiles.js";

export type ToolEvent =
  | { readonly type: "start"; readonly id: string; readonly name: string; readonly fingerprint: string }
  | { readonly type: "finish"; readonly id: string; readonly outcome: "succeeded" | "failed"; readonly detail?: JsonValue };

/** A small summary line worth keeping as a journal note (the provider's own end-of-run report). */
export interface ProviderReport {
  readonly type: "report";
  readonly report: { readonly [key: string]: JsonValue };
}

export type ParsedEvent = ToolEvent | ProviderReport;

type Json = Record<string, unknown>;

function isObject(value: unknown): value is Json {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function fingerprintOf(value: unknown): string {
  try {
    return canonicalDigest(value);
  } catch {
    // Not canonicalizable (too deep): the JSON text still identifies the call.
    return sha256Digest(JSON.stringify(value) ?? "null");
  }
}

function pick(source: Json, keys: readonly string[]): { [key: string]: JsonValue } {
  const out: { [key: string]: JsonValue } = {};
  for (const k of keys) {
    const v = source[k];
    if (typeof v === "string" || typeof v === "number" || typeof v === "boolean" || v === null) out[k] = v;
  }
  return out;
}

function claudeEvents(event: Json): ParsedEvent[] {
  if (event.type === "result") {
    return [{ type: "report", report: { provider: "claude", ...pick(event, ["subtype", "is_error", "num_turns", "duration_ms", "total_cost_usd"]) } }];
  }
  const message = event.message;
  if ((event.type !== "assistant" && event.type !== "user") || !isObject(message) || !Array.isArray(message.content)) return [];
  const out: ParsedEvent[] = [];
  for (const block of message.content as unknown[]) {
    if (!isObject(block) || typeof block.type !== "string") continue;
    if (block.type.endsWith("tool_use") && typeof block.id === "string" && block.id !== "") {
      const name = typeof block.name === "string" && block.name !== "" ? block.name : block.type;
      out.push({ type: "start", id: `claude:${block.id}`, name, fingerprint: fingerprintOf({ name, input: block.input ?? null }) });
    } else if (block.type.endsWith("tool_result") && typeof block.tool_use_id === "string" && block.tool_use_id !== "") {
      const failed = block.is_error === true;
      out.push({ type: "finish", id: `claude:${block.tool_use_id}`, outcome: failed ? "failed" : "succeeded", ...(failed ? { detail: { is_error: true } } : {}) });
    }
  }
  return out;
}

const CODEX_TOOL_ITEMS = new Set(["command_execution", "mcp_tool_call", "file_change", "web_search"]);

function codexIdentity(item: Json): { name: string; fingerprint: string } {
  switch (item.type) {
    case "command_execution":
      return { name: "command_execution", fingerprint: fingerprintOf({ command: item.command ?? null }) };
    case "mcp_tool_call":
      return {
        name: `mcp:${String(item.server)}/${String(item.tool)}`,
        fingerprint: fingerprintOf({ server: item.server ?? null, tool: item.tool ?? null, arguments: item.arguments ?? null }),
      };
    case "file_change":
      return { name: "file_change", fingerprint: fingerprintOf({ changes: item.changes ?? null }) };
    default:
      return { name: String(item.type), fingerprint: fingerprintOf({ query: item.query ?? null }) };
  }
}

/** Codex needs memory of which items it saw start, to start the ones that only complete. */
export class CodexEventReader {
  readonly #started = new Set<string>();

  read(event: Json): ParsedEvent[] {
    if (event.type === "turn.completed" && isObject(event.usage)) {
      return [{ type: "report", report: { provider: "codex", ...pick(event.usage, ["input_tokens", "cached_input_tokens", "output_tokens"]) } }];
    }
    if (event.type !== "item.started" && event.type !== "item.completed") return [];
    const item = event.item;
    if (!isObject(item) || typeof item.id !== "string" || item.id === "" || !CODEX_TOOL_ITEMS.has(String(item.type))) return [];
    const id = `codex:${item.id}`;
    const out: ParsedEvent[] = [];
    if (!this.#started.has(id)) {
      this.#started.add(id);
      out.push({ type: "start", id, ...codexIdentity(item) });
    }
    if (event.type === "item.completed") {
      const ok = item.status === "completed";
      const detail = pick(item, ["status", "exit_code"]);
      out.push({ type: "finish", id, outcome: ok ? "succeeded" : "failed", detail });
    }
    return out;
  }
}

/** A stateful line reader for one provider's stdout. */
export function eventReader(format: EventFormat): ((line: string) => ParsedEvent[]) | undefined {
  if (format === "text") return undefined;
  const codex = format === "codex-jsonl" ? new CodexEventReader() : undefined;
  return (line: string): ParsedEvent[] => {
    if (line.trim() === "") return [];
    let event: unknown;
    try {
      event = JSON.parse(line);
    } catch {
      return [];
    }
    if (!isObject(event)) return [];
    return codex !== undefined ? codex.read(event) : claudeEvents(event);
  };
}
