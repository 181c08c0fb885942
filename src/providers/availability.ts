/**
 * Whether the node may launch a provider at all, decided before an invocation claims its id.
 *
 * A CLI with nothing to talk to does not fail: the real Codex with no key retries its model
 * requests until the node shuts down, the run left `unresolved` and its id spent. So a provider
 * runs only when the node was configured for it — its command or its model endpoint is in the
 * node's configuration (`<home>/warden.json` `providers.<name>`, `serve --provider NAME=CMD`, the
 * library's `providers` option) — or when the node's environment holds the CLI's own credentials.
 * A bare default (the CLI found on a PATH, nothing configured) is not enough.
 */
import { WardenError } from "../core/errors.js";
import type { ProviderName } from "./types.js";

/**
 * The variables each CLI reads its own credentials from, when no model endpoint is configured.
 * Codex's login (`~/.codex`) never counts: every codex run gets a `CODEX_HOME` of its own.
 */
export const CLI_CREDENTIAL_VARS: Readonly<Record<ProviderName, readonly string[]>> = Object.freeze({
  claude: ["ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_OAUTH_TOKEN", "CLAUDE_CODE_USE_BEDROCK", "CLAUDE_CODE_USE_VERTEX"],
  codex: ["CODEX_API_KEY", "OPENAI_API_KEY"],
  kimi: [],
});

/** Refuses (`provider-not-configured`, 503) a provider the node was not configured for and has no credentials for. */
export function checkProviderConfigured(provider: ProviderName, configured: boolean, env: Readonly<Record<string, string | undefined>>): void {
  if (configured) return;
  const vars = CLI_CREDENTIAL_VARS[provider];
  if (vars.some((name) => (env[name] ?? "") !== "")) return;
  const credentials = vars.length === 0 ? "" : `, or set ${vars.slice(0, 2).join(" or ")} in the node's environment`;
  throw new WardenError(
    "provider-not-configured",
    `${provider}: this node is not configured for ${provider}: configure it in the node's warden.json ` +
      `(providers.${provider}.model: the model endpoint and the variable holding its key; or providers.${provider}: its command) ` +
      `or with \`warden serve --provider ${provider}=COMMAND\`${credentials}, then restart the node`,
    503,
    { details: { provider } },
  );
}
