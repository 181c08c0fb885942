/**
 * Every run's fresh private home (src/providers/run-home.ts): what a provider CLI finds as HOME,
 * its configuration directory and TMPDIR, written by warden, never the node user's own, gone
 * when the run ends; and the workspace's own configuration pinned off unless it is trusted.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as path from "node:path";
import { randomUUID } from "node:crypto";
import { parse as parseToml } from "smol-toml";
import { isWardenError } from "../../src/core/errors.js";
import type { ExistingOutcome } from "../../src/invocations/index.js";
import { RunHomes } from "../../src/providers/run-home.js";
import { resolveProfiles } from "../../src/providers/profiles.js";
import { fullBundleFiles } from "../providers/helpers.js";
import { SCOPE, journalOf, killStarts, openRunnerEnv, pushBundle, starts, type RunnerEnv, type StartRecord } from "./helpers.js";
import { tempDir } from "../support/temp.js";

const BUNDLE = { bundle_id: "review-tools", revision: "r1" };

function recorded(o: ExistingOutcome): Extract<ExistingOutcome, { status: "recorded" }> {
  assert.equal(o.status, "recorded", JSON.stringify(o));
  return o as Extract<ExistingOutcome, { status: "recorded" }>;
}

for (const trusted of [false, true]) {
  describe(`run homes (workspace ${trusted ? "trusted" : "untrusted"})`, () => {
    let root: string;
    let env: RunnerEnv;
    let operatorHome: string;

    before(async () => {
      root = tempDir("run-home");
      // The node user's own home, with a Claude and a Codex configuration no run may read.
      operatorHome = path.join(root, "operator");
      fs.mkdirSync(path.join(operatorHome, ".claude"), { recursive: true });
      fs.writeFileSync(path.join(operatorHome, ".claude", "settings.json"), '{"permissions":{"allow":["Read(//**)"]}}');
      env = await openRunnerEnv(root, { env: { HOME: operatorHome, CODEX_HOME: path.join(operatorHome, ".codex") }, ...(trusted ? { trustedWorkspaces: ["main"] } : {}) });
      await pushBundle(env.delivery, BUNDLE.bundle_id, BUNDLE.revision, fullBundleFiles());
    });
    after(async () => {
      killStarts(env.startsFile);
      await env.close();
      fs.rmSync(root, { recursive: true, force: true });
    });

    const run = async (provider: "claude" | "codex"): Promise<{ start: StartRecord; runId: string; homes: string }> => {
      const outcome = recorded(await env.runner.invoke({ scope: SCOPE, id: randomUUID(), request: { provider, prompt: "look around", bundle: BUNDLE } }));
      const runId = outcome.audit.run_id;
      const start = starts(env.startsFile).at(-1)!;
      return { start, runId, homes: path.join(root, "home", "run-homes") };
    };

    it("claude: HOME and CLAUDE_CONFIG_DIR are the run's own, private, with warden's pinned settings; the setting sources pinned; removed at the end", async () => {
      const { start, runId, homes } = await run("claude");
      const home = path.join(homes, runId);
      assert.deepEqual(start.home, { path: home, mode: 0o700, entries: [".claude", "shm", "tmp"] });
      assert.equal(start.env?.CLAUDE_CONFIG_DIR, path.join(home, ".claude"));
      assert.equal(start.env?.TMPDIR, path.join(home, "tmp"));
      assert.equal(start.env?.XDG_CONFIG_HOME, path.join(home, ".config"));
      assert.deepEqual(JSON.parse(start.claudeSettings ?? "null"), { enableAllProjectMcpServers: false });
      const sources = start.argv[start.argv.indexOf("--setting-sources") + 1];
      assert.equal(sources, trusted ? "user,project,local" : "user");
      // The journal says whether the workspace's own configuration could run.
      const note = (await journalOf(env, runId)).entries.map((e) => e.event).find((e) => e.type === "note" && "process" in e) as { process: Record<string, unknown> } | undefined;
      assert.equal(note?.process.workspace_trusted, trusted ? true : undefined);
      // Gone with the run.
      assert.equal(fs.existsSync(home), false);
      assert.deepEqual(fs.readdirSync(homes), []);
    });

    it("codex: CODEX_HOME is in the run's home, outside its TMPDIR, with the materialized config and skills; the workspace a trusted project only when trusted", async () => {
      const { start, runId, homes } = await run("codex");
      const home = path.join(homes, runId);
      assert.deepEqual(start.home, { path: home, mode: 0o700, entries: [".codex", "shm", "tmp"] });
      assert.equal(start.env?.CODEX_HOME, path.join(home, ".codex"));
      // Codex refuses to create its sandbox helper under TMPDIR: CODEX_HOME must not be inside it.
      assert.equal(start.env?.TMPDIR, path.join(home, "tmp"));
      const config = JSON.parse(JSON.stringify(parseToml(start.codexConfig ?? ""))) as { projects?: Record<string, { trust_level: string }>; mcp_servers?: Record<string, unknown> };
      assert.ok(config.mcp_servers?.files !== undefined, start.codexConfig);
      assert.deepEqual(config.projects, trusted ? { [env.workspace]: { trust_level: "trusted" } } : undefined);
      assert.equal(fs.existsSync(home), false);
    });
  });
}

describe("RunHomes", () => {
  const profiles = resolveProfiles();

  it("refuses a second home for the same run, and sweeps what a dead node left", async () => {
    const root = tempDir("run-homes");
    try {
      const homes = new RunHomes(path.join(root, "homes"));
      assert.equal(fs.statSync(homes.root).mode & 0o7777, 0o700);
      const request = { run: "r1", provider: "claude" as const, profile: profiles.claude, workspace: root, trusted: false };
      const home = await homes.create(request);
      await assert.rejects(homes.create(request), (e: unknown) => isWardenError(e) && e.code === "run-home-exists");
      await assert.rejects(homes.create({ ...request, run: "../x" }), (e: unknown) => isWardenError(e) && e.code === "session-name-invalid");
      fs.writeFileSync(path.join(home.path, "left-behind"), "x");
      assert.equal(await new RunHomes(homes.root).sweep(), 1);
      assert.deepEqual(fs.readdirSync(homes.root), []);
    } finally {
      fs.rmSync(root, { recursive: true, force: true });
    }
  });

  it("a trusted workspace must be a configured one", async () => {
    const root = tempDir("run-homes-unknown");
    try {
      await assert.rejects(openRunnerEnv(root, { trustedWorkspaces: ["elsewhere"] }), (e: unknown) => isWardenError(e) && e.code === "workspace-unknown");
    } finally {
      fs.rmSync(root, { recursive: true, force: true });
    }
  });
});
