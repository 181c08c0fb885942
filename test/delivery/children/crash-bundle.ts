/**
 * The bundle the crash tests push, shared by the parent test and its child process: small
 * (fast runs), several chunks per blob, a duplicated blob and an empty file (published at begin).
 */
import { buildManifest, type BuiltManifest } from "../manifest-fixtures.js";
import { PLUGIN_JSON, ROOT_PLUGIN_JSON, SKILL_MD, bytesOf } from "../store-harness.js";

export const CRASH_CHUNK_BYTES = 8 * 1024;

export function crashBundle(seed: number): BuiltManifest {
  const a = bytesOf(seed * 3 + 1, 24 * 1024 + (seed % 7) * 1000);
  return buildManifest(
    [
      { path: ".claude-plugin/plugin.json", content: PLUGIN_JSON },
      { path: "plugin.json", content: ROOT_PLUGIN_JSON },
      { path: "skills/review/SKILL.md", content: SKILL_MD },
      { path: "data/a.bin", content: a },
      { path: "data/b.bin", content: bytesOf(seed * 3 + 2, 16 * 1024 + (seed % 5) * 999) },
      { path: "data/copy-of-a.bin", content: a },
      { path: "docs/empty.md", content: "" },
    ],
    "crash-tools",
    `r${seed}`,
  );
}
