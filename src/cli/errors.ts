/** One line per failure, never a stack trace (DESIGN.md "CLI"). */
import { errnoCode, isWardenError } from "../core/errors.js";

export function describeError(error: unknown): string {
  if (isWardenError(error)) return `${error.message} (${error.code})`;
  if (error instanceof Error) {
    const errno = errnoCode(error);
    const path = (error as { path?: unknown }).path;
    if (errno === "ENOENT" && typeof path === "string") return `${path}: no such file`;
    if (errno === "EACCES" && typeof path === "string") return `${path}: permission denied`;
    return error.message.split("\n", 1)[0] ?? String(error);
  }
  return String(error);
}
