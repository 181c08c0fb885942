/**
 * Relative paths of bundle components (DESIGN.md "Bundle manifest"): the rules that keep a path
 * inside the materialization root on every platform a bundle may land on, and the case-fold key
 * that decides when two paths would name the same file on a case-insensitive filesystem.
 */
import * as nodePath from "node:path";
import { ValidationError } from "../core/errors.js";

export const MAX_RELATIVE_PATH_BYTES = 512;
/**
 * Longest segment, in UTF-8 bytes: the longest file name Linux filesystems (and APFS, NTFS in
 * UTF-16 units) take. A longer one passed the path's own bound and then failed at
 * materialization with ENAMETOOLONG, leaving every run of the bundle unresolved.
 */
export const MAX_SEGMENT_BYTES = 255;

const LONE_SURROGATE_RE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;
// Cc covers U+0000–U+001F and U+007F–U+009F: none of them is printable in a file name.
const CONTROL_RE = /\p{Cc}/u;
const RESERVED_CHAR_RE = /[<>:"|?*]/;

// A superset of DESIGN's CON, PRN, AUX, NUL, COM1–9, LPT1–9: Windows also maps COM0/LPT0, the
// superscript-digit variants and the console names to devices, and refusing more is harmless.
const DEVICE_NAMES = new Set([
  "CON", "PRN", "AUX", "NUL", "CONIN$", "CONOUT$",
  ..."0123456789\u00B9\u00B2\u00B3".split("").flatMap((d) => [`COM${d}`, `LPT${d}`]),
]);

/** Bounds how much of a hostile path is echoed back in errors. */
export function shownPath(path: string): string {
  return path.length > MAX_RELATIVE_PATH_BYTES ? `${path.slice(0, MAX_RELATIVE_PATH_BYTES)}…` : path;
}

function refuse(code: string, rule: string, path: string, segment?: string): never {
  const shown = shownPath(path);
  const where = segment === undefined ? {} : { segment: shownPath(segment) };
  const details = { path: shown, field: "relative_path", ...where };
  throw new ValidationError(code, `relative_path ${JSON.stringify(shown)}: ${rule}`, { details });
}

/** True if `value` is well-formed UTF-16, i.e. has a UTF-8 encoding (no lone surrogate). */
export function isWellFormedUnicode(value: string): boolean {
  return !LONE_SURROGATE_RE.test(value);
}

/** Number of bytes of `value` in UTF-8. */
export function utf8Length(value: string): number {
  return Buffer.byteLength(value, "utf8");
}

/**
 * Throws a ValidationError whose code names the broken rule, or returns if `path` is a valid
 * component path. Checks run from the whole path down to single segments so that each bad path
 * reports the most specific rule it breaks.
 */
export function validateRelativePath(path: string): void {
  if (typeof path !== "string") {
    throw new ValidationError("manifest-field-type", "relative_path must be a string", {
      details: { field: "relative_path", expected: "string" },
    });
  }
  if (!isWellFormedUnicode(path)) {
    refuse("manifest-path-encoding", "contains a lone surrogate (not encodable as UTF-8)", path);
  }
  const bytes = utf8Length(path);
  if (bytes === 0 || bytes > MAX_RELATIVE_PATH_BYTES) {
    refuse("manifest-path-length", `is ${bytes} UTF-8 bytes (want 1–${MAX_RELATIVE_PATH_BYTES})`, path);
  }
  if (path.includes("\\")) refuse("manifest-path-backslash", "contains a backslash", path);
  if (CONTROL_RE.test(path)) refuse("manifest-path-control-char", "contains a control character", path);
  if (path.startsWith("/")) refuse("manifest-path-absolute", "starts with '/'", path);
  if (path.endsWith("/")) refuse("manifest-path-trailing-slash", "ends with '/'", path);
  for (const segment of path.split("/")) {
    if (segment === "") refuse("manifest-path-empty-segment", "has an empty segment", path, segment);
    if (segment === ".") refuse("manifest-path-dot-segment", "has a '.' segment", path, segment);
    if (segment === "..") refuse("manifest-path-traversal", "has a '..' segment", path, segment);
    const segmentBytes = utf8Length(segment);
    if (segmentBytes > MAX_SEGMENT_BYTES) {
      refuse("manifest-path-segment-too-long", `has a segment of ${segmentBytes} UTF-8 bytes (a file name holds at most ${MAX_SEGMENT_BYTES})`, path, segment);
    }
    if (RESERVED_CHAR_RE.test(segment)) {
      refuse("manifest-path-reserved-char", 'has a segment containing one of <>:"|?*', path, segment);
    }
    if (segment.endsWith(".") || segment.endsWith(" ")) {
      refuse("manifest-path-trailing-dot-or-space", "has a segment ending in '.' or space", path, segment);
    }
    if (isDeviceName(segment)) refuse("manifest-path-device-name", "has a Windows device name segment", path, segment);
  }
}

/** True if Windows would open a device for this file name (the stem before the first '.'). */
export function isDeviceName(segment: string): boolean {
  const dot = segment.indexOf(".");
  // Windows ignores spaces before the extension: "CON .txt" is the console too.
  const stem = (dot === -1 ? segment : segment.slice(0, dot)).replace(/ +$/, "");
  return DEVICE_NAMES.has(stem.toUpperCase());
}

/**
 * The key under which two paths collide on a case-insensitive or normalization-insensitive
 * filesystem. DESIGN asks for "equal after Unicode lower-casing"; we also fold to NFC before and
 * after lower-casing, because macOS (APFS, HFS+) treats "é" and "e\u0301" as one name and
 * lower-casing can denormalize (U+0130 → "i\u0307"). Full case folding (ß → ss) is not applied:
 * no common filesystem equates those, and gate4agent lower-cases only.
 */
export function pathFoldKey(path: string): string {
  return path.normalize("NFC").toLowerCase().normalize("NFC");
}

/**
 * Joins a validated relative path under `root`. Validation alone keeps the result inside the
 * root; the containment check after resolving is a second, independent guard.
 */
export function safeJoin(root: string, relativePath: string): string {
  validateRelativePath(relativePath);
  const base = nodePath.resolve(root);
  const joined = nodePath.resolve(base, ...relativePath.split("/"));
  const prefix = base.endsWith(nodePath.sep) ? base : base + nodePath.sep;
  if (!joined.startsWith(prefix)) {
    throw new ValidationError("manifest-path-escape", `relative_path ${JSON.stringify(relativePath)} leaves the root`, {
      details: { path: relativePath, field: "relative_path" },
    });
  }
  return joined;
}
