/** Option parsers for commander: a bad value is a one-line usage error, like commander's own. */
import { InvalidArgumentError } from "commander";
import { PROVIDER_NAMES, isProviderName, type ProviderName } from "../providers/types.js";

const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export function isUuid(value: string): boolean {
  return UUID_RE.test(value);
}

export function parseProvider(value: string): ProviderName {
  if (!isProviderName(value)) throw new InvalidArgumentError(`--provider must be one of ${PROVIDER_NAMES.join(", ")}`);
  return value;
}

export const PROVIDERS_TEXT = `provider: ${PROVIDER_NAMES.join(", ")}`;

/** Collects the values of a repeatable option, in order. */
export function collect(value: string, previous: string[]): string[] {
  return [...previous, value];
}

export function parsePositiveInt(option: string): (value: string) => number {
  return (value) => {
    if (!/^[1-9][0-9]{0,14}$/.test(value)) throw new InvalidArgumentError(`${option} must be a positive integer`);
    return Number(value);
  };
}

export function parseNonNegativeInt(option: string): (value: string) => number {
  return (value) => {
    if (!/^(0|[1-9][0-9]{0,14})$/.test(value)) throw new InvalidArgumentError(`${option} must be a non-negative integer`);
    return Number(value);
  };
}
