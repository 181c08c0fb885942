/**
 * The script of a scripted model server: what the "model" answers, one turn per model request.
 * A turn is a text answer or one tool call, optionally delayed or cut off mid-stream. The same
 * turn is spoken in whichever protocol the request came in (Anthropic Messages or OpenAI
 * Responses), so one script can rehearse a bundle with either CLI as long as the tool names fit
 * the CLI (`Bash {command}` for Claude Code, `exec_command {cmd}` for Codex).
 */
import { ValidationError } from "../core/errors.js";

export interface ScriptTurn {
  /** the answer's text (with `tool`, text the model says before the call) */
  readonly text?: string;
  /** a tool call the model makes: the stream stops with `tool_use` / a function_call item */
  readonly tool?: { readonly name: string; readonly input: Readonly<Record<string, unknown>> };
  /** milliseconds to wait before the first byte of the answer */
  readonly delay_ms?: number;
  /** close the connection after the first events of the answer, before it is complete */
  readonly drop?: boolean;
}

export interface ModelScript {
  readonly turns: readonly ScriptTurn[];
}

const TURN_KEYS = new Set(["text", "tool", "delay_ms", "drop"]);
const MAX_DELAY_MS = 24 * 3600 * 1000;

function bad(where: string, rule: string): never {
  throw new ValidationError("model-script-invalid", `model script ${where}: ${rule}`, { details: { where } });
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** Checks a parsed script (`{"turns": [...]}` or a bare list of turns); unknown keys are refused. */
export function parseModelScript(value: unknown): ModelScript {
  const turns = Array.isArray(value) ? value : isRecord(value) ? value.turns : undefined;
  if (isRecord(value) && Object.keys(value).some((k) => k !== "turns")) bad("", "only `turns` is allowed at the top");
  if (!Array.isArray(turns)) bad("", "expected {\"turns\": [...]} or a list of turns");
  return {
    turns: turns.map((t: unknown, i): ScriptTurn => {
      const where = `turns[${i}]`;
      if (!isRecord(t)) bad(where, "a turn is an object");
      for (const k of Object.keys(t)) if (!TURN_KEYS.has(k)) bad(where, `unknown key ${JSON.stringify(k)}`);
      if (t.text !== undefined && typeof t.text !== "string") bad(where, "text must be a string");
      if (t.tool !== undefined) {
        const tool = t.tool;
        if (!isRecord(tool) || typeof tool.name !== "string" || tool.name === "" || !isRecord(tool.input)) {
          bad(where, "tool must be {name: string, input: object}");
        }
      }
      if (t.text === undefined && t.tool === undefined) bad(where, "a turn has text, a tool call, or both");
      if (t.delay_ms !== undefined && (!Number.isInteger(t.delay_ms) || (t.delay_ms as number) < 0 || (t.delay_ms as number) > MAX_DELAY_MS)) {
        bad(where, "delay_ms must be an integer from 0 to 86400000");
      }
      if (t.drop !== undefined && typeof t.drop !== "boolean") bad(where, "drop must be a boolean");
      return t as ScriptTurn;
    }),
  };
}
