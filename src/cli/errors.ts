/**
 * One line per failure, never a stack trace, always ending in a stable code (DESIGN.md "CLI";
 * README: `warden: <message> (<code>)`), so a script can branch on the code whatever failed.
 */
import { CommanderError } from "commander";
import { errnoCode, isWardenError } from "../core/errors.js";

/** Codes for the file-system failures a user can cause by naming a path. */
const ERRNO_CODES: Readonly<Record<string, string>> = {
  ENOENT: "file-not-found",
  EACCES: "permission-denied",
  EPERM: "permission-denied",
  ENOTDIR: "not-a-directory",
  EISDIR: "is-a-directory",
  EADDRINUSE: "address-in-use",
};

/** The stable code of any failure: warden's own, commander's usage errors, errno, else `cli-error`. */
export function errorCode(error: unknown): string {
  if (isWardenError(error)) return error.code;
  // commander's codes read `commander.unknownOption`: the same words, kebab-case like warden's.
  if (error instanceof CommanderError) return error.code.replace(/^commander\./, "").replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`);
  if (error instanceof Error) {
    const errno = errnoCode(error);
    if (errno !== undefined && /^E[A-Z0-9]+$/.test(errno)) return ERRNO_CODES[errno] ?? errno.toLowerCase();
  }
  return "cli-error";
}

/** The message alone, on one line. */
export function errorMessage(error: unknown): string {
  if (isWardenError(error)) return error.message;
  // commander's second line, when there is one, is a suggestion ("(Did you mean --json?)"): keep it, on the same line.
  if (error instanceof CommanderError) return error.message.replace(/^error: /, "").trim().replace(/\s*\n\s*/g, " ");
  if (error instanceof Error) {
    const errno = errnoCode(error);
    const path = (error as { path?: unknown }).path;
    if (errno === "ENOENT" && typeof path === "string") return `${path}: no such file`;
    if (errno === "EACCES" && typeof path === "string") return `${path}: permission denied`;
    return error.message.split("\n", 1)[0] ?? String(error);
  }
  return String(error);
}

export function describeError(error: unknown): string {
  return `${errorMessage(error)} (${errorCode(error)})`;
}

/**
 * A failure that names several problems (a review's: the node checks every rule at once) prints
 * one more line per problem under its first line, `  - <detail> (<code>)`, so an operator fixes
 * them all in one go. Nothing when there are fewer than two: the first line already says it.
 */
export function problemLines(error: unknown): string[] {
  const listed: unknown = isWardenError(error) ? (error.details.problems ?? (error as { problem?: { problems?: unknown } }).problem?.problems) : undefined;
  if (!Array.isArray(listed) || listed.length < 2) return [];
  return listed.map((item: unknown) => {
    const { detail, code } = (typeof item === "object" && item !== null ? item : {}) as { detail?: unknown; code?: unknown };
    return `  - ${typeof detail === "string" ? detail : JSON.stringify(item)}${typeof code === "string" ? ` (${code})` : ""}`;
  });
}
