/**
 * `npm run bench`: runs every bench/*.bench.ts (or those whose name contains an argument) in one
 * process, one after another. Each module's default export prints its own figures, always as a
 * ratio against a baseline measured in the same run: these machines are shared and noisy.
 */
import "./as-launched.js";
import { readdirSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { machineSpeed, removeKeptDirs } from "./baseline.js";

const here = dirname(fileURLToPath(import.meta.url));
const filters = process.argv.slice(2);
const files = readdirSync(here)
  .filter((f) => f.endsWith(".bench.ts"))
  .filter((f) => filters.length === 0 || filters.some((x) => f.includes(x)))
  .sort();
try {
  for (const file of files) {
    console.log(`\n== ${file.replace(/\.bench\.ts$/, "")}`);
    console.log(machineSpeed());
    const mod = (await import(pathToFileURL(join(here, file)).href)) as { default: () => Promise<void> };
    await mod.default();
  }
} finally {
  removeKeptDirs();
}
console.log(`\n${machineSpeed()}`);
