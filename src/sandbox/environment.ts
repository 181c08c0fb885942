/**
 * The environment an agent starts with is built from an allowlist, never the node's environment
 * minus a denylist: the node's environment holds its bearer tokens, a fleet's database URL and
 * whatever the operator's shell exported (cloud credentials, SSH agent sockets), and any name a
 * denylist forgets reaches every agent. What an agent needs from the node beyond these names,
 * warden sets itself (the provider's model variables, HOME, the proxy variables) or the operator
 * configures explicitly (`agentEnv`).
 */

/** Names taken from the node's environment as they are (DESIGN.md "Confinement"). */
export const INHERITED_NAMES: readonly string[] = ["PATH", "LANG", "LANGUAGE", "TERM", "TZ", "NO_COLOR", "FORCE_COLOR", "COLORTERM"];
/** Prefixes of names taken from the node's environment (locale categories). */
export const INHERITED_PREFIXES: readonly string[] = ["LC_"];

const DEFAULT_PATH = "/usr/local/bin:/usr/bin:/bin";

/**
 * The part of `env` an agent may inherit: the allowlisted names, plus the provider's own key
 * variable when the operator named one (`providers.<name>.model.apiKeyEnv`: Codex reads the key
 * from the environment it inherits).
 */
export function inheritedEnvironment(env: Readonly<Record<string, string | undefined>>, extraNames: readonly string[] = []): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(env)) {
    if (value === undefined) continue;
    if (INHERITED_NAMES.includes(name) || extraNames.includes(name) || INHERITED_PREFIXES.some((p) => name.startsWith(p))) out[name] = value;
  }
  if (out.PATH === undefined) out.PATH = DEFAULT_PATH;
  return out;
}
