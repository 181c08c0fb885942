/** `warden serve` configuration: defaults, warden.json, flags over the file, and refusals. */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as path from "node:path";
import { DEFAULT_LIMITS } from "../../src/core/limits.js";
import { loadServeConfig } from "../../src/config/serve-config.js";
import { parseListen, urlOf } from "../../src/config/listen.js";
import { TOKEN_FILE } from "../../src/config/tokens.js";
import { FileLock } from "../../src/storage/lock.js";
import { HOME_LOCK_FILE } from "../../src/warden/home-backend.js";
import { tempDir } from "../support/temp.js";

describe("serve configuration", () => {
  let root: string;
  before(() => {
    root = tempDir("server-config");
  });
  after(() => fs.rmSync(root, { recursive: true, force: true }));

  const homeWith = (name: string, config?: unknown): string => {
    const home = path.join(root, name);
    fs.mkdirSync(home, { mode: 0o700 });
    if (config !== undefined) fs.writeFileSync(path.join(home, "warden.json"), typeof config === "string" ? config : JSON.stringify(config), { mode: 0o600 });
    return home;
  };

  it("a start reads and writes its token only while it holds the home: a served home is refused before its token file is touched", () => {
    const home = homeWith("held");
    // An empty token file (what an interrupted first start of an older version left) is one a
    // start replaces; the process serving this home holds its lock and already loaded another.
    fs.writeFileSync(path.join(home, TOKEN_FILE), "", { mode: 0o600 });
    const serving = FileLock.tryAcquire(path.join(home, HOME_LOCK_FILE))!;
    try {
      assert.throws(() => loadServeConfig({ home }, {}, root), { code: "home-in-use" });
      assert.equal(fs.readFileSync(path.join(home, TOKEN_FILE), "utf8"), "");
    } finally {
      serving.release();
    }
    const started = loadServeConfig({ home }, {}, root);
    assert.equal(started.generatedToken, path.join(home, TOKEN_FILE));
    assert.notEqual(fs.readFileSync(path.join(home, TOKEN_FILE), "utf8").trim(), "");
    // Loading the configuration leaves the home free for the node to claim.
    assert.equal(FileLock.isFree(path.join(home, HOME_LOCK_FILE)), true);
  });

  it("defaults: ./.warden (or $WARDEN_HOME), 127.0.0.1:7420, default limits, env tokens", () => {
    const cwd = path.join(root, "cwd");
    fs.mkdirSync(cwd);
    const config = loadServeConfig({}, { WARDEN_TOKEN: "t" }, cwd);
    assert.equal(config.home, path.join(cwd, ".warden"));
    assert.equal(fs.statSync(config.home).mode & 0o777, 0o700);
    assert.deepEqual(config.listen, { host: "127.0.0.1", port: 7420 });
    assert.deepEqual(config.warden.limits, DEFAULT_LIMITS);
    assert.equal(config.server.tokens.length, 1);
    assert.equal(config.generatedToken, undefined);
    const fromEnv = loadServeConfig({}, { WARDEN_HOME: "elsewhere", WARDEN_TOKEN: "t" }, cwd);
    assert.equal(fromEnv.home, path.join(cwd, "elsewhere"));
  });

  it("reads warden.json and lets flags override it", () => {
    const ws = path.join(root, "ws");
    fs.mkdirSync(ws);
    const home = homeWith("file", {
      listen: "0.0.0.0:9000",
      workspaces: { main: ws },
      providers: { claude: "/opt/claude", codex: { command: "codex-beta", events: "codex-jsonl" } },
      limits: { chunkBytes: 65536, activeStages: 4 },
      sandbox: { cgroups: false, limits: { memoryBytes: 128 * 1024 * 1024, processes: 256 } },
      logLevel: "warn",
      maxWaitS: 5,
      shutdownGraceS: 2,
    });
    const config = loadServeConfig({ home, listen: "127.0.0.1:0", provider: ["claude=./bin/claude"], workspace: [`extra=${ws}`] }, { WARDEN_TOKEN: "t" }, root);
    assert.deepEqual(config.listen, { host: "127.0.0.1", port: 0 });
    assert.equal(config.warden.limits?.chunkBytes, 65536);
    assert.equal(config.warden.limits?.activeStages, 4);
    assert.equal(config.warden.limits?.fileBytes, DEFAULT_LIMITS.fileBytes);
    assert.deepEqual(config.warden.sandbox, { cgroups: false, limits: { memoryBytes: 128 * 1024 * 1024, processes: 256 } });
    assert.deepEqual(config.warden.workspaces, { main: ws, extra: ws });
    assert.deepEqual(config.warden.providers, { claude: { command: path.join(root, "bin/claude") }, codex: { command: "codex-beta", events: "codex-jsonl" } });
    assert.equal(config.server.logLevel, "warn");
    assert.equal(config.server.maxWaitS, 5);
    assert.equal(config.shutdownGraceMs, 2000);
  });

  for (const [name, config, code] of [
    ["not JSON", "{", "config-file-invalid"],
    ["an unknown key", { listen: "127.0.0.1:1", color: "blue" }, "config-file-invalid"],
    ["an unknown limit", { limits: { chunks: 1 } }, "config-file-invalid"],
    ["a zero limit", { limits: { chunkBytes: 0 } }, "config-file-invalid"],
    ["a bad listen address", { listen: "localhost" }, "config-listen-invalid"],
    // A run could not start in it: an agent's runtime alone takes tens of MiB.
    ["a run memory bound under 64 MiB", { sandbox: { limits: { memoryBytes: 32 * 1024 * 1024 } } }, "config-file-invalid"],
    ["sandbox.cgroups not a boolean", { sandbox: { cgroups: "off" } }, "config-file-invalid"],
    ["a relative workspace", { workspaces: { main: "rel/dir" } }, "config-workspace-invalid"],
    ["an agentEnv name that is no variable name", { agentEnv: ["1BAD"] }, "config-file-invalid"],
    // JSON.parse would keep the second: the node would run with what a reader of the top did not see.
    ["a name twice in one object", '{"workspacePermissions": {"main": "read-only", "main": "full"}}', "config-file-invalid"],
    ["a name twice, escaped the second time", '{"listen": "127.0.0.1:1", "\\u006cisten": "0.0.0.0:1"}', "config-file-invalid"],
  ] as const) {
    it(`refuses a warden.json with ${name}`, () => {
      const home = homeWith(`bad-${name.replace(/\W+/g, "-")}`, config);
      assert.throws(() => loadServeConfig({ home }, { WARDEN_TOKEN: "t" }, root), { code });
    });
  }

  it("trusted workspaces: none by default; warden.json's trustedWorkspaces and --trust-workspace add up", () => {
    const ws = path.join(root, "trust-ws");
    fs.mkdirSync(ws, { recursive: true });
    assert.equal(loadServeConfig({ home: homeWith("trust-none", { workspaces: { a: ws } }) }, { WARDEN_TOKEN: "t" }, root).warden.trustedWorkspaces, undefined);
    const home = homeWith("trust-some", { workspaces: { a: ws, b: ws }, trustedWorkspaces: ["a"] });
    assert.deepEqual(loadServeConfig({ home }, { WARDEN_TOKEN: "t" }, root).warden.trustedWorkspaces, ["a"]);
    assert.deepEqual(loadServeConfig({ home, trustWorkspace: ["b", "a"] }, { WARDEN_TOKEN: "t" }, root).warden.trustedWorkspaces, ["a", "b"]);
    assert.throws(() => loadServeConfig({ home: homeWith("trust-bad", { trustedWorkspaces: "a" }) }, { WARDEN_TOKEN: "t" }, root), { code: "config-file-invalid" });
  });

  it("refuses malformed flags", () => {
    const home = homeWith("flags");
    assert.throws(() => loadServeConfig({ home, provider: ["gpt=/bin/gpt"] }, { WARDEN_TOKEN: "t" }, root), { code: "config-provider-invalid" });
    assert.throws(() => loadServeConfig({ home, provider: ["claude"] }, { WARDEN_TOKEN: "t" }, root), { code: "config-flag-invalid" });
    assert.throws(() => loadServeConfig({ home, workspace: ["main=relative"] }, { WARDEN_TOKEN: "t" }, root), { code: "config-workspace-invalid" });
    assert.throws(() => loadServeConfig({ home, listen: "127.0.0.1:70000" }, { WARDEN_TOKEN: "t" }, root), { code: "config-listen-invalid" });
    assert.throws(() => loadServeConfig({ home, logLevel: "loud" }, { WARDEN_TOKEN: "t" }, root), { code: "config-log-level-invalid" });
  });

  it("parses listen addresses, IPv6 included", () => {
    assert.deepEqual(parseListen("[::1]:7420"), { host: "::1", port: 7420 });
    assert.equal(urlOf({ host: "::1", port: 7420 }), "http://[::1]:7420");
    assert.equal(urlOf(parseListen("127.0.0.1:0")), "http://127.0.0.1:0");
  });
});
