/**
 * A fresh private home for every run (DESIGN.md "Providers", "Run homes"): `<root>/<run id>/`,
 * mode 0700, written by warden before the launch and removed when the run ends. HOME, the XDG
 * directories and TMPDIR of the agent point into it, so a provider CLI never reads the node
 * user's own `~/.claude`, `~/.codex` or their credentials, and whatever a run writes there (its
 * session transcripts, caches) is gone with it.
 *
 * - claude: `CLAUDE_CONFIG_DIR` is `<home>/.claude`, holding only warden's pinned `settings.json`;
 *   the workspace's own settings (`.claude/settings*.json`, its hooks, `.mcp.json`, `CLAUDE.md`)
 *   are loaded only when the workspace is trusted (`--setting-sources`).
 * - codex: `CODEX_HOME` is `<home>/.codex`: the materialized (verified) `config.toml`, plus the
 *   workspace as a trusted project when it is trusted (Codex loads a project's `.codex/` config
 *   only then); the bundle's skills are linked from the materialized tree, read-only there.
 *   `TMPDIR` inside the home keeps CODEX_HOME out of the temporary directory, where Codex refuses
 *   to create its sandbox helper (every shell command would then fail).
 *
 * The directory is the agent's to write: nothing in it is evidence, and nothing of it is
 * re-read by warden after the launch.
 */
import * as fsp from "node:fs/promises";
import { join } from "node:path";
import { stringify } from "smol-toml";
import { ConflictError, errnoCode, isStorageFull, storageFull } from "../core/errors.js";
import { ensurePrivateDirSync, PRIVATE_DIR_MODE, syncDir, TEMP_PREFIX } from "../storage/secure-fs.js";
import { CODEX_HOOK_TRUST_ARGS, claudeHookSettings, codexHookConfig, type HttpHook } from "../policy/hook.js";
import { HOME_DIR } from "./binding.js";
import { RUN_SHM_DIR, RUN_TMP_DIR } from "../sandbox/profile.js";
import { CODEX_CONFIG_FILE, codexConfigToml } from "./codex-config.js";
import type { ProviderProfile } from "./profiles.js";
import { isSessionName, validateSessionName } from "./sessions.js";
import { removeTree } from "../storage/tree-remove.js";
import type { Materialization, ProviderName } from "./types.js";

/** Claude Code's configuration directory inside a run home (CLAUDE_CONFIG_DIR). */
/**
 * One file of a CLI session's transcript: `<CLAUDE_CONFIG_DIR>/projects/<dir>/<session>.jsonl`.
 * The same shape as the parked-session store's `TranscriptFile` (invocations sits beside providers,
 * so neither imports the other; the runner passes one for the other).
 */
export interface TranscriptFile {
  /** the project directory's name (one path component) */
  readonly dir: string;
  readonly bytes: Uint8Array;
}

export const CLAUDE_CONFIG_DIR = ".claude";
/** Codex's home inside a run home (CODEX_HOME). */
export const CODEX_HOME_DIR = ".codex";

/**
 * The `--setting-sources` of a Claude Code run. Measured with Claude Code 2.1.328: `user` alone
 * (whose settings are warden's own, CLAUDE_CONFIG_DIR) keeps the workspace's `.claude/settings*.json`
 * hooks, its `.mcp.json` servers and its `CLAUDE.md` out; the bundle, a plugin (`--plugin-dir`),
 * keeps its skills and MCP servers.
 */
export const CLAUDE_SETTING_SOURCES: Readonly<Record<"trusted" | "untrusted", string>> = Object.freeze({
  untrusted: "user",
  trusted: "user,project,local",
});

/**
 * Warden's pinned Claude Code user settings. Project MCP servers are never auto-approved from
 * here (a trusted workspace's own settings may approve them).
 */
export const CLAUDE_PINNED_SETTINGS: Readonly<Record<string, unknown>> = Object.freeze({ enableAllProjectMcpServers: false });

/** What a run home sets in every agent's environment. */
const HOME_ENV_NAMES = ["HOME", "TMPDIR", "XDG_CONFIG_HOME", "XDG_CACHE_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME"] as const;

/** The names of the environment a run home of `provider` sets (its values are per run), for the isolation profile. */
export function runHomeEnvNames(provider: ProviderName): readonly string[] {
  return [...HOME_ENV_NAMES, ...(provider === "claude" ? ["CLAUDE_CONFIG_DIR"] : provider === "codex" ? ["CODEX_HOME"] : [])];
}

export interface RunHomeRequest {
  /** the run id: the directory's name */
  readonly run: string;
  readonly provider: ProviderName;
  readonly profile: ProviderProfile;
  /** absolute path of the workspace the agent runs in */
  readonly workspace: string;
  /** the workspace's own provider configuration may run (DESIGN.md "Workspace trust") */
  readonly trusted: boolean;
  /** the run's materialized tree, when it has one (a codex run's verified config.toml and skills) */
  readonly materialization?: Materialization;
  /** the command of the run's pre-tool hook, when a policy decides its tool calls (policy/hook.ts) */
  readonly preToolHook?: string;
  /** a governed Claude run's HTTP pre-tool hook (policy/hook.ts) */
  readonly preToolHttpHook?: HttpHook;
  /** a traced run (DESIGN.md "Traces"): the run span's context for the agent, and where the node's traces go */
  readonly trace?: RunHomeTrace;
}

/** What a traced run's agent is told of its trace. */
export interface RunHomeTrace {
  /** `TRACEPARENT` (and `TRACESTATE`): Claude Code and Codex continue the trace from it */
  readonly env: Readonly<Record<string, string>>;
  /** the OTLP/HTTP traces endpoint Codex's `[otel]` table exports to (never the node's headers) */
  readonly tracesEndpoint: string;
}

export interface RunHome {
  /** absolute path of the run's private home: a sandbox binds it read-write */
  readonly path: string;
  /** environment pointing the provider at it (over the node's: HOME, TMPDIR, ...) */
  readonly env: Readonly<Record<string, string>>;
  /** arguments pinning where the provider reads its configuration from */
  readonly args: readonly string[];
}

export class RunHomes {
  readonly root: string;

  constructor(root: string) {
    this.root = root;
    ensurePrivateDirSync(root, { create: true, recursive: true });
  }

  /** Writes `<root>/<run>/` for the run; refused when it exists (a run id is used once). */
  async create(request: RunHomeRequest): Promise<RunHome> {
    const run = validateSessionName(request.run);
    const path = join(this.root, run);
    try {
      await fsp.mkdir(path, { mode: PRIVATE_DIR_MODE });
    } catch (error) {
      if (errnoCode(error) === "EEXIST") {
        throw new ConflictError("run-home-exists", `run ${JSON.stringify(run)} already has a home`, { details: { run } });
      }
      throw isStorageFull(error) ? storageFull("create the run's home", error) : error;
    }
    try {
      const written = await this.#write(path, request);
      await syncDir(this.root);
      return Object.freeze(written);
    } catch (error) {
      await removeTree(path).catch(() => undefined);
      throw isStorageFull(error) ? storageFull("create the run's home", error) : error;
    }
  }

  async #write(path: string, request: RunHomeRequest): Promise<RunHome> {
    const tmp = join(path, RUN_TMP_DIR);
    await fsp.mkdir(tmp, { mode: PRIVATE_DIR_MODE });
    await fsp.mkdir(join(path, RUN_SHM_DIR), { mode: PRIVATE_DIR_MODE });
    const env: Record<string, string> = {
      HOME: path,
      TMPDIR: tmp,
      XDG_CONFIG_HOME: join(path, ".config"),
      XDG_CACHE_HOME: join(path, ".cache"),
      XDG_DATA_HOME: join(path, ".local", "share"),
      XDG_STATE_HOME: join(path, ".local", "state"),
    };
    const args: string[] = [];
    if (request.provider === "claude") {
      const config = join(path, CLAUDE_CONFIG_DIR);
      await fsp.mkdir(config, { mode: PRIVATE_DIR_MODE });
      const settings = request.preToolHttpHook === undefined ? CLAUDE_PINNED_SETTINGS : { ...CLAUDE_PINNED_SETTINGS, hooks: claudeHookSettings(request.preToolHttpHook) };
      await writePrivate(join(config, "settings.json"), `${JSON.stringify(settings)}\n`);
      env.CLAUDE_CONFIG_DIR = config;
      args.push("--setting-sources", CLAUDE_SETTING_SOURCES[request.trusted ? "trusted" : "untrusted"]);
    } else if (request.provider === "codex") {
      const codexHome = join(path, CODEX_HOME_DIR);
      await fsp.mkdir(codexHome, { mode: PRIVATE_DIR_MODE });
      await writePrivate(join(codexHome, CODEX_CONFIG_FILE), await codexConfig(request));
      const skills = request.materialization === undefined ? undefined : join(request.materialization.root, HOME_DIR, "skills");
      if (skills !== undefined && (await isDirectory(skills))) await fsp.symlink(skills, join(codexHome, "skills"));
      env.CODEX_HOME = codexHome;
      if (request.preToolHook !== undefined) args.push(...CODEX_HOOK_TRUST_ARGS);
    }
    // Last: the run span's context is the run's own, whatever else set these names.
    if (request.trace !== undefined) Object.assign(env, request.trace.env);
    return { path, env, args };
  }

  /** Removes the run's home without following links. Idempotent. */
  async remove(run: string): Promise<void> {
    await removeTree(join(this.root, validateSessionName(run)));
    await syncDir(this.root);
  }

  /**
   * A parked run's home made anew for its resumed CLI (DESIGN.md "Governed tool calls"): the old
   * one is set aside, a fresh one written as `create` writes it (the agent may have edited its
   * settings or hooks there), and only the CLI's session transcript (`<session>.jsonl` under
   * `.claude/projects/*`, regular files, no link followed) is copied over; then the old one goes.
   */
  async renew(request: RunHomeRequest, session: string, shipped: readonly TranscriptFile[] = []): Promise<RunHome> {
    const run = validateSessionName(request.run);
    const old = join(this.root, `${TEMP_PREFIX}${run}`);
    await removeTree(old).catch(() => undefined);
    await fsp.rename(join(this.root, run), old).catch((error: unknown) => {
      if (errnoCode(error) !== "ENOENT") throw error;
    });
    try {
      const home = await this.create(request);
      const projects = join(old, CLAUDE_CONFIG_DIR, "projects");
      const file = `${session}.jsonl`;
      const local = await this.#transcript(old, session);
      // Parked on another node (a fleet), or this one's home is gone: the transcript kept for the fleet.
      for (const { dir, bytes } of local.length > 0 ? [] : shipped) {
        if (!isProjectDir(dir)) continue;
        const to = join(home.path, CLAUDE_CONFIG_DIR, "projects", dir);
        await fsp.mkdir(to, { recursive: true, mode: PRIVATE_DIR_MODE });
        await writePrivate(join(to, file), bytes);
      }
      for (const dir of await fsp.readdir(projects).catch(() => [] as string[])) {
        const from = join(projects, dir, file);
        const st = await fsp.lstat(join(projects, dir)).catch(() => undefined);
        const fst = await fsp.lstat(from).catch(() => undefined);
        if (st?.isDirectory() !== true || fst?.isFile() !== true) continue;
        const to = join(home.path, CLAUDE_CONFIG_DIR, "projects", dir);
        await fsp.mkdir(to, { recursive: true, mode: PRIVATE_DIR_MODE });
        await fsp.copyFile(from, join(to, file), fsp.constants.COPYFILE_EXCL);
      }
      return home;
    } finally {
      await removeTree(old).catch(() => undefined);
    }
  }

  /** The CLI session transcript files in a run's home (`<session>.jsonl` in each `.claude/projects` directory, regular files). */
  async transcript(run: string, session: string): Promise<TranscriptFile[]> {
    return this.#transcript(join(this.root, validateSessionName(run)), session);
  }

  async #transcript(home: string, session: string): Promise<TranscriptFile[]> {
    const projects = join(home, CLAUDE_CONFIG_DIR, "projects");
    const files: TranscriptFile[] = [];
    for (const dir of await fsp.readdir(projects).catch(() => [] as string[])) {
      const st = await fsp.lstat(join(projects, dir)).catch(() => undefined);
      const path = join(projects, dir, `${session}.jsonl`);
      const fst = await fsp.lstat(path).catch(() => undefined);
      if (st?.isDirectory() !== true || fst?.isFile() !== true) continue;
      files.push({ dir, bytes: await fsp.readFile(path) });
    }
    return files;
  }

  /**
   * Removes every run home but those `keep` names (parked runs': their CLI session goes on):
   * called at start-up, before any run, when the homes left are those of runs a dead process left
   * unresolved (their agents were reaped first).
   */
  async sweep(keep: (run: string) => Promise<boolean> = () => Promise.resolve(false)): Promise<number> {
    let removed = 0;
    for (const name of await fsp.readdir(this.root)) {
      if (!isSessionName(name) && !name.startsWith(TEMP_PREFIX)) continue;
      if (isSessionName(name) && (await keep(name))) continue;
      await removeTree(join(this.root, name));
      removed++;
    }
    if (removed > 0) await syncDir(this.root);
    return removed;
  }
}

/**
 * A run's CODEX_HOME/config.toml: the materialized one (verified byte for byte, written from the
 * bundle and the node's model endpoint) or, without a tree, the same generator's; and the
 * workspace as a trusted project when it is one. Codex loads a project's `.codex/config.toml`
 * only for a project its home marks trusted, so an untrusted workspace is left unnamed.
 *
 * Under a tool policy, the pre-tool hook (`[[hooks.PreToolUse]]`), and the hosted web search off
 * (`web_search = "disabled"`): the model provider runs that tool itself, where no hook of the
 * CLI can decide it, and it would be a tool call with no decision.
 */
async function codexConfig(request: RunHomeRequest): Promise<string> {
  let text =
    request.materialization === undefined
      ? codexConfigToml(request.profile.model === undefined ? {} : { model: request.profile.model })
      : await fsp.readFile(join(request.materialization.root, HOME_DIR, CODEX_CONFIG_FILE), "utf8");
  const tables: Record<string, unknown>[] = [];
  if (request.trusted) tables.push({ projects: { [request.workspace]: { trust_level: "trusted" } } });
  if (request.preToolHook !== undefined) {
    // A top-level key: before the first table, where TOML reads it as the document's own.
    text = `${stringify({ web_search: "disabled" })}\n${text}`;
    tables.push({ hooks: codexHookConfig(request.preToolHook) });
  }
  // Codex 0.171 exports its own spans with `[otel] trace_exporter` and continues TRACEPARENT's trace.
  // No headers: a collector's credentials are the node's, never an agent's.
  if (request.trace !== undefined) tables.push({ otel: { environment: "warden", trace_exporter: { "otlp-http": { endpoint: request.trace.tracesEndpoint, protocol: "json" } } } });
  for (const table of tables) text = `${text}${text.endsWith("\n") || text === "" ? "" : "\n"}${stringify(table)}\n`;
  return text;
}

/** A project directory's name as the CLI makes it: one path component, never `.` or `..`. */
function isProjectDir(name: string): boolean {
  return name !== "" && name !== "." && name !== ".." && !name.includes("/") && !name.includes("\0");
}

async function writePrivate(path: string, text: string | Uint8Array): Promise<void> {
  const fh = await fsp.open(path, "wx", 0o600);
  try {
    await fh.writeFile(text);
    await fh.sync();
  } finally {
    await fh.close();
  }
}

async function isDirectory(path: string): Promise<boolean> {
  try {
    return (await fsp.lstat(path)).isDirectory();
  } catch {
    return false;
  }
}
