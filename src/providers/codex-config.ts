/**
 * Turns a bundle's `.mcp.json` (Claude Code's format, DESIGN.md "Bundle contract") into the
 * `[mcp_servers.<name>]` tables of a Codex `config.toml`.
 *
 * Codex reads (checked against `codex mcp list --json` of codex-cli 0.171):
 *   stdio: command, args, env (literal values), env_vars (names forwarded from Codex's own env);
 *   streamable HTTP: url, http_headers (literal), env_http_headers (header -> variable name),
 *   bearer_token_env_var (variable holding the `Authorization: Bearer` token).
 * Claude Code expands `${VAR}` inside `.mcp.json`; Codex expands nothing. So a reference is
 * translated only where Codex has an exact equivalent (an env entry forwarding the same
 * variable, a header taken whole from a variable, a bearer token from a variable) and refused
 * everywhere else: silently writing `${VAR}` as a literal would launch a server with a wrong
 * argument or send a wrong header. Codex has no SSE transport, so `type: "sse"` is refused.
 */
import { stringify } from "smol-toml";
import { ValidationError } from "../core/errors.js";
import { checkMcpDeclaration } from "../delivery/contract/mcp.js";
import type { ModelEndpoint } from "./profiles.js";

export const CODEX_CONFIG_FILE = "config.toml";

interface StdioServer {
  readonly type?: "stdio";
  readonly command: string;
  readonly args?: readonly string[];
  readonly env?: Readonly<Record<string, string>>;
}
interface RemoteServer {
  readonly type: "http" | "sse";
  readonly url: string;
  readonly headers?: Readonly<Record<string, string>>;
}
type McpServer = StdioServer | RemoteServer;

function isRemote(server: McpServer): server is RemoteServer {
  return server.type === "http" || server.type === "sse";
}

type TomlTable = Record<string, string | string[] | Record<string, string>>;

const WHOLE_VAR_RE = /^\$\{([A-Za-z_][A-Za-z0-9_]*)\}$/;
const BEARER_VAR_RE = /^Bearer \$\{([A-Za-z_][A-Za-z0-9_]*)\}$/;

function refuse(code: string, server: string, field: string, rule: string): never {
  throw new ValidationError(code, `.mcp.json server ${JSON.stringify(server)} (${field}): ${rule} for codex`, {
    details: { provider: "codex", server, field, path: ".mcp.json" },
    status: 422,
  });
}

function literal(value: string, server: string, field: string): string {
  if (value.includes("${")) refuse("codex-mcp-unexpandable", server, field, "a ${...} reference Codex would not expand");
  return value;
}

function stdioTable(name: string, server: StdioServer): TomlTable {
  const table: TomlTable = { command: literal(server.command, name, "command") };
  if (server.args !== undefined) table.args = server.args.map((a, i) => literal(a, name, `args[${i}]`));
  const env: Record<string, string> = {};
  const forwarded: string[] = [];
  for (const [key, value] of Object.entries(server.env ?? {})) {
    const ref = WHOLE_VAR_RE.exec(value);
    // `"KEY": "${KEY}"` forwards the launcher's variable; Codex's env_vars does exactly that.
    if (ref !== null && ref[1] === key) forwarded.push(key);
    else env[key] = literal(value, name, `env.${key}`);
  }
  if (Object.keys(env).length > 0) table.env = env;
  if (forwarded.length > 0) table.env_vars = forwarded;
  return table;
}

function remoteTable(name: string, server: RemoteServer): TomlTable {
  if (server.type === "sse") refuse("codex-mcp-sse-unsupported", name, "type", "SSE transport is not supported");
  const table: TomlTable = { url: literal(server.url, name, "url") };
  const fixed: Record<string, string> = {};
  const fromEnv: Record<string, string> = {};
  for (const [header, value] of Object.entries(server.headers ?? {})) {
    const whole = WHOLE_VAR_RE.exec(value);
    const bearer = header.toLowerCase() === "authorization" ? BEARER_VAR_RE.exec(value) : null;
    if (whole !== null) fromEnv[header] = whole[1] as string;
    else if (bearer !== null) table.bearer_token_env_var = bearer[1] as string;
    else fixed[header] = literal(value, name, `headers.${header}`);
  }
  if (Object.keys(fixed).length > 0) table.http_headers = fixed;
  if (Object.keys(fromEnv).length > 0) table.env_http_headers = fromEnv;
  return table;
}

/**
 * The `[mcp_servers]` tables for a `.mcp.json`, or a ValidationError naming the server and field
 * that Codex cannot express. The declaration's shape is checked by the bundle contract's own rule
 * first, so this module never interprets a shape the contract would refuse.
 */
function mcpServersFromMcpJson(bytes: Uint8Array, component: number): Record<string, TomlTable> {
  checkMcpDeclaration(bytes, { component, path: ".mcp.json" });
  const parsed = JSON.parse(Buffer.from(bytes).toString("utf8")) as { mcpServers: Record<string, McpServer> };
  const servers: Record<string, TomlTable> = {};
  for (const [name, server] of Object.entries(parsed.mcpServers)) {
    servers[name] = isRemote(server) ? remoteTable(name, server) : stdioTable(name, server);
  }
  return servers;
}

/** The name of the model provider table warden writes (`model_provider = "warden"`). */
export const CODEX_MODEL_PROVIDER = "warden";

/**
 * The whole config.toml of a run's CODEX_HOME: analytics and plugin sync off (no traffic beyond
 * the model endpoint), the node's model endpoint as a Responses-API provider when one is
 * configured, and the bundle's MCP servers when it declares any.
 */
export function codexConfigToml(options: { readonly model?: ModelEndpoint; readonly mcpJson?: { readonly bytes: Uint8Array; readonly component: number } }): string {
  const { model, mcpJson } = options;
  const config: Record<string, unknown> = {};
  if (model !== undefined) {
    config.model_provider = CODEX_MODEL_PROVIDER;
    if (model.name !== undefined) config.model = model.name;
  }
  config.analytics = { enabled: false };
  config.features = { plugins: false };
  if (model !== undefined) {
    config.model_providers = {
      [CODEX_MODEL_PROVIDER]: {
        name: CODEX_MODEL_PROVIDER,
        base_url: model.baseUrl,
        wire_api: "responses",
        ...(model.apiKeyEnv === undefined ? {} : { env_key: model.apiKeyEnv }),
        ...(model.retries === undefined ? {} : { request_max_retries: model.retries, stream_max_retries: model.retries }),
      },
    };
  }
  if (mcpJson !== undefined) config.mcp_servers = mcpServersFromMcpJson(mcpJson.bytes, mcpJson.component);
  return stringify(config);
}

/** The config.toml text for a `.mcp.json` alone (no model endpoint). */
export function codexConfigFromMcpJson(bytes: Uint8Array, component: number): string {
  return codexConfigToml({ mcpJson: { bytes, component } });
}
