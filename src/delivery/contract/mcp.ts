/**
 * MCP server declarations (DESIGN.md "Bundle contract"): `.mcp.json` at the root, shaped
 * `{"mcpServers": {name: {command, args?, env?} | {type: "http"|"sse", url, headers?}}}`.
 *
 * Decisions beyond DESIGN's shape: a stdio server may say `"type": "stdio"` (Claude Code writes
 * it); server names are 1–64 of [A-Za-z0-9_-] starting with a letter or digit, because the codex
 * provider turns each into a TOML table key `[mcp_servers.<name>]`; a URL must be http(s) and
 * carry no user:password, so a bundle cannot smuggle credentials in a URL; any other key is
 * refused.
 */
import { CONTENT_STATUS, contractError, parseJsonFile, type ContractWhere } from "./common.js";
import { isPlainObject } from "../plain-object.js";

export const MCP_DECLARATION_PATH = ".mcp.json";

export interface McpStdioServer {
  readonly type?: "stdio";
  readonly command: string;
  readonly args?: readonly string[];
  readonly env?: Readonly<Record<string, string>>;
}
export interface McpRemoteServer {
  readonly type: "http" | "sse";
  readonly url: string;
  readonly headers?: Readonly<Record<string, string>>;
}
export type McpServer = McpStdioServer | McpRemoteServer;
export interface McpDeclaration {
  readonly mcpServers: Readonly<Record<string, McpServer>>;
}
// Starts with a letter or digit: also keeps "__proto__" out of every object keyed by server name.
const SERVER_NAME_RE = /^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$/;
const STDIO_KEYS = ["type", "command", "args", "env"];
const REMOTE_KEYS = ["type", "url", "headers"];

function bad(where: ContractWhere, field: string | undefined, rule: string): never {
  const at = field === undefined ? where : { ...where, field };
  return contractError("contract-mcp-declaration", rule, at, CONTENT_STATUS);
}

function checkKeys(server: Record<string, unknown>, allowed: readonly string[], where: ContractWhere, at: string) {
  for (const key of Object.keys(server)) {
    if (!allowed.includes(key)) bad(where, `${at}.${key}`, `unknown key ${JSON.stringify(key)}`);
  }
}

function checkStringRecord(value: unknown, where: ContractWhere, field: string): void {
  if (value === undefined) return;
  if (!isPlainObject(value) || !Object.values(value).every((v) => typeof v === "string")) {
    bad(where, field, "must be an object of strings");
  }
}

function checkStdio(server: Record<string, unknown>, where: ContractWhere, at: string): McpStdioServer {
  checkKeys(server, STDIO_KEYS, where, at);
  if (server.type !== undefined && server.type !== "stdio") {
    bad(where, `${at}.type`, 'type must be "http", "sse" or "stdio"');
  }
  if (typeof server.command !== "string" || server.command.length === 0) {
    bad(where, `${at}.command`, "command must be a non-empty string");
  }
  const args = server.args;
  if (args !== undefined && !(Array.isArray(args) && args.every((a) => typeof a === "string"))) {
    bad(where, `${at}.args`, "args must be an array of strings");
  }
  checkStringRecord(server.env, where, `${at}.env`);
  return server as unknown as McpStdioServer;
}

function checkRemote(server: Record<string, unknown>, where: ContractWhere, at: string): McpRemoteServer {
  checkKeys(server, REMOTE_KEYS, where, at);
  const field = `${at}.url`;
  if (typeof server.url !== "string") bad(where, field, "url must be a string");
  let url: URL;
  try {
    url = new URL(server.url);
  } catch {
    bad(where, field, "url is not a valid URL");
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") bad(where, field, "url must be http or https");
  if (url.username !== "" || url.password !== "") bad(where, field, "url must not carry credentials");
  checkStringRecord(server.headers, where, `${at}.headers`);
  return server as unknown as McpRemoteServer;
}

/**
 * Parses and checks `.mcp.json` bytes; the result is typed by the checked shape (providers use
 * it, so no other module re-interprets the file).
 */
export function parseMcpDeclaration(bytes: Uint8Array, where: ContractWhere): McpDeclaration {
  const value = parseJsonFile(bytes, where);
  if (!isPlainObject(value)) bad(where, undefined, "must be a JSON object");
  for (const key of Object.keys(value)) {
    if (key !== "mcpServers") bad(where, key, `unknown key ${JSON.stringify(key)}`);
  }
  const servers = value.mcpServers;
  if (!isPlainObject(servers)) bad(where, "mcpServers", "mcpServers must be an object");
  const checked: Record<string, McpServer> = Object.create(null) as Record<string, McpServer>;
  for (const [name, server] of Object.entries(servers)) {
    const at = `mcpServers.${name}`;
    if (!SERVER_NAME_RE.test(name)) bad(where, at, "server name must be 1–64 of A-Za-z0-9_-, letter or digit first");
    if (!isPlainObject(server)) bad(where, at, "server must be an object");
    if (server.type === "http" || server.type === "sse") {
      checked[name] = checkRemote(server, where, at);
    } else if (server.type === undefined && Object.hasOwn(server, "url")) {
      bad(where, `${at}.type`, 'a url server needs type "http" or "sse"');
    } else {
      checked[name] = checkStdio(server, where, at);
    }
  }
  return { mcpServers: checked };
}

export function checkMcpDeclaration(bytes: Uint8Array, where: ContractWhere): void {
  parseMcpDeclaration(bytes, where);
}
