/**
 * Plugin manifests (DESIGN.md "Bundle contract"): `.claude-plugin/plugin.json` (Claude Code)
 * and/or `plugin.json` at the root; a JSON object whose `name` is kebab-case. Other keys are
 * the plugin format's business (`$schema`, `version`, `description`, ...) and pass unchecked.
 */
import { CONTENT_STATUS, KEBAB_CASE_RE, contractError, parseJsonFile, type ContractWhere } from "./common.js";
import { isPlainObject } from "../plain-object.js";

export const PLUGIN_MANIFEST_PATHS: ReadonlySet<string> = new Set([".claude-plugin/plugin.json", "plugin.json"]);

export function isPluginManifestPath(relativePath: string): boolean {
  return PLUGIN_MANIFEST_PATHS.has(relativePath);
}

export function checkPluginManifest(bytes: Uint8Array, where: ContractWhere): void {
  const value = parseJsonFile(bytes, where);
  if (!isPlainObject(value)) contractError("contract-plugin-manifest", "must be a JSON object", where, CONTENT_STATUS);
  const name = value.name;
  if (typeof name !== "string" || !KEBAB_CASE_RE.test(name)) {
    contractError("contract-plugin-manifest-name", "name is required and must be kebab-case (a-z, 0-9, single '-')", {
      ...where,
      field: "name",
    }, CONTENT_STATUS);
  }
}
