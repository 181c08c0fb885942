/**
 * A problem before it is sent: status, stable code, detail. Its own file so that validation.ts
 * (which builds one) and problem.ts (which sends one and calls validation.ts) do not import each other.
 */
import type { ErrorDetails } from "../core/errors.js";

export interface ProblemSpec {
  readonly status: number;
  readonly code: string;
  readonly detail: string;
  readonly extra?: ErrorDetails;
}
