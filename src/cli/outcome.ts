/**
 * How a command ends (DESIGN.md "CLI"): exit 0 on success, 1 on failure, 2 when the answer is an
 * invocation still in progress or unresolved; every failure is one line on stderr (and, with
 * `--json`, the problem as JSON on stdout so scripts can branch on its `code`).
 */
import { isWardenError } from "../core/errors.js";
import { WardenHttpError } from "../client/errors.js";
import type { CliContext } from "./context.js";
import { describeError, errorCode, errorMessage, problemLines } from "./errors.js";

export const EXIT_OK = 0;
export const EXIT_FAILED = 1;
export const EXIT_PENDING = 2;

/** Invocation states that are not an end: the caller should come back, or an operator must act. */
const PENDING_STATUSES = new Set(["running", "in_progress", "awaiting_approval", "unresolved"]);
const PENDING_CODES = new Set(["in-progress", "awaiting-approval", "unresolved"]);

export function exitCodeOfStatus(status: string): number {
  return PENDING_STATUSES.has(status) ? EXIT_PENDING : EXIT_OK;
}

export function exitCodeOfError(error: unknown): number {
  if (!(error instanceof WardenHttpError)) return EXIT_FAILED;
  if (PENDING_CODES.has(error.code)) return EXIT_PENDING;
  // A reconcile of a run still in progress: the answer is "not yet", like any pending one.
  if (error.code === "invocation-not-unresolved" && PENDING_STATUSES.has(String(error.problem.invocation_status))) return EXIT_PENDING;
  return EXIT_FAILED;
}

export interface OutputFlags {
  readonly json?: boolean;
}

export function printJson(ctx: CliContext, value: unknown): void {
  ctx.io.stdout(JSON.stringify(value, null, 2) + "\n");
}

function errorJson(error: unknown): Record<string, unknown> {
  if (error instanceof WardenHttpError) return { ...error.problem, code: error.code, status: error.status };
  if (isWardenError(error)) return { code: error.code, status: error.status, detail: error.message, ...error.details };
  return { code: errorCode(error), detail: errorMessage(error) };
}

/** Prints a failure: one line on stderr (and one per problem, when it lists several), and with `--json` the problem as JSON on stdout. */
export function reportFailure(ctx: CliContext, json: boolean, error: unknown): void {
  if (json) printJson(ctx, { error: errorJson(error) });
  ctx.io.stderr(`warden: ${describeError(error)}\n${problemLines(error).map((line) => `${line}\n`).join("")}`);
}

/** Runs a command body, mapping its result or its failure to the exit code and output. */
export async function runCommand(ctx: CliContext, flags: OutputFlags, body: () => Promise<number>): Promise<void> {
  try {
    ctx.exitCode = await body();
  } catch (error) {
    reportFailure(ctx, flags.json === true, error);
    ctx.exitCode = exitCodeOfError(error);
  }
}
