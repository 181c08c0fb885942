/**
 * How each provider CLI is launched: its command and argument templates. All of it is
 * configuration (DESIGN.md "Providers"), so tests point the commands at fixture agents and an
 * operator can follow a CLI that renames a flag without a code change.
 *
 * Templates are lists of argv elements. `{prompt}` must be a whole element (a prompt is one
 * argument, never spliced into another) and the last of `promptArgs`: the prompt goes last on the
 * command line, after every option, with the `--` or the option that precedes it in the template,
 * so no prompt (`review`, `--help`, `-m x`) is ever read as an option or a subcommand. The path
 * placeholders `{root}`, `{bundle}`, `{home}` and
 * `{skills}` may appear inside an element (`--plugin-dir={bundle}`).
 */
import { ValidationError } from "../core/errors.js";
import { PROVIDER_NAMES, type ProviderName } from "./types.js";

/** Which structured event stream the provider prints on stdout in its non-interactive mode. */
export type EventFormat = "claude-stream-json" | "codex-jsonl" | "text";
export const EVENT_FORMATS: readonly EventFormat[] = ["claude-stream-json", "codex-jsonl", "text"];

/**
 * What the agent may do without asking (a non-interactive run has nobody to ask): `read-only`
 * reads and answers; `workspace` (the default) also edits files and runs shell commands in its
 * workspace; `full` runs anything, unsandboxed — for nodes that are themselves a sandbox.
 */
export type PermissionMode = "read-only" | "workspace" | "full";
export const PERMISSION_MODES: readonly PermissionMode[] = ["read-only", "workspace", "full"];
export const DEFAULT_PERMISSION: PermissionMode = "workspace";

/** The arguments and environment one permission mode adds to a launch. */
export interface PermissionLaunch {
  readonly args: readonly string[];
  readonly env: Readonly<Record<string, string>>;
}

/**
 * The model endpoint the provider's CLI talks to (a gateway, a local model server). The key is
 * never configuration: `apiKeyEnv` names a variable of the node's environment that holds it, so
 * it is in no file, no journal and no log.
 */
export interface ModelEndpoint {
  /** as the CLI expects it: Claude Code `http://host:port`, Codex `http://host:port/v1` */
  readonly baseUrl: string;
  /** the node's environment variable that holds the API key */
  readonly apiKeyEnv?: string;
  /** the model name to ask for */
  readonly name?: string;
  /** how often the CLI retries a failed model request (its own default otherwise) */
  readonly retries?: number;
}

export interface ProviderProfile {
  /** executable name (looked up on PATH) or absolute path */
  readonly command: string;
  /** non-interactive mode: arguments that carry the prompt, `{prompt}` last (expandLaunchArgs) */
  readonly promptArgs: readonly string[];
  /** arguments that point the provider at a materialized bundle (appended after promptArgs) */
  readonly bundleArgs: readonly string[];
  /** environment that points the provider at a materialized bundle */
  readonly bundleEnv: Readonly<Record<string, string>>;
  readonly events: EventFormat;
  /** the permission mode of runs with this provider (a workspace may choose another) */
  readonly permission: PermissionMode;
  /** what each permission mode adds to the launch (after promptArgs, before bundleArgs) */
  readonly permissions: Readonly<Record<PermissionMode, PermissionLaunch>>;
  /**
   * what a permission mode adds instead when warden's own sandbox confines the run and replaces
   * the CLI's (a CLI's sandbox cannot start nested in another); unset modes use `permissions`
   */
  readonly confinedPermissions?: Readonly<Partial<Record<PermissionMode, PermissionLaunch>>>;
  /** environment every run of the provider gets (non-essential traffic off) */
  readonly env: Readonly<Record<string, string>>;
  /** where the CLI's model requests go; unset: the CLI's own default and credentials */
  readonly model?: ModelEndpoint;
}

export type ProviderProfiles = Readonly<Record<ProviderName, ProviderProfile>>;

export const DEFAULT_PROVIDER_PROFILES: ProviderProfiles = Object.freeze({
  claude: {
    command: "claude",
    // `--`: Claude Code reads everything after it as the prompt, never as a flag (`--help`).
    promptArgs: ["-p", "--output-format", "stream-json", "--verbose", "--", "{prompt}"],
    bundleArgs: ["--plugin-dir", "{bundle}"],
    bundleEnv: {},
    events: "claude-stream-json",
    permission: DEFAULT_PERMISSION,
    // acceptEdits: file edits and file-changing shell commands inside the working directory run;
    // anything else that would prompt is refused (there is nobody to ask), and says so.
    permissions: {
      "read-only": { args: ["--permission-mode", "dontAsk"], env: {} },
      workspace: { args: ["--permission-mode", "acceptEdits"], env: {} },
      // Claude Code refuses to bypass permissions as root unless told it runs in a sandbox.
      full: { args: ["--permission-mode", "bypassPermissions"], env: { IS_SANDBOX: "1" } },
    },
    env: { CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: "1" },
  },
  codex: {
    command: "codex",
    // codex exec refuses to run outside a git repository without --skip-git-repo-check; a
    // workspace is the operator's explicit choice (the default one, <home>/workspaces/default, is
    // never a repository), so the refusal would only fail every run, its reason left in stderr.
    // `--`: a prompt `review` or `resume` would otherwise run codex exec's subcommand of that name.
    promptArgs: ["exec", "--json", "--skip-git-repo-check", "--", "{prompt}"],
    bundleArgs: [],
    // The materialized home, for whoever launches codex on a tree (POST .../materializations). A
    // run of this node gets CODEX_HOME in its private home instead (run-home.ts, over this): Codex
    // writes its sessions and its sandbox helper there, and the tree stays read-only.
    bundleEnv: { CODEX_HOME: "{home}" },
    events: "codex-jsonl",
    permission: DEFAULT_PERMISSION,
    permissions: {
      "read-only": { args: ["--sandbox", "read-only"], env: {} },
      workspace: { args: ["--sandbox", "workspace-write"], env: {} },
      full: { args: ["--dangerously-bypass-approvals-and-sandbox"], env: {} },
    },
    // Codex's sandbox is bubblewrap, which cannot create its namespaces inside warden's (measured:
    // "Can't mount proc on /newroot/proc: Operation not permitted"): confined, warden's sandbox
    // is the only one, and it enforces the mode (a read-only run's workspace is mounted read-only).
    confinedPermissions: {
      "read-only": { args: ["--sandbox", "danger-full-access"], env: {} },
      workspace: { args: ["--sandbox", "danger-full-access"], env: {} },
    },
    env: {},
  },
  kimi: {
    command: "kimi",
    // `-p` takes the next argument as its value whatever it starts with (Click's rule).
    promptArgs: ["--print", "-p", "{prompt}"],
    bundleArgs: ["--skills-dir", "{skills}"],
    bundleEnv: {},
    events: "text",
    permission: DEFAULT_PERMISSION,
    // kimi's --print mode decides alone: warden has no flag to pass for any mode.
    permissions: { "read-only": { args: [], env: {} }, workspace: { args: [], env: {} }, full: { args: [], env: {} } },
    env: {},
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

function checkTemplateElement(provider: string, element: unknown, where: "prompt" | "bundle", placeholders = true): void {
  if (typeof element !== "string") badProfile(provider, "template elements must be strings");
  if (element.includes("\0")) badProfile(provider, "template elements must not contain NUL");
  for (const p of element.match(ANY_PLACEHOLDER_RE) ?? []) {
    if (!placeholders) badProfile(provider, `${p}: permission and environment templates take no placeholders`);
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

function checkEnv(provider: string, where: string, env: unknown): void {
  if (typeof env !== "object" || env === null || Array.isArray(env)) badProfile(provider, `${where} must be an object`);
  for (const [key, value] of Object.entries(env)) {
    if (!ENV_NAME_RE.test(key)) badProfile(provider, `${where} name ${JSON.stringify(key)} is not a variable name`);
    checkTemplateElement(provider, value, "prompt", false);
  }
}

function checkModel(provider: string, model: ModelEndpoint): void {
  let url: URL | undefined;
  try {
    url = new URL(model.baseUrl);
  } catch {
    url = undefined;
  }
  if (url === undefined || (url.protocol !== "http:" && url.protocol !== "https:")) badProfile(provider, "model.baseUrl must be an http(s) URL");
  // A key in the URL would be journaled with the launch and written into codex's config.toml.
  if (url.username !== "" || url.password !== "") badProfile(provider, "model.baseUrl must not carry credentials (use model.apiKeyEnv)");
  if (model.apiKeyEnv !== undefined && !ENV_NAME_RE.test(model.apiKeyEnv)) badProfile(provider, "model.apiKeyEnv must be a variable name");
  if (model.name !== undefined && (typeof model.name !== "string" || model.name === "" || model.name.includes("\0"))) badProfile(provider, "model.name must be a non-empty string");
  if (model.retries !== undefined && (!Number.isInteger(model.retries) || model.retries < 0 || model.retries > 100)) badProfile(provider, "model.retries must be an integer from 0 to 100");
  if (provider === "kimi") badProfile(provider, "model: warden has no way to point kimi at a model endpoint (configure kimi itself)");
}

/** Validates profiles (overrides merged onto the defaults) so a bad template fails at start-up. */
export function resolveProfiles(overrides: Partial<Record<ProviderName, Partial<ProviderProfile>>> = {}): ProviderProfiles {
  const out: Partial<Record<ProviderName, ProviderProfile>> = {};
  for (const name of PROVIDER_NAMES) {
    const base = DEFAULT_PROVIDER_PROFILES[name];
    const override = overrides[name] ?? {};
    // A mode or variable the operator names replaces the default's; the others stay.
    const p: ProviderProfile = {
      ...base,
      ...override,
      permissions: { ...base.permissions, ...(override.permissions ?? {}) },
      env: { ...base.env, ...(override.env ?? {}) },
    };
    if (typeof p.command !== "string" || p.command.length === 0 || p.command.includes("\0")) {
      badProfile(name, "command must be a non-empty string");
    }
    if (!Array.isArray(p.promptArgs) || p.promptArgs.filter((a) => a === "{prompt}").length !== 1) {
      badProfile(name, "promptArgs must contain {prompt} exactly once");
    }
    // The prompt goes after every option, as the value of the option before it or after `--`: a
    // bare positional prompt `--help` or `review` would be read as an option or a subcommand.
    if (p.promptArgs.at(-1) !== "{prompt}") badProfile(name, "{prompt} must be the last element of promptArgs (the prompt goes after every option)");
    if (!(p.promptArgs.at(-2) ?? "").startsWith("-")) badProfile(name, "{prompt} must follow `--` or the option that takes it as its value");
    p.promptArgs.forEach((a) => checkTemplateElement(name, a, "prompt"));
    if (!Array.isArray(p.bundleArgs)) badProfile(name, "bundleArgs must be an array");
    p.bundleArgs.forEach((a) => checkTemplateElement(name, a, "bundle"));
    for (const [key, value] of Object.entries(p.bundleEnv)) {
      if (!ENV_NAME_RE.test(key)) badProfile(name, `bundleEnv name ${JSON.stringify(key)} is not a variable name`);
      checkTemplateElement(name, value, "bundle");
    }
    if (!EVENT_FORMATS.includes(p.events)) badProfile(name, `events must be one of ${EVENT_FORMATS.join(", ")}`);
    if (!PERMISSION_MODES.includes(p.permission)) badProfile(name, `permission must be one of ${PERMISSION_MODES.join(", ")}`);
    for (const mode of PERMISSION_MODES) {
      const launch = p.permissions[mode];
      if (launch === undefined || !Array.isArray(launch.args)) badProfile(name, `permissions.${mode} must have args`);
      launch.args.forEach((a) => checkTemplateElement(name, a, "prompt", false));
      checkEnv(name, `permissions.${mode}.env`, launch.env ?? {});
    }
    for (const [mode, launch] of Object.entries(p.confinedPermissions ?? {})) {
      if (!(PERMISSION_MODES as readonly string[]).includes(mode)) badProfile(name, `confinedPermissions.${mode}: not a permission mode`);
      if (launch === undefined || !Array.isArray(launch.args)) badProfile(name, `confinedPermissions.${mode} must have args`);
      launch.args.forEach((a) => checkTemplateElement(name, a, "prompt", false));
      checkEnv(name, `confinedPermissions.${mode}.env`, launch.env ?? {});
    }
    checkEnv(name, "env", p.env);
    if (p.model !== undefined) checkModel(name, p.model);
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

/**
 * The argument list of a launch: `promptArgs` up to the prompt, then `options` (the permission
 * mode's and the bundle's), then `--` (or the option that takes the prompt as its value) and the
 * prompt, one whole argv element after every option: a CLI never reads it as an option or a
 * subcommand.
 */
export function expandLaunchArgs(profile: ProviderProfile, prompt: string, options: readonly string[]): string[] {
  // resolveProfiles: `{prompt}` is the last element, after `--` or the option that takes it.
  const head = profile.promptArgs.slice(0, -2);
  return [...head, ...options, profile.promptArgs.at(-2) as string, prompt];
}

/**
 * The permission arguments and the environment of a run (the model endpoint's is
 * model-endpoint.ts's). `confined`: warden's sandbox encloses the run and replaces the CLI's own
 * where the profile says so (confinedPermissions).
 */
export function expandRunLaunch(profile: ProviderProfile, permission: PermissionMode, confined = false): { args: string[]; env: Record<string, string> } {
  const launch = (confined ? profile.confinedPermissions?.[permission] : undefined) ?? profile.permissions[permission];
  return { args: [...launch.args], env: { ...profile.env, ...launch.env } };
}
