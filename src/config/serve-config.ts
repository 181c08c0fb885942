/**
 * The configuration of `warden serve`: flags over environment over `<home>/warden.json` over
 * defaults (home `./.warden` or `$WARDEN_HOME`, listen `127.0.0.1:7420`).
 */
import { isAbsolute, join, resolve } from "node:path";
import { errnoCode, ValidationError } from "../core/errors.js";
import { resolveLimits, type Limits } from "../core/limits.js";
import type { PermissionMode, ProviderProfile } from "../providers/profiles.js";
import { isProviderName, type ProviderName } from "../providers/types.js";
import { checkAncestorsSync, checkPrivatePathsSync, ensurePrivateDirSync, readPrivateFileSync } from "../storage/secure-fs.js";
import type { SigningConfig } from "../signing/policy.js";
import { MAX_POLICY_BYTES } from "../policy/tool-policy.js";
import type { PolicySource, WorkspacePolicies } from "../runner/runner.js";
import type { WardenOptions } from "../warden/facade.js";
import type { QueueConfig } from "../warden/queue-runner.js";
import { logOptionsOf, type LogFlags } from "./log-config.js";
import { whileHomeHeld } from "../warden/home-backend.js";
import { parseConfigText } from "./check.js";
import { DEFAULT_LISTEN, parseListen, type ListenAddress } from "./listen.js";
import { ConfigFile, LOG_LEVELS, type LogLevel } from "./schema.js";
import { TOKEN_FILE, TOKENS_FILE, loadTokens, type TokenRecord } from "./tokens.js";

export const CONFIG_FILE = "warden.json";
const MAX_CONFIG_BYTES = 1024 * 1024;

export interface ServeFlags {
  readonly home?: string;
  readonly listen?: string;
  /** `ID=/abs/path`, repeatable */
  readonly workspace?: readonly string[];
  /** workspace ids whose own provider configuration may run, repeatable (added to the file's trustedWorkspaces) */
  readonly trustWorkspace?: readonly string[];
  /** `NAME=COMMAND`, repeatable */
  readonly provider?: readonly string[];
  readonly logLevel?: string;
  /** `postgresql://…`: run on the shared PostgreSQL backend (else $WARDEN_POSTGRES_URL, else embedded) */
  readonly postgres?: string;
  /** the transparency log's origin and witnesses (log-config.ts) */
  readonly log?: LogFlags;
}

/** What the HTTP layer needs besides the Warden. */
export interface ServerSettings {
  readonly tokens: readonly TokenRecord[];
  /** upper bound of `Prefer: wait=<s>` */
  readonly maxWaitS: number;
  /** largest JSON request body, bytes */
  readonly jsonBodyBytes: number;
  readonly logLevel: LogLevel;
}

export interface ServeConfig {
  readonly home: string;
  readonly listen: ListenAddress;
  readonly warden: WardenOptions;
  readonly server: ServerSettings;
  readonly shutdownGraceMs: number;
  /** set when this start generated `<home>/token` */
  readonly generatedToken?: string;
}

export const DEFAULT_MAX_WAIT_S = 60;
export const DEFAULT_JSON_BODY_BYTES = 2 * 1024 * 1024;
export const DEFAULT_SHUTDOWN_GRACE_S = 10;

export function resolveServeHome(flag: string | undefined, env: Readonly<Record<string, string | undefined>>, cwd: string): string {
  const chosen = flag !== undefined && flag !== "" ? flag : env.WARDEN_HOME !== undefined && env.WARDEN_HOME !== "" ? env.WARDEN_HOME : ".warden";
  return resolve(cwd, chosen);
}

/**
 * Loads everything `serve` needs; creates the home (0700) and, when no token is configured at
 * all, generates the operator token file.
 */
export function loadServeConfig(flags: ServeFlags, env: Readonly<Record<string, string | undefined>>, cwd: string): ServeConfig {
  const home = resolveServeHome(flags.home, env, cwd);
  // Before anything is created or written there (the token of a first start).
  checkAncestorsSync(home);
  checkHomeModes(home);
  ensurePrivateDirSync(home, { create: true, recursive: true });
  const file = readConfigFile(join(home, CONFIG_FILE));
  const limits: Limits = resolveLimits((file.limits ?? {}) as Partial<Limits>);
  const workspaces: Record<string, string> = { ...(file.workspaces ?? {}) };
  for (const [id, path] of Object.entries(workspaces)) workspaces[id] = checkWorkspace(id, path);
  for (const spec of flags.workspace ?? []) {
    const [id, path] = splitPair(spec, "--workspace", "ID=/abs/path");
    workspaces[id] = checkWorkspace(id, path);
  }
  const providers: Partial<Record<ProviderName, Partial<ProviderProfile>>> = {};
  for (const [name, value] of Object.entries(file.providers ?? {})) {
    if (value === undefined || !isProviderName(name)) continue;
    const profile = (typeof value === "string" ? { command: value } : { ...value }) as Partial<ProviderProfile>;
    providers[name] = profile.command === undefined ? profile : { ...profile, command: commandPath(profile.command, cwd) };
  }
  for (const spec of flags.provider ?? []) {
    const [name, command] = splitPair(spec, "--provider", "NAME=COMMAND");
    if (!isProviderName(name)) throw new ValidationError("config-provider-invalid", `--provider ${name}: unknown provider (claude, codex, kimi)`);
    providers[name] = { ...(providers[name] ?? {}), command: commandPath(command, cwd) };
  }
  const logLevel = checkLogLevel(flags.logLevel ?? env.WARDEN_LOG_LEVEL ?? file.logLevel ?? "info");
  const loaded = whileHomeHeld(home, () =>
    loadTokens({
      home,
      ...(env.WARDEN_TOKEN === undefined ? {} : { operatorToken: env.WARDEN_TOKEN }),
      ...(env.WARDEN_OBSERVER_TOKEN === undefined ? {} : { observerToken: env.WARDEN_OBSERVER_TOKEN }),
      ...(file.operatorName === undefined ? {} : { operatorName: file.operatorName }),
      ...(file.observerName === undefined ? {} : { observerName: file.observerName }),
    }),
  );
  const warden: WardenOptions = {
    home,
    limits,
    workspaces,
    providers,
    ...(file.defaultWorkspace === undefined ? {} : { defaultWorkspace: file.defaultWorkspace }),
    ...(file.workspacePermissions === undefined ? {} : { workspacePermissions: file.workspacePermissions as Record<string, PermissionMode> }),
    ...trustedOf(file, flags),
    ...(file.agentEnv === undefined ? {} : { passEnv: file.agentEnv }),
    ...(file.isolation === undefined ? {} : { isolation: file.isolation }),
    ...(file.workspaceIsolation === undefined ? {} : { workspaceIsolation: file.workspaceIsolation }),
    ...(file.sandbox === undefined ? {} : { sandbox: file.sandbox }),
    ...(file.defaultTimeoutS === undefined ? {} : { defaultTimeoutS: file.defaultTimeoutS }),
    ...(file.maxTimeoutS === undefined ? {} : { maxTimeoutS: file.maxTimeoutS }),
    ...(file.killGraceMs === undefined ? {} : { killGraceMs: file.killGraceMs }),
    ...(file.maxPromptBytes === undefined ? {} : { maxPromptBytes: file.maxPromptBytes }),
    ...postgresOf(flags, env),
    ...(flags.log === undefined ? {} : { log: logOptionsOf(flags.log) }),
    ...(file.signing === undefined ? {} : { signing: signingOf(file.signing, home) }),
    ...(file.spend === undefined ? {} : { spend: file.spend }),
    ...(file.queue === undefined ? {} : { queue: file.queue as QueueConfig }),
    ...(file.policies === undefined ? {} : { policies: policiesOf(file.policies, home) }),
    ...(file.approvalDeadlineS === undefined ? {} : { approvalDeadlineS: file.approvalDeadlineS }),
  };
  return {
    home,
    listen: listenOf(flags, file),
    warden,
    server: {
      tokens: loaded.tokens,
      maxWaitS: file.maxWaitS ?? DEFAULT_MAX_WAIT_S,
      jsonBodyBytes: file.jsonBodyBytes ?? DEFAULT_JSON_BODY_BYTES,
      logLevel,
    },
    shutdownGraceMs: (file.shutdownGraceS ?? DEFAULT_SHUTDOWN_GRACE_S) * 1000,
    ...(loaded.generated === undefined ? {} : { generatedToken: loaded.generated }),
  };
}

/**
 * The address `serve` will listen on, read without creating or writing anything: `serve` takes it
 * before `loadServeConfig` creates the home and its token, so a start that cannot listen (the port
 * is taken) leaves a new home as it found it.
 */
export function loadServeListen(flags: ServeFlags, env: Readonly<Record<string, string | undefined>>, cwd: string): ListenAddress {
  const home = resolveServeHome(flags.home, env, cwd);
  checkHomeModes(home);
  return listenOf(flags, readConfigFile(join(home, CONFIG_FILE)));
}

/**
 * The home and the files an operator writes into it by hand (`warden.json`, `tokens.json`, `token`)
 * must be private (0700, 0600): every one that is not is named in one error, so a home made with
 * `mkdir` and an editor under umask 022 is fixed in one go, not one restart per file.
 */
function checkHomeModes(home: string): void {
  checkPrivatePathsSync([
    { path: home, kind: "directory" },
    ...[CONFIG_FILE, TOKENS_FILE, TOKEN_FILE].map((name) => ({ path: join(home, name), kind: "file" as const })),
  ]);
}

function listenOf(flags: ServeFlags, file: ConfigFile): ListenAddress {
  return parseListen(flags.listen ?? file.listen ?? `${DEFAULT_LISTEN.host}:${DEFAULT_LISTEN.port}`);
}

/** The fleet database, from `--postgres` or $WARDEN_POSTGRES_URL; none means the embedded backend. */
function postgresOf(flags: ServeFlags, env: Readonly<Record<string, string | undefined>>): Pick<WardenOptions, "postgres"> {
  const url = flags.postgres !== undefined && flags.postgres !== "" ? flags.postgres : env.WARDEN_POSTGRES_URL;
  if (url === undefined || url === "") return {};
  if (!/^postgres(ql)?:\/\//.test(url)) {
    throw new ValidationError("config-postgres-invalid", "--postgres / WARDEN_POSTGRES_URL must be a postgresql:// URL");
  }
  return { postgres: { url } };
}

/** Checks each rule's requirement and makes its allowed_signers path absolute (relative: to the home). */
function signingOf(config: NonNullable<ConfigFile["signing"]>, home: string): SigningConfig {
  const rules = config.rules.map((rule, i) => {
    const given = [rule.any_of, rule.all_of, rule.k_of].filter((r) => r !== undefined).length;
    if (given > 1) throw new ValidationError("config-signing-invalid", `signing.rules[${i}]: give at most one of any_of, all_of, k_of`);
    if (rule.k_of !== undefined && rule.k_of.k > rule.k_of.principals.length) {
      throw new ValidationError("config-signing-invalid", `signing.rules[${i}]: k_of.k (${rule.k_of.k}) is more than its ${rule.k_of.principals.length} principals`);
    }
    return { ...rule, allowed_signers: resolve(home, rule.allowed_signers) };
  });
  return { rules };
}

/**
 * Reads each workspace's policy files (relative: to the home). They are checked as the home's own
 * files are (private, not a link), since whoever can write one decides what agents may do; the
 * runner compiles and validates them when the node opens.
 */
function policiesOf(config: NonNullable<ConfigFile["policies"]>, home: string): Record<string, WorkspacePolicies> {
  const out: Record<string, WorkspacePolicies> = {};
  for (const [workspace, entry] of Object.entries(config)) {
    const files: Record<string, string | undefined> = typeof entry === "string" ? { default: entry } : entry;
    const policies: Record<string, PolicySource> = {};
    for (const [key, file] of Object.entries(files)) {
      if (file === undefined) continue;
      const path = resolve(home, file);
      let text: string;
      try {
        text = readPrivateFileSync(path, MAX_POLICY_BYTES).toString("utf8");
      } catch (error) {
        if (errnoCode(error) === "ENOENT") throw new ValidationError("tool-policy-invalid", `tool policy ${file} (policies.${workspace}): no such file`, { details: { source: file } });
        throw error;
      }
      policies[key] = { text, source: file };
    }
    out[workspace] = policies as WorkspacePolicies;
  }
  return out;
}

function readConfigFile(path: string): ConfigFile {
  let text: string;
  try {
    text = readPrivateFileSync(path, MAX_CONFIG_BYTES).toString("utf8");
  } catch (error) {
    if (errnoCode(error) === "ENOENT") return {};
    throw error;
  }
  return parseConfigText(ConfigFile, text, "config-file-invalid", path);
}

function splitPair(spec: string, flag: string, shape: string): [string, string] {
  const at = spec.indexOf("=");
  if (at <= 0 || at === spec.length - 1) throw new ValidationError("config-flag-invalid", `${flag} ${JSON.stringify(spec)}: expected ${shape}`);
  return [spec.slice(0, at), spec.slice(at + 1)];
}

const WORKSPACE_ID_RE = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;

function checkWorkspace(id: string, path: string): string {
  if (!WORKSPACE_ID_RE.test(id)) {
    throw new ValidationError("config-workspace-invalid", `workspace id ${JSON.stringify(id)}: 1–64 of A-Z a-z 0-9 . _ -`);
  }
  if (!isAbsolute(path)) throw new ValidationError("config-workspace-invalid", `workspace ${id}: ${JSON.stringify(path)} is not an absolute path`);
  return path;
}

/** A command with a slash is a path (made absolute from the cwd); a bare name is looked up on PATH. */
function commandPath(command: string, cwd: string): string {
  return command.includes("/") ? resolve(cwd, command) : command;
}

function checkLogLevel(level: string): LogLevel {
  const levels: readonly string[] = LOG_LEVELS;
  if (!levels.includes(level)) throw new ValidationError("config-log-level-invalid", `log level ${JSON.stringify(level)}: one of ${levels.join(", ")}`);
  return level as LogLevel;
}

/**
 * The workspaces whose own provider configuration may run: the file's `trustedWorkspaces` and
 * every `--trust-workspace`. Each must be a configured workspace (the runner refuses others).
 */
function trustedOf(file: ConfigFile, flags: ServeFlags): { trustedWorkspaces?: readonly string[] } {
  const ids = [...new Set([...(file.trustedWorkspaces ?? []), ...(flags.trustWorkspace ?? [])])];
  return ids.length === 0 ? {} : { trustedWorkspaces: ids };
}
