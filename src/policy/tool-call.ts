/**
 * What a provider CLI's pre-tool hook says about a call, in the policy schema's terms: the action
 * (which kind of tool), the resource's attributes, and the id the call's journal effect carries.
 * The input comes from the agent's side of the sandbox: it is hostile, so every field is checked
 * and anything missing is empty, never guessed.
 */
import { isAbsolute, resolve } from "node:path";
import { callFingerprint } from "../core/canonical.js";
import { ValidationError } from "../core/errors.js";
import type { ToolAction } from "./schema.js";
import type { ToolRequest } from "./tool-policy.js";

export interface ToolCall {
  /** the effect id the runner journals the call under (`claude:<tool_use_id>`, `codex:<tool_use_id>`) */
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

/** A provider whose pre-tool hook input warden reads. */
export type HookProvider = "claude" | "codex";

/**
 * Codex's tool names (codex-cli 0.171's PreToolUse input): `Bash` is its shell tool
 * (`exec_command`, `tool_input.command` the command line), `apply_patch` its file editor
 * (`tool_input.command` the patch), `view_image` reads a file (`tool_input.path`), `write_stdin`
 * types into a shell it started; an MCP tool is `mcp__<server>__<tool>` as Claude Code's.
 */
const CODEX_ACTIONS: Readonly<Record<string, ToolAction>> = {
  Bash: "shell",
  write_stdin: "shell",
  apply_patch: "file.edit",
  view_image: "file.read",
};

/** The lines of a Codex patch naming the files it touches (`*** Add File: <path>`, …). */
const PATCH_FILE_RE = /^\*\*\* (?:Add|Update|Delete) File: (.+)$|^\*\*\* Move to: (.+)$/gm;

/**
 * A PreToolUse hook's input (`{hook_event_name: "PreToolUse", tool_name, tool_input, tool_use_id,
 * cwd, …}`: Claude Code 2.1.328 and codex-cli 0.171 send the same envelope) as the provider's
 * tool call: refused `tool-policy-hook-input-invalid` when it is not one.
 */
export function hookToolCall(provider: HookProvider, input: unknown, workspace: string): ToolCall {
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
  const actions = provider === "claude" ? CLAUDE_ACTIONS : CODEX_ACTIONS;
  const action: ToolAction = mcp !== null ? "mcp" : (actions[tool] ?? "other");
  const named = ["file_path", "notebook_path", "path"].map((k) => args[k]).filter((p): p is string => typeof p === "string" && p !== "");
  // A Codex patch names its files inside its text, relative to the call's directory.
  const patched = provider === "codex" && tool === "apply_patch" && typeof args.command === "string" ? patchPaths(args.command) : [];
  const paths = [...named, ...patched].map((p) => resolve(cwd, field(p)));
  const url = typeof args.url === "string" ? field(args.url) : "";
  const command = action !== "shell" ? undefined : typeof args.command === "string" ? args.command : typeof args.chars === "string" ? args.chars : undefined;
  return {
    callId: `${provider}:${id}`,
    toolUseId: id,
    action,
    resource: {
      tool,
      command: command === undefined ? "" : field(command),
      path: paths[0] ?? "",
      paths,
      host: hostOf(url),
      url,
      mcp_server: mcp?.[1] ?? "",
      mcp_tool: mcp?.[2] ?? "",
    },
    fingerprint: callFingerprint({ name: tool, input: o.tool_input ?? null }),
  };
}

/** Claude Code's PreToolUse input as a tool call (hookToolCall for claude). */
export function claudeToolCall(input: unknown, workspace: string): ToolCall {
  return hookToolCall("claude", input, workspace);
}

function patchPaths(patch: string): string[] {
  return [...patch.matchAll(PATCH_FILE_RE)].map((m) => (m[1] ?? m[2] ?? "").trim()).filter((p) => p !== "");
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
