/**
 * The bundle contract (DESIGN.md "Bundle contract"), in two halves:
 * - checkContractAtBegin: everything decidable from a validated manifest alone, run before any
 *   byte is uploaded (executable extensions, kinds at their paths, skill layout);
 * - checkContractContent: everything that needs the verified bytes, run at commit (magic bytes,
 *   SKILL.md frontmatter, plugin.json, .mcp.json).
 * Both assume a manifest that parseManifest accepted; content checks assume begin checks passed.
 *
 * Kinds and paths pin each other: `plugin-manifest` ⇔ `.claude-plugin/plugin.json` or
 * `plugin.json`; `mcp-declaration` ⇔ `.mcp.json`; `skill` ⇒ under `skills/<name>/`, and
 * `skills/<name>/SKILL.md` ⇒ `skill`. Other files under `skills/<name>/` (references, assets)
 * may carry any other kind, but their directory must still be a valid skill with a SKILL.md.
 */
import type { Component, ComponentKind, Manifest } from "../manifest-types.js";
import { CONTENT_STATUS, contractError, type ContractWhere } from "./common.js";
import { MAGIC_BYTES, executableFormatOf, extensionOf, hasExecutableExtension } from "./executable.js";
import { MCP_DECLARATION_PATH, checkMcpDeclaration } from "./mcp.js";
import { checkPluginManifest, isPluginManifestPath } from "./plugin-manifest.js";
import { checkSkillFile, isSkillFile, isValidSkillName, skillFileOf, skillNameOf } from "./skills.js";

export { EXECUTABLE_EXTENSIONS, executableFormatOf, hasExecutableExtension } from "./executable.js";
export { isValidSkillName, skillNameOf } from "./skills.js";

/** The kind a path must have, for paths the contract pins to one kind; else undefined. */
export function pinnedKindOf(relativePath: string): ComponentKind | undefined {
  if (isPluginManifestPath(relativePath)) return "plugin-manifest";
  if (relativePath === MCP_DECLARATION_PATH) return "mcp-declaration";
  if (isSkillFile(relativePath)) return "skill";
  return undefined;
}

/** The kind a compiler gives a path when the operator names none (DESIGN: kinds inferred). */
export function inferKind(relativePath: string): ComponentKind {
  return pinnedKindOf(relativePath) ?? (skillNameOf(relativePath) !== undefined ? "skill" : "file");
}

function kindFitsPath(kind: ComponentKind, relativePath: string): boolean {
  const pinned = pinnedKindOf(relativePath);
  if (pinned !== undefined) return kind === pinned;
  switch (kind) {
    case "plugin-manifest":
    case "mcp-declaration":
      return false; // their only allowed paths are pinned above
    case "skill":
      return skillNameOf(relativePath) !== undefined;
    default:
      return true;
  }
}

export function checkContractAtBegin(manifest: Manifest): void {
  const skillDirs = new Map<string, number>(); // skill name → first component under it
  const paths = new Set<string>();
  manifest.components.forEach((c, i) => {
    const where: ContractWhere = { component: i, path: c.relative_path };
    paths.add(c.relative_path);
    if (hasExecutableExtension(c.relative_path)) {
      const rule = `executable file type .${extensionOf(c.relative_path)} is not allowed`;
      contractError("contract-executable-extension", rule, where);
    }
    if (!kindFitsPath(c.kind, c.relative_path)) {
      const extra = { kind: c.kind, expected: pinnedKindOf(c.relative_path) ?? null };
      const rule = `kind ${c.kind} is not allowed at this path`;
      contractError("contract-kind-path-mismatch", rule, { ...where, field: "kind" }, 400, extra);
    }
    const name = skillNameOf(c.relative_path);
    if (name !== undefined) {
      if (!isValidSkillName(name)) {
        const rule = "skill directory name must be ≤ 64 of a-z 0-9 '-', no leading, trailing or doubled '-'";
        contractError("contract-skill-name", rule, where);
      }
      if (!skillDirs.has(name)) skillDirs.set(name, i);
    }
  });
  for (const [name, first] of skillDirs) {
    if (!paths.has(skillFileOf(name))) {
      contractError("contract-skill-missing-skill-md", `skill directory skills/${name}/ has no ${skillFileOf(name)}`, {
        component: first,
        path: manifest.components[first]!.relative_path,
      });
    }
  }
}

/** The rule that reads a component's whole content, for the paths that have one. */
function wholeContentRule(path: string): ((bytes: Uint8Array, where: ContractWhere) => void) | undefined {
  if (isPluginManifestPath(path)) return checkPluginManifest;
  if (path === MCP_DECLARATION_PATH) return checkMcpDeclaration;
  if (isSkillFile(path)) return (bytes, where) => checkSkillFile(bytes, skillNameOf(path)!, where);
  return undefined;
}

/**
 * How many leading bytes of a component `checkContractContent` reads: all of a plugin manifest,
 * the MCP declaration or a skill file, and of any other file only its magic bytes. A caller that
 * holds a file in pieces (the inline commit check) hands over that much instead of joining them.
 */
export function contentBytesRead(component: Component): number {
  const { relative_path, blob } = component;
  return wholeContentRule(relative_path) !== undefined ? blob.byte_len : Math.min(MAGIC_BYTES, blob.byte_len);
}

/**
 * Content rules on verified bytes. `read` returns a component's bytes (the caller has verified
 * digest and length), or at least their first `contentBytesRead` bytes. Each component is read
 * once, in manifest order.
 */
export async function checkContractContent(
  manifest: Manifest,
  read: (component: Component) => Promise<Uint8Array>,
): Promise<void> {
  for (const [i, c] of manifest.components.entries()) {
    const where: ContractWhere = { component: i, path: c.relative_path };
    const bytes = await read(c);
    const format = executableFormatOf(bytes);
    if (format !== undefined) {
      const rule = `content is executable (${format})`;
      contractError("contract-executable-content", rule, where, CONTENT_STATUS, { format });
    }
    wholeContentRule(c.relative_path)?.(bytes, where);
  }
}
