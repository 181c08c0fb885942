/**
 * How a provider's CLI is pointed at the node's model endpoint (ProviderProfile.model):
 *
 * - claude: environment — `ANTHROPIC_BASE_URL`, `ANTHROPIC_MODEL`, `CLAUDE_CODE_MAX_RETRIES`, and
 *   `ANTHROPIC_API_KEY` copied from the node's variable named by `apiKeyEnv`;
 * - codex: a `[model_providers.warden]` table in the run's own `CODEX_HOME/config.toml`
 *   (codex-config.ts) whose `env_key` names the node's variable: Codex reads the key from the
 *   environment it inherits, so the key is never written anywhere.
 *
 * The key's value is only ever placed in the agent's environment: never in a journal entry, a
 * launch fingerprint, a file or a log line.
 */
import { WardenError } from "../core/errors.js";
import type { ProviderProfile } from "./profiles.js";
import type { ProviderName } from "./types.js";

export interface ModelLaunch {
  /** environment safe to record (no secret) */
  readonly env: Readonly<Record<string, string>>;
  /** environment that carries the key: given to the agent, recorded nowhere */
  readonly secretEnv: Readonly<Record<string, string>>;
}

const NONE: ModelLaunch = Object.freeze({ env: {}, secretEnv: {} });

/**
 * The model environment of a run of `provider`. Refused before any claim when the key's variable
 * is unset on the node: every run would fail at its first model request, and the id stays free
 * for a retry once the operator sets it.
 */
export function modelLaunch(provider: ProviderName, profile: ProviderProfile, nodeEnv: Readonly<Record<string, string | undefined>>): ModelLaunch {
  const model = profile.model;
  if (model === undefined) return NONE;
  let key: string | undefined;
  if (model.apiKeyEnv !== undefined) {
    key = nodeEnv[model.apiKeyEnv];
    if (key === undefined || key === "") {
      throw new WardenError(
        "provider-model-key-missing",
        `${provider}: the model key variable ${model.apiKeyEnv} (providers.${provider}.model.apiKeyEnv) is not set in the node's environment`,
        503,
        { details: { provider, variable: model.apiKeyEnv } },
      );
    }
  }
  if (provider !== "claude") return NONE;
  return {
    env: {
      ANTHROPIC_BASE_URL: model.baseUrl,
      ...(model.name === undefined ? {} : { ANTHROPIC_MODEL: model.name }),
      ...(model.retries === undefined ? {} : { CLAUDE_CODE_MAX_RETRIES: String(model.retries) }),
    },
    secretEnv: key === undefined ? {} : { ANTHROPIC_API_KEY: key },
  };
}
