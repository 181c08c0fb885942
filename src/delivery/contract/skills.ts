/**
 * Skills (DESIGN.md "Bundle contract", Agent Skills specification): where skill files live, what a
 * skill's name may be, and what `skills/<name>/SKILL.md` frontmatter must hold.
 *
 * Frontmatter keys: `name` and `description` are required; the specification's optional keys
 * (`license`, `compatibility`, `metadata`, `allowed-tools`) are type-checked; any other key is
 * allowed unchecked, because agents extend the frontmatter (Claude Code's `argument-hint`,
 * `model`, `disable-model-invocation` ...) and refusing those would refuse real skills.
 */
import { parseDocument } from "yaml";
import { CONTENT_STATUS, KEBAB_CASE_RE, contractError, decodeUtf8, type ContractWhere } from "./common.js";
import { isPlainObject } from "../plain-object.js";

export const SKILLS_DIR = "skills";
export const SKILL_FILE = "SKILL.md";
export const MAX_SKILL_NAME_CHARS = 64;
export const MAX_DESCRIPTION_CHARS = 1024;
export const MAX_COMPATIBILITY_CHARS = 500;
// Frontmatter is tiny; a generous alias bound still stops "billion laughs" expansion.
const MAX_YAML_ALIASES = 64;

/** `<name>` of a path `skills/<name>/…` (at least one segment below the skill directory). */
export function skillNameOf(relativePath: string): string | undefined {
  const segments = relativePath.split("/");
  return segments.length >= 3 && segments[0] === SKILLS_DIR ? segments[1] : undefined;
}

export function skillFileOf(name: string): string {
  return `${SKILLS_DIR}/${name}/${SKILL_FILE}`;
}

export function isSkillFile(relativePath: string): boolean {
  const name = skillNameOf(relativePath);
  return name !== undefined && relativePath === skillFileOf(name);
}

/** ≤ 64 chars of lower-case letters, digits and '-', no leading, trailing or doubled '-'. */
export function isValidSkillName(name: string): boolean {
  return name.length <= MAX_SKILL_NAME_CHARS && KEBAB_CASE_RE.test(name);
}

/** A string of `min`–`max` characters, counted as code points (the specification's characters). */
function isTextOfLength(value: unknown, min: number, max: number): value is string {
  if (typeof value !== "string") return false;
  let n = 0;
  for (const _ of value) n++;
  return n >= min && n <= max;
}

/** The YAML between a first line `---` and the next line `---`, or undefined. */
function frontmatterOf(text: string): string | undefined {
  const lines = text.split(/\r?\n/);
  if (lines[0]?.trimEnd() !== "---") return undefined;
  const end = lines.findIndex((line, i) => i > 0 && line.trimEnd() === "---");
  return end === -1 ? undefined : lines.slice(1, end).join("\n");
}

function parseFrontmatter(bytes: Uint8Array, where: ContractWhere): Record<string, unknown> {
  const yamlText = frontmatterOf(decodeUtf8(bytes, where));
  if (yamlText === undefined) {
    const rule = "has no YAML frontmatter (a first line '---' and a closing '---')";
    contractError("contract-skill-frontmatter", rule, where, CONTENT_STATUS);
  }
  let value: unknown;
  try {
    const doc = parseDocument(yamlText, { uniqueKeys: true, prettyErrors: false });
    if (doc.errors.length > 0) throw doc.errors[0];
    value = doc.toJS({ maxAliasCount: MAX_YAML_ALIASES });
  } catch (error) {
    const reason = error instanceof Error ? error.message.split("\n")[0] : "invalid YAML";
    contractError("contract-skill-frontmatter", `frontmatter is not valid YAML: ${reason}`, where, CONTENT_STATUS);
  }
  if (!isPlainObject(value)) {
    contractError("contract-skill-frontmatter", "frontmatter is not a YAML mapping", where, CONTENT_STATUS);
  }
  return value;
}

function isStringRecord(value: unknown): boolean {
  return isPlainObject(value) && Object.values(value).every((v) => typeof v === "string");
}

function checkOptionalKeys(fm: Record<string, unknown>, where: ContractWhere): void {
  const bad = (field: string, rule: string): never =>
    contractError("contract-skill-frontmatter", rule, { ...where, field }, CONTENT_STATUS);
  if (fm.license !== undefined && typeof fm.license !== "string") bad("license", "license must be a string");
  const compat = fm.compatibility;
  if (compat !== undefined && !isTextOfLength(compat, 1, MAX_COMPATIBILITY_CHARS)) {
    bad("compatibility", `compatibility must be a string of 1–${MAX_COMPATIBILITY_CHARS} characters`);
  }
  if (fm.metadata !== undefined && !isStringRecord(fm.metadata)) {
    bad("metadata", "metadata must map strings to strings");
  }
  const tools = fm["allowed-tools"];
  // The specification says a space-separated string; Claude Code also reads a YAML list.
  const toolsOk = typeof tools === "string" || (Array.isArray(tools) && tools.every((t) => typeof t === "string"));
  if (tools !== undefined && !toolsOk) bad("allowed-tools", "allowed-tools must be a string or a list of strings");
}

/** Checks `skills/<name>/SKILL.md` bytes against the Agent Skills frontmatter rules. */
export function checkSkillFile(bytes: Uint8Array, name: string, where: ContractWhere): void {
  const fm = parseFrontmatter(bytes, where);
  if (fm.name !== name) {
    const rule = `frontmatter name must be ${JSON.stringify(name)}, the skill's directory`;
    contractError("contract-skill-name-mismatch", rule, { ...where, field: "name" }, CONTENT_STATUS);
  }
  const description = fm.description;
  if (!isTextOfLength(description, 1, MAX_DESCRIPTION_CHARS) || description.trim().length === 0) {
    const rule = `description must be a non-empty string of at most ${MAX_DESCRIPTION_CHARS} characters`;
    contractError("contract-skill-description", rule, { ...where, field: "description" }, CONTENT_STATUS);
  }
  checkOptionalKeys(fm, where);
}
