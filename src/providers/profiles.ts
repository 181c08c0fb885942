/**
 * How each provider CLI is launched: its command and argument templates. All of it is
 * configuration (DESIGN.md "Providers"), so tests point the commands at fixture agents and an
 * operator can follow a CLI that renames a flag without a code change.
 *
 * Templates are lists of argv elements. `{prompt}` must be a whole element (a prompt is one
 * argument, never spliced into another); the path placeholders `{root}`, `{bundle}`, `{home}` and
 * `{skills}` may appear inside an element (`--plugin-dir={bundle}`).
 */
import { ValidationError } from "../core/errors.js";
import { PROVIDER_NAMES, type ProviderName } from "./types.js";

/** Which structured event stream the provider prints on stdout in its non-interactive mode. */
export type EventFormat = "claude-stream-json" | "codex-jsonl" | "text";
export const EVENT_FORMATS: readonly EventFormat[] = ["claude-stream-json", "codex-jsonl", "text"];

export interface ProviderProfile {
  /** executable name (looked up on PATH) or absolute path */
  readonly command: string;
  /** non-interactive mode: arguments that carry the prompt */
  readonly promptArgs: readonly string[];
  /** arguments that point the provider at a materialized bundle (appended after promptArgs) */
  readonly bundleArgs: readonly string[];
  /** environment that points the provider at a materialized bundle */
  readonly bundleEnv: Readonly<Record<string, string>>;
  readonly events: EventFormat;
}

export type ProviderProfiles = Readonly<Record<ProviderName, ProviderProfile>>;

export const DEFAULT_PROVIDER_PROFILES: ProviderProfiles = Object.freeze({
  claude: {
    command: "claude",
    promptArgs: ["-p", "{prompt}", "--output-format", "stream-json", "--verbose"],
    bundleArgs: ["--plugin-dir", "{bundle}"],
    bundleEnv: {},
    events: "claude-stream-json",
  },
  codex: {
    command: "codex",
    // codex exec refuses to run outside a git repository without --skip-git-repo-check; a
    // workspace is the operator's explicit choice (the default one, <home>/workspaces/default, is
    // never a repository), so the refusal would only fail every run, its reason left in stderr.
    promptArgs: ["exec", "--json", "--skip-git-repo-check", "{prompt}"],
    bundleArgs: [],
    bundleEnv: { CODEX_HOME: "{home}" },
    events: "codex-jsonl",
  },
  kimi: {
    command: "kimi",
    promptArgs: ["--print", "-p", "{prompt}"],
    bundleArgs: ["--skills-dir", "{skills}"],
    bundleEnv: {},
    events: "text",
  },
});

/** The paths a materialized session exposes to templates. */
export interface TreePaths {
  readonly root: string;
  readonly bundle: string;
  readonly home: string;
  readonly skills: string;
}

const PATH_PLACEHOLDER_RE = /\{(root|bundle|home|skills)\}/g;
const ANY_PLACEHOLDER_RE = /\{[a-z]+\}/g;
const PATH_PLACEHOLDERS: readonly string[] = ["{root}", "{bundle}", "{home}", "{skills}"];
const ENV_NAME_RE = /^[A-Za-z_][A-Za-z0-9_]*$/;

function badProfile(provider: string, rule: string): never {
  throw new ValidationError("provider-profile-invalid", `provider profile ${provider}: ${rule}`, { details: { provider } });
}

function checkTemplateElement(provider: string, element: unknown, where: "prompt" | "bundle"): void {
  if (typeof element !== "string") badProfile(provider, "template elements must be strings");
  if (element.includes("\0")) badProfile(provider, "template elements must not contain NUL");
  for (const p of element.match(ANY_PLACEHOLDER_RE) ?? []) {
    if (p === "{prompt}") {
      if (where !== "prompt") badProfile(provider, "{prompt} belongs in promptArgs only");
      if (element !== "{prompt}") badProfile(provider, "{prompt} must be a whole argument");
    } else if (!PATH_PLACEHOLDERS.includes(p)) {
      badProfile(provider, `unknown placeholder ${p}`);
    } else if (where !== "bundle") {
      // A run without a bundle has no tree, so prompt arguments cannot name one.
      badProfile(provider, `${p} belongs in bundleArgs or bundleEnv only`);
    }
  }
}

/** Validates profiles (overrides merged onto the defaults) so a bad template fails at start-up. */
export function resolveProfiles(overrides: Partial<Record<ProviderName, Partial<ProviderProfile>>> = {}): ProviderProfiles {
  const out: Partial<Record<ProviderName, ProviderProfile>> = {};
  for (const name of PROVIDER_NAMES) {
    const p: ProviderProfile = { ...DEFAULT_PROVIDER_PROFILES[name], ...(overrides[name] ?? {}) };
    if (typeof p.command !== "string" || p.command.length === 0 || p.command.includes("\0")) {
      badProfile(name, "command must be a non-empty string");
    }
    if (!Array.isArray(p.promptArgs) || p.promptArgs.filter((a) => a === "{prompt}").length !== 1) {
      badProfile(name, "promptArgs must contain {prompt} exactly once");
    }
    p.promptArgs.forEach((a) => checkTemplateElement(name, a, "prompt"));
    if (!Array.isArray(p.bundleArgs)) badProfile(name, "bundleArgs must be an array");
    p.bundleArgs.forEach((a) => checkTemplateElement(name, a, "bundle"));
    for (const [key, value] of Object.entries(p.bundleEnv)) {
      if (!ENV_NAME_RE.test(key)) badProfile(name, `bundleEnv name ${JSON.stringify(key)} is not a variable name`);
      checkTemplateElement(name, value, "bundle");
    }
    if (!EVENT_FORMATS.includes(p.events)) badProfile(name, `events must be one of ${EVENT_FORMATS.join(", ")}`);
    out[name] = Object.freeze({ ...p });
  }
  for (const key of Object.keys(overrides)) {
    if (!(PROVIDER_NAMES as readonly string[]).includes(key)) badProfile(key, "unknown provider");
  }
  return Object.freeze(out as Record<ProviderName, ProviderProfile>);
}

function expandPaths(template: string, paths: TreePaths): string {
  return template.replace(PATH_PLACEHOLDER_RE, (_, key: keyof TreePaths) => paths[key]);
}

/** The bundle arguments and environment of a profile for one materialized tree. */
export function expandBundleLaunch(profile: ProviderProfile, paths: TreePaths): { args: string[]; env: Record<string, string> } {
  const env: Record<string, string> = {};
  for (const [key, value] of Object.entries(profile.bundleEnv)) env[key] = expandPaths(value, paths);
  return { args: profile.bundleArgs.map((a) => expandPaths(a, paths)), env };
}

/** The prompt arguments of a profile; the prompt is one whole argv element. */
export function expandPromptArgs(profile: ProviderProfile, prompt: string): string[] {
  return profile.promptArgs.map((a) => (a === "{prompt}" ? prompt : a));
}
