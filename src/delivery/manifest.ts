/**
 * Validation of untrusted bundle manifests (DESIGN.md "Bundle manifest"). Every rule has its own
 * error code, and the details say where: `component` (index), `path` and `field`, so a client can
 * point at the exact line of its input. The input is JSON already parsed; nothing of it is kept:
 * the result is a fresh, frozen object holding only the known fields.
 */
import { ValidationError, LimitError, WardenError, type ErrorDetails } from "../core/errors.js";
import { EMPTY_SHA256, isDigest, type Digest } from "../core/digest.js";
import { DEFAULT_LIMITS, type Limits } from "../core/limits.js";
import {
  COMPONENT_KINDS,
  COMPONENT_SCOPES,
  compareUtf8,
  manifestDigestOf,
  type BlobRef,
  type Component,
  type ComponentKind,
  type ComponentScope,
  type Manifest,
} from "./manifest-types.js";
import { pathFoldKey, shownPath, validateRelativePath } from "./paths.js";
import { isPlainObject } from "./plain-object.js";

export const MAX_IDENTIFIER_BYTES = 128;

const MANIFEST_FIELDS = ["bundle_id", "revision", "bundle_digest", "manifest_digest", "components"] as const;
const COMPONENT_FIELDS = ["kind", "scope", "relative_path", "blob"] as const;
const BLOB_FIELDS = ["digest", "byte_len"] as const;

interface Where {
  readonly component?: number;
  readonly path?: string;
  readonly field?: string;
}

function details(where: Where, extra: ErrorDetails = {}): ErrorDetails {
  return { ...where, ...extra };
}

function at(where: Where): string {
  const parts: string[] = [];
  if (where.component !== undefined) parts.push(`component ${where.component}`);
  if (where.path !== undefined) parts.push(JSON.stringify(where.path));
  if (where.field !== undefined) parts.push(where.field);
  return parts.length === 0 ? "manifest" : parts.join(" ");
}

function invalid(code: string, rule: string, where: Where, extra?: ErrorDetails, status?: number): never {
  throw new ValidationError(code, `${at(where)}: ${rule}`, { details: details(where, extra), status });
}

function tooLarge(code: string, rule: string, where: Where, extra?: ErrorDetails): never {
  throw new LimitError(code, `${at(where)}: ${rule}`, { details: details(where, extra) });
}

/** Refuses unknown and missing fields of one object; `prefix` names the object in `field`. */
function checkFields(
  value: Record<string, unknown>,
  known: readonly string[],
  where: Where,
  prefix: string,
): void {
  for (const key of Object.keys(value)) {
    if (!known.includes(key)) {
      const shown = shownPath(key);
      invalid("manifest-unknown-field", `unknown field ${JSON.stringify(shown)}`, { ...where, field: prefix + shown });
    }
  }
  for (const key of known) {
    if (!Object.hasOwn(value, key)) {
      invalid("manifest-missing-field", "required field is missing", { ...where, field: prefix + key });
    }
  }
}

function requireString(value: unknown, where: Where): string {
  if (typeof value !== "string") invalid("manifest-field-type", "must be a string", where, { expected: "string" });
  return value;
}

/**
 * `bundle_id` and `revision`: 1–128 bytes of printable ASCII without '/' or '\'. Printable here
 * means graphic (0x21–0x7E), as gate4agent has it: a space would make ids that differ only by a
 * trailing blank, invisible in a terminal.
 */
export function validateBundleIdentifier(value: string, field: "bundle_id" | "revision"): void {
  const where: Where = { field };
  if (value.length === 0 || value.length > MAX_IDENTIFIER_BYTES) {
    invalid("manifest-identifier-length", `must be 1–${MAX_IDENTIFIER_BYTES} bytes`, where);
  }
  for (let i = 0; i < value.length; i++) {
    const c = value.charCodeAt(i);
    if (c < 0x21 || c > 0x7e) invalid("manifest-identifier-character", "must be printable ASCII without spaces", where);
    if (c === 0x2f || c === 0x5c) invalid("manifest-identifier-separator", "must not contain '/' or '\\'", where);
  }
}

function parseDigestField(value: unknown, where: Where): Digest {
  const text = requireString(value, where);
  if (!isDigest(text)) {
    invalid("manifest-digest-invalid", 'must be "sha256:" followed by 64 lowercase hex digits', where);
  }
  return text;
}

function parseKind(value: unknown, where: Where): ComponentKind {
  const text = requireString(value, where);
  const kind = COMPONENT_KINDS.find((k) => k === text);
  if (kind === undefined) invalid("manifest-kind-unknown", `unknown kind ${JSON.stringify(text)}`, where);
  return kind;
}

function parseScope(value: unknown, where: Where): ComponentScope {
  const text = requireString(value, where);
  const scope = COMPONENT_SCOPES.find((s) => s === text);
  if (scope === undefined) invalid("manifest-scope-unknown", `unknown scope ${JSON.stringify(text)}`, where);
  return scope;
}

function parsePath(value: unknown, where: Where): string {
  const path = requireString(value, where);
  try {
    validateRelativePath(path);
  } catch (error) {
    // Re-throw with the component index so the client knows which entry broke the rule.
    if (error instanceof WardenError) {
      throw new ValidationError(error.code, `component ${where.component ?? "?"}: ${error.message}`, {
        details: { ...error.details, ...where, path: shownPath(path) },
      });
    }
    throw error;
  }
  return path;
}

function parseBlob(value: unknown, where: { readonly component: number; readonly path: string }, limits: Limits): BlobRef {
  if (!isPlainObject(value)) invalid("manifest-field-type", "must be an object", where, { expected: "object" });
  checkFields(value, BLOB_FIELDS, where, "blob.");
  // Each field's place is written out, not spread from `where`: a spread per field was the larger
  // part of parsing a component (a begin parses every component of its manifest).
  const digest = parseDigestField(value.digest, { component: where.component, path: where.path, field: "blob.digest" });
  const raw = value.byte_len;
  const lenWhere = { component: where.component, path: where.path, field: "blob.byte_len" };
  if (typeof raw !== "number") invalid("manifest-field-type", "must be a number", lenWhere, { expected: "number" });
  if (!Number.isSafeInteger(raw) || raw < 0) {
    invalid("manifest-byte-len-invalid", "must be a non-negative safe integer", lenWhere);
  }
  const byteLen = raw === 0 ? 0 : raw; // folds -0, which JSON.parse can produce
  if (byteLen > limits.fileBytes) {
    tooLarge("manifest-file-too-large", `is ${byteLen} bytes, over the limit of ${limits.fileBytes}`, lenWhere, {
      byte_len: byteLen,
      limit: limits.fileBytes,
    });
  }
  if (byteLen === 0 && digest !== EMPTY_SHA256) {
    // No bytes can ever match: refuse now instead of staging a blob that cannot complete.
    const digestWhere = { ...where, field: "blob.digest" };
    invalid("manifest-empty-blob-digest", "an empty blob must have the digest of zero bytes", digestWhere);
  }
  return Object.freeze({ digest, byte_len: byteLen });
}

function parseComponent(value: unknown, index: number, limits: Limits): Component {
  const where: Where = { component: index };
  if (!isPlainObject(value)) invalid("manifest-field-type", "must be an object", where, { expected: "object" });
  checkFields(value, COMPONENT_FIELDS, where, "");
  const relative_path = parsePath(value.relative_path, { component: index, field: "relative_path" });
  const kind = parseKind(value.kind, { component: index, path: relative_path, field: "kind" });
  const scope = parseScope(value.scope, { component: index, path: relative_path, field: "scope" });
  const blob = parseBlob(value.blob, { component: index, path: relative_path }, limits);
  return Object.freeze({ kind, scope, relative_path, blob });
}

/** Rules between components: order, duplicates, collisions, file/dir clashes, blob lengths, total. */
function checkComponentSet(components: readonly Component[], limits: Limits): void {
  const folded = new Map<string, number>();
  const blobLengths = new Map<string, number>();
  let total = 0;
  components.forEach((c, i) => {
    const where: Where = { component: i, path: c.relative_path, field: "relative_path" };
    if (i > 0) {
      const previous = components[i - 1]!.relative_path;
      const order = compareUtf8(previous, c.relative_path);
      if (order === 0) invalid("manifest-path-duplicate", "path appears twice", where);
      if (order > 0) {
        const rule = "components must be strictly ascending by the UTF-8 bytes of relative_path";
        invalid("manifest-components-unsorted", rule, where, { previous });
      }
    }
    const key = pathFoldKey(c.relative_path);
    const other = folded.get(key);
    if (other !== undefined) {
      const clash = { other_component: other, other_path: components[other]!.relative_path };
      invalid("manifest-path-case-collision", "equals another path after Unicode lower-casing", where, clash);
    }
    folded.set(key, i);
    const known = blobLengths.get(c.blob.digest);
    if (known !== undefined && known !== c.blob.byte_len) {
      const rule = `digest already declared with byte_len ${known}`;
      invalid("manifest-blob-length-conflict", rule, { ...where, field: "blob.byte_len" }, { digest: c.blob.digest });
    }
    blobLengths.set(c.blob.digest, c.blob.byte_len);
    total += c.blob.byte_len;
    if (total > limits.bundleBytes) {
      const rule = `bundle exceeds ${limits.bundleBytes} bytes`;
      const at = { component: i, path: c.relative_path };
      tooLarge("manifest-bundle-too-large", rule, at, { limit: limits.bundleBytes });
    }
  });
  checkFileDirectoryClashes(components, folded);
}

/**
 * A path that is also a directory prefix of another path ("a" and "a/b") can never be
 * materialized: one name cannot be a file and a directory. Compared by fold key, because on a
 * case-insensitive disk "A" and "a/b" clash the same way.
 */
function checkFileDirectoryClashes(components: readonly Component[], folded: ReadonlyMap<string, number>): void {
  components.forEach((c, i) => {
    const key = pathFoldKey(c.relative_path);
    for (let slash = key.indexOf("/"); slash !== -1; slash = key.indexOf("/", slash + 1)) {
      const file = folded.get(key.slice(0, slash));
      if (file !== undefined) {
        const where = { component: i, path: c.relative_path, field: "relative_path" };
        const clash = { other_component: file, other_path: components[file]!.relative_path };
        const rule = "a parent directory of this path is also a file component";
        invalid("manifest-path-file-dir-conflict", rule, where, clash);
      }
    }
  });
}

type ManifestBody = Omit<Manifest, "manifest_digest">;

/** Everything but the manifest digest: shared by parsing (untrusted) and creation (trusted parts). */
function parseBody(input: Record<string, unknown>, limits: Limits): ManifestBody {
  const bundle_id = requireString(input.bundle_id, { field: "bundle_id" });
  validateBundleIdentifier(bundle_id, "bundle_id");
  const revision = requireString(input.revision, { field: "revision" });
  validateBundleIdentifier(revision, "revision");
  const bundle_digest = parseDigestField(input.bundle_digest, { field: "bundle_digest" });
  const raw = input.components;
  const where: Where = { field: "components" };
  if (!Array.isArray(raw)) invalid("manifest-field-type", "must be an array", where, { expected: "array" });
  if (raw.length === 0) invalid("manifest-components-empty", "a bundle needs at least one component", where);
  if (raw.length > limits.bundleComponents) {
    const rule = `${raw.length} components, over the limit of ${limits.bundleComponents}`;
    tooLarge("manifest-too-many-components", rule, where, { count: raw.length, limit: limits.bundleComponents });
  }
  const components = Object.freeze(raw.map((c: unknown, i) => parseComponent(c, i, limits)));
  checkComponentSet(components, limits);
  return { bundle_id, revision, bundle_digest, components };
}

/**
 * Full validation of an untrusted manifest (DESIGN.md "Bundle manifest"): every field, every
 * path rule, order, collisions, limits, and the recomputed `manifest_digest`. `bundle_digest` is
 * only format-checked here: it needs the bytes, and is verified at commit.
 */
export function parseManifest(input: unknown, limits: Limits = DEFAULT_LIMITS): Manifest {
  if (!isPlainObject(input)) invalid("manifest-not-object", "manifest must be a JSON object", {});
  checkFields(input, MANIFEST_FIELDS, {}, "");
  const body = parseBody(input, limits);
  const manifest_digest = parseDigestField(input.manifest_digest, { field: "manifest_digest" });
  const expected = manifestDigestOf(body);
  if (expected !== manifest_digest) {
    const rule = "manifest_digest does not match the manifest's content";
    invalid("manifest-digest-mismatch", rule, { field: "manifest_digest" }, { expected }, 422);
  }
  return Object.freeze({ ...body, manifest_digest });
}

/**
 * Builds a manifest from its parts (e.g. a compiled directory): validates them by the same rules
 * as parseManifest, then computes `manifest_digest`.
 */
export function createManifest(fields: ManifestBody, limits: Limits = DEFAULT_LIMITS): Manifest {
  const { bundle_id, revision, bundle_digest, components } = fields;
  const body = parseBody({ bundle_id, revision, bundle_digest, components }, limits);
  return Object.freeze({ ...body, manifest_digest: manifestDigestOf(body) });
}
