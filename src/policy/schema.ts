/**
 * The Cedar schema every tool policy is validated against (DESIGN.md "Governed tool calls"). It is
 * part of the contract: a policy that validates today must validate tomorrow, so a change here is
 * a new schema name, never an edit of this one.
 *
 * - principal `Caller::"<scope>"`: who asked for the run (`name`, and the token's `role`);
 * - action: the kind of tool (`shell`, `file.read`, `file.write`, `file.edit`, `web.fetch`, `mcp`,
 *   `other`);
 * - resource `Call::"<call id>"`: the call itself (`tool` the CLI's name for it, `command` a shell
 *   call's command line, `paths` the files it names as absolute paths (`path` the first, for
 *   `like` patterns), `host` and `url` a fetch's
 *   target, `mcp_server` and `mcp_tool` an MCP tool's);
 * - context: the run (`workspace`, `run`, `provider`, and the bundle it runs: `bundle_id`,
 *   `revision`, `signers`, empty without one).
 */
export const POLICY_SCHEMA_NAME = "warden-tools-v1";

export const TOOL_ACTIONS = ["shell", "file.read", "file.write", "file.edit", "web.fetch", "mcp", "other"] as const;
export type ToolAction = (typeof TOOL_ACTIONS)[number];

export const CEDAR_SCHEMA = `entity Caller { name: String, role: String };
entity Call { tool: String, command: String, path: String, paths: Set<String>, host: String, url: String, mcp_server: String, mcp_tool: String };
type Run = { workspace: String, run: String, provider: String, bundle_id: String, revision: String, signers: Set<String> };
action ${TOOL_ACTIONS.map((a) => JSON.stringify(a)).join(", ")} appliesTo { principal: Caller, resource: Call, context: Run };
`;
