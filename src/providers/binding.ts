/**
 * Binding rules: which components each provider can consume and where each one lands in the
 * materialized tree (DESIGN.md "Providers"). Decided from the manifest alone, before any byte is
 * read or written, so a bundle a provider cannot use is refused without side effects.
 *
 * - every provider: only `session`-scoped components (materialization is per session; warden
 *   writes nothing into workspaces);
 * - claude: the whole bundle is the plugin root under `bundle/`; skills, plugin manifests, the
 *   MCP declaration, `commands/` and `agents/` are Claude plugin components, and plain `file`s
 *   (README, LICENSE, skill assets) ride along as plugins commonly ship them; requires
 *   `.claude-plugin/plugin.json`;
 * - codex: `skills/**` under `home/skills/`; `home/config.toml` is always generated (the node's
 *   model provider and settings) and carries `.mcp.json`'s servers; plugin manifests are Claude
 *   metadata Codex never reads and are left out, and so are plain `file`s at the bundle's root
 *   (README, LICENSE: documentation); a plain file anywhere else is refused, since Codex would
 *   never see what the bundle may expect it to read;
 * - kimi: the whole bundle under `bundle/` (plain `file`s included), skills read through `--skills-dir`; Kimi's
 *   `--skills-dir` has no MCP contract, so `.mcp.json` is refused rather than staged inert.
 */
import { ValidationError } from "../core/errors.js";
import type { Component, ComponentKind, Manifest } from "../delivery/manifest-types.js";
import { MCP_DECLARATION_PATH } from "../delivery/contract/mcp.js";
import { SKILLS_DIR } from "../delivery/contract/skills.js";
import { CODEX_CONFIG_FILE } from "./codex-config.js";
import type { ProviderName } from "./types.js";

export const CLAUDE_PLUGIN_MANIFEST = ".claude-plugin/plugin.json";
export const BUNDLE_DIR = "bundle";
export const HOME_DIR = "home";

/** One file of the planned tree; `target` is relative to the session directory. */
export type PlannedFile =
  | { readonly target: string; readonly component: number; readonly from: "blob" }
  /** generated: every codex tree has one (model provider, settings), with the `.mcp.json` component's servers if any */
  | { readonly target: string; readonly component?: number; readonly from: "codex-config" };

export interface TreePlan {
  readonly provider: ProviderName;
  /** directories to create even when no file lands in them */
  readonly extraDirs: readonly string[];
  readonly files: readonly PlannedFile[];
}

type Placement = (c: Component, index: number) => PlannedFile | undefined;

const inBundle: Placement = (c, component) => ({ target: `${BUNDLE_DIR}/${c.relative_path}`, component, from: "blob" });
const omitted: Placement = () => undefined;

/** Codex reads only CODEX_HOME: a plain file at the bundle's root is documentation it leaves out. */
const rootDocumentation: Placement = (c, index) => {
  if (c.relative_path.includes("/")) {
    refuseComponent("provider-component-path-unsupported", c, index, "codex reads skills/ and .mcp.json only; a plain file is left out at the bundle's root (documentation) and refused elsewhere", "codex");
  }
  return undefined;
};

function underDir(dir: string): Placement {
  return (c, index) => {
    if (!c.relative_path.startsWith(`${dir}/`)) {
      refuseComponent("provider-component-path-unsupported", c, index, `a ${c.kind} must live under ${dir}/`);
    }
    return inBundle(c, index);
  };
}

const PLACEMENTS: Readonly<Record<ProviderName, Partial<Record<ComponentKind, Placement>>>> = {
  claude: {
    skill: inBundle,
    "plugin-manifest": inBundle,
    "mcp-declaration": inBundle,
    command: underDir("commands"),
    "agent-definition": underDir("agents"),
    file: inBundle,
  },
  codex: {
    skill: (c, component) => ({ target: `${HOME_DIR}/${c.relative_path}`, component, from: "blob" }),
    "plugin-manifest": omitted,
    file: rootDocumentation,
    "mcp-declaration": (_c, component) => ({ target: `${HOME_DIR}/${CODEX_CONFIG_FILE}`, component, from: "codex-config" }),
  },
  kimi: {
    skill: inBundle,
    "plugin-manifest": inBundle,
    file: inBundle,
  },
};

/** Provider-specific refusals that deserve their own code (DESIGN: every failure its own code). */
const KIND_REFUSALS: Readonly<Partial<Record<ProviderName, Partial<Record<ComponentKind, string>>>>> = {
  kimi: { "mcp-declaration": "kimi-mcp-unsupported" },
};

function refuseComponent(code: string, c: Component, index: number, rule: string, provider?: ProviderName): never {
  throw new ValidationError(code, `component ${index} ${JSON.stringify(c.relative_path)} (${c.kind}, ${c.scope}): ${rule}`, {
    details: { provider, component: index, path: c.relative_path, kind: c.kind, scope: c.scope },
    status: 422,
  });
}

/**
 * Checks every binding rule of `provider` against `manifest` and returns where each file goes.
 * Without a manifest (a run with no bundle) only what warden itself generates is planned.
 */
export function planTree(provider: ProviderName, manifest: Manifest | undefined): TreePlan {
  const placements = PLACEMENTS[provider];
  const files: PlannedFile[] = [];
  (manifest?.components ?? []).forEach((c, index) => {
    if (c.scope !== "session") {
      refuseComponent("provider-component-scope-unsupported", c, index, `${provider} materializes session-scoped components only`, provider);
    }
    const place = placements[c.kind];
    if (place === undefined) {
      const code = KIND_REFUSALS[provider]?.[c.kind] ?? "provider-component-kind-unsupported";
      refuseComponent(code, c, index, `${provider} cannot consume a ${c.kind} component`, provider);
    }
    if (c.kind === "mcp-declaration" && c.relative_path !== MCP_DECLARATION_PATH) {
      refuseComponent("provider-component-path-unsupported", c, index, `an MCP declaration must be ${MCP_DECLARATION_PATH}`, provider);
    }
    if (c.kind === "skill" && !c.relative_path.startsWith(`${SKILLS_DIR}/`)) {
      refuseComponent("provider-component-path-unsupported", c, index, `a skill must live under ${SKILLS_DIR}/`, provider);
    }
    const planned = place(c, index);
    if (planned !== undefined) files.push(planned);
  });
  if (provider === "codex" && !files.some((f) => f.from === "codex-config")) files.push({ target: `${HOME_DIR}/${CODEX_CONFIG_FILE}`, from: "codex-config" });
  if (manifest !== undefined && provider === "claude" && !manifest.components.some((c) => c.relative_path === CLAUDE_PLUGIN_MANIFEST)) {
    throw new ValidationError("claude-plugin-manifest-missing", `a claude bundle needs ${CLAUDE_PLUGIN_MANIFEST} (the plugin root's manifest)`, {
      details: { provider, path: CLAUDE_PLUGIN_MANIFEST },
      status: 422,
    });
  }
  // --skills-dir must name an existing directory even when the bundle has no skill.
  const extraDirs = provider === "kimi" ? [`${BUNDLE_DIR}/${SKILLS_DIR}`] : provider === "codex" ? [HOME_DIR] : [BUNDLE_DIR];
  return { provider, extraDirs, files };
}

/** Every directory the plan's files need, parents first (relative to the session directory). */
export function plannedDirs(plan: TreePlan): string[] {
  const dirs = new Set<string>();
  const add = (path: string): void => {
    const segments = path.split("/");
    for (let i = 1; i <= segments.length; i++) dirs.add(segments.slice(0, i).join("/"));
  };
  plan.extraDirs.forEach(add);
  for (const f of plan.files) {
    const slash = f.target.lastIndexOf("/");
    if (slash > 0) add(f.target.slice(0, slash));
  }
  return [...dirs].sort((a, b) => a.split("/").length - b.split("/").length || (a < b ? -1 : a > b ? 1 : 0));
}
