/**
 * One scripted turn as the server-sent events of the two model APIs the CLIs speak (DESIGN.md
 * "Scripted model protocol"): Anthropic `POST /v1/messages` with `stream: true` (Claude Code) and
 * OpenAI `POST /v1/responses` with `stream: true` (Codex). Only the events the CLIs read are
 * sent; the token counts are fixed so tests can assert what the run recorded.
 */
import type { ScriptTurn } from "./script.js";

export type Protocol = "anthropic" | "openai";

export interface SseEvent {
  readonly event: string;
  readonly data: Record<string, unknown>;
}

export const SCRIPTED_MODEL = "scripted-model";
export const SCRIPTED_USAGE = { input_tokens: 100, output_tokens: 10 } as const;

/** `event: E\ndata: JSON\n\n` */
export function sseFrame(e: SseEvent): string {
  return `event: ${e.event}\ndata: ${JSON.stringify(e.data)}\n\n`;
}

/** The Messages API stream of one turn; `id` makes message and tool ids unique per request. */
export function anthropicEvents(turn: ScriptTurn, id: number): SseEvent[] {
  const ev = (event: string, data: Record<string, unknown>): SseEvent => ({ event, data: { type: event, ...data } });
  const usage = { input_tokens: SCRIPTED_USAGE.input_tokens, output_tokens: 1, cache_creation_input_tokens: 0, cache_read_input_tokens: 0 };
  const out: SseEvent[] = [
    ev("message_start", {
      message: { id: `msg_scripted_${id}`, type: "message", role: "assistant", model: SCRIPTED_MODEL, content: [], stop_reason: null, stop_sequence: null, usage },
    }),
  ];
  let index = 0;
  if (turn.text !== undefined) {
    out.push(ev("content_block_start", { index, content_block: { type: "text", text: "" } }));
    out.push(ev("content_block_delta", { index, delta: { type: "text_delta", text: turn.text } }));
    out.push(ev("content_block_stop", { index }));
    index++;
  }
  if (turn.tool !== undefined) {
    out.push(ev("content_block_start", { index, content_block: { type: "tool_use", id: `toolu_scripted_${id}`, name: turn.tool.name, input: {} } }));
    out.push(ev("content_block_delta", { index, delta: { type: "input_json_delta", partial_json: JSON.stringify(turn.tool.input) } }));
    out.push(ev("content_block_stop", { index }));
  }
  out.push(
    ev("message_delta", {
      delta: { stop_reason: turn.tool !== undefined ? "tool_use" : "end_turn", stop_sequence: null },
      usage: { output_tokens: SCRIPTED_USAGE.output_tokens },
    }),
  );
  out.push(ev("message_stop", {}));
  return out;
}

/** The Responses API stream of one turn. */
export function openaiEvents(turn: ScriptTurn, id: number): SseEvent[] {
  let seq = 0;
  const ev = (event: string, data: Record<string, unknown>): SseEvent => ({ event, data: { type: event, sequence_number: seq++, ...data } });
  const response = (status: string, output: unknown[], usage?: Record<string, unknown>): Record<string, unknown> => ({
    id: `resp_scripted_${id}`,
    object: "response",
    created_at: Math.floor(Date.now() / 1000),
    status,
    model: SCRIPTED_MODEL,
    output,
    ...(usage === undefined ? {} : { usage }),
  });
  const out: SseEvent[] = [ev("response.created", { response: response("in_progress", []) })];
  const items: Record<string, unknown>[] = [];
  if (turn.text !== undefined) {
    const itemId = `msg_scripted_${id}`;
    const index = items.length;
    out.push(ev("response.output_item.added", { output_index: index, item: { type: "message", id: itemId, status: "in_progress", role: "assistant", content: [] } }));
    out.push(ev("response.output_text.delta", { item_id: itemId, output_index: index, content_index: 0, delta: turn.text }));
    const item = { type: "message", id: itemId, status: "completed", role: "assistant", content: [{ type: "output_text", text: turn.text, annotations: [] }] };
    out.push(ev("response.output_item.done", { output_index: index, item }));
    items.push(item);
  }
  if (turn.tool !== undefined) {
    const itemId = `fc_scripted_${id}`;
    const index = items.length;
    const args = JSON.stringify(turn.tool.input);
    const base = { type: "function_call", id: itemId, call_id: `call_scripted_${id}`, name: turn.tool.name };
    out.push(ev("response.output_item.added", { output_index: index, item: { ...base, arguments: "", status: "in_progress" } }));
    out.push(ev("response.function_call_arguments.delta", { item_id: itemId, output_index: index, delta: args }));
    out.push(ev("response.function_call_arguments.done", { item_id: itemId, output_index: index, arguments: args }));
    const item = { ...base, arguments: args, status: "completed" };
    out.push(ev("response.output_item.done", { output_index: index, item }));
    items.push(item);
  }
  const usage = {
    input_tokens: SCRIPTED_USAGE.input_tokens,
    input_tokens_details: { cached_tokens: 0 },
    output_tokens: SCRIPTED_USAGE.output_tokens,
    output_tokens_details: { reasoning_tokens: 0 },
    total_tokens: SCRIPTED_USAGE.input_tokens + SCRIPTED_USAGE.output_tokens,
  };
  out.push(ev("response.completed", { response: response("completed", items, usage) }));
  return out;
}

/** The API's own error body for a request the script cannot answer (a 4xx the CLIs do not retry). */
export function errorBody(protocol: Protocol, message: string): Record<string, unknown> {
  return protocol === "anthropic"
    ? { type: "error", error: { type: "invalid_request_error", message } }
    : { error: { type: "invalid_request_error", message, code: null, param: null } };
}
