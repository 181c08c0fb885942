/** Human-readable figures for CLI output. */
const UNITS = ["B", "KiB", "MiB", "GiB", "TiB"];

export function formatBytes(bytes: number): string {
  let value = bytes;
  let unit = 0;
  while (value >= 1024 && unit < UNITS.length - 1) {
    value /= 1024;
    unit++;
  }
  return unit === 0 ? `${bytes} B` : `${value.toFixed(1)} ${UNITS[unit]}`;
}

export function formatRate(bytesPerSecond: number): string {
  return Number.isFinite(bytesPerSecond) ? `${formatBytes(Math.round(bytesPerSecond))}/s` : "-";
}

/** Left-aligned `key  value` rows. */
export function table(rows: readonly (readonly [string, string])[], indent = "  "): string {
  const width = Math.max(0, ...rows.map(([key]) => key.length));
  return rows.map(([key, value]) => `${indent}${key.padEnd(width)}  ${value}\n`).join("");
}
