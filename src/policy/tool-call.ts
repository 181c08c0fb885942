/**
 * What a provider CLI's pre-tool hook says about a call, in the policy schema's terms: the action
 * (which kind of tool), the resource's attributes, and the id the call's journal effect carries.
 * The input comes from the agent's side of the sandbox: it is hostile, so every field is checked
 * and anything missing is empty, never guessed.
 */
import { isAbsolute, resolve } from "node:path";
import { canonicalDigest } from "../core/canonical.js";
import { sha256Digest } from "../core/digest.js";
import { ValidationError } from "../core/errors.js";
import type { ToolAction } from "./schema.js";
import type { ToolRequest } from "./tool-policy.js";

export interface ToolCall {
  /** the effect id the runner journals the call under (`claude:<tool_use_id>`) */
  readonly callId: string;
  /** the CLI's own id of the call */
  readonly toolUseId: string;
  readonly action: ToolAction;
  readonly resource: ToolRequest["resource"];
  /** sha256 of the canonical JSON of {name, input}: what the call's effect.started fingerprints */
  readonly fingerprint: string;
}

const CLAUDE_ACTIONS: Readonly<Record<string, ToolAction>> = {
  Bash: "shell",
  Read: "file.read",
  Glob: "file.read",
  Grep: "file.read",
  LS: "file.read",
  Write: "file.write",
  Edit: "file.edit",
  MultiEdit: "file.edit",
  NotebookEdit: "file.edit",
  WebFetch: "web.fetch",
};

/** Longest string of a call kept for the policy (a longer command is cut, and so cannot match an exact rule). */
const MAX_FIELD = 64 * 1024;

/**
 * Claude Code's PreToolUse input (`{hook_event_name: "PreToolUse", tool_name, tool_input,
 * tool_use_id, cwd, …}`, Claude Code 2.1.328): refused `tool-policy-hook-input-invalid` when it is not
 * one.
 */
export function claudeToolCall(input: unknown, workspace: string): ToolCall {
  if (typeof input !== "object" || input === null || Array.isArray(input)) throw bad("not a JSON object");
  const o = input as Record<string, unknown>;
  if (o.hook_event_name !== "PreToolUse") throw bad("hook_event_name is not PreToolUse");
  const tool = o.tool_name;
  const id = o.tool_use_id;
  if (typeof tool !== "string" || tool === "" || tool.length > 256) throw bad("tool_name is not a name");
  if (typeof id !== "string" || !/^[A-Za-z0-9_-]{1,128}$/.test(id)) throw bad("tool_use_id is not an id");
  const args = typeof o.tool_input === "object" && o.tool_input !== null && !Array.isArray(o.tool_input) ? (o.tool_input as Record<string, unknown>) : {};
  const cwd = typeof o.cwd === "string" && isAbsolute(o.cwd) ? o.cwd : workspace;
  const mcp = /^mcp__(.+?)__(.+)$/.exec(tool);
  const action: ToolAction = mcp !== null ? "mcp" : (CLAUDE_ACTIONS[tool] ?? "other");
  const paths = ["file_path", "notebook_path", "path"]
    .map((k) => args[k])
    .filter((p): p is string => typeof p === "string" && p !== "")
    .map((p) => resolve(cwd, field(p)));
  const url = typeof args.url === "string" ? field(args.url) : "";
  return {
    callId: `claude:${id}`,
    toolUseId: id,
    action,
    resource: {
      tool,
      command: action === "shell" && typeof args.command === "string" ? field(args.command) : "",
      path: paths[0] ?? "",
      paths,
      host: hostOf(url),
      url,
      mcp_server: mcp?.[1] ?? "",
      mcp_tool: mcp?.[2] ?? "",
    },
    fingerprint: fingerprintOf({ name: tool, input: o.tool_input ?? null }),
  };
}

/** As the runner's event reader fingerprints a call (runner/events.ts): canonical JSON, else its JSON text. */
function fingerprintOf(value: unknown): string {
  try {
    return canonicalDigest(value);
  } catch {
    return sha256Digest(JSON.stringify(value) ?? "null");
  }
}

function field(value: string): string {
  return value.length > MAX_FIELD ? value.slice(0, MAX_FIELD) : value;
}

function hostOf(url: string): string {
  try {
    return new URL(url).hostname.toLowerCase();
  } catch {
    return "";
  }
}

function bad(why: string): ValidationError {
  return new ValidationError("tool-policy-hook-input-invalid", `the pre-tool hook's input is not a tool call: ${why}`);
}
