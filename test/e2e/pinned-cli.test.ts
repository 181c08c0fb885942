/**
 * `node bin/warden.cjs serve` finds the pinned CLIs as `npx warden serve` does (issue 27: it
 * answered provider-unavailable, npx having put node_modules/.bin on PATH): a bare provider command
 * is looked up in the package's own node_modules/.bin, then on PATH. The node runs the real pinned
 * Claude Code, named only by its default command `claude`, against the scripted model, with a PATH
 * that holds no node_modules/.bin and no claude.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, mkdirSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { randomUUID } from "node:crypto";
import { delimiter, join } from "node:path";
import { ScriptedModelServer } from "../../src/scripted-model/index.js";
import { findCommand } from "../../src/runner/command-path.js";
import { repo, warden } from "../support/node.js";
import { READY_MS, waitFor } from "../support/wait.js";
import { tempDir } from "../support/temp.js";

const TOKEN = "pinned-cli-operator-token-0123456789abcdef";
const KEY_VAR = "SCRIPTED_MODEL_KEY";
const PINNED = join(repo, "node_modules", ".bin", "claude");

describe("node bin/warden.cjs serve without node_modules/.bin on PATH", { skip: existsSync(PINNED) ? false : `${PINNED} is not installed (npm ci)` }, () => {
  let dir: string;
  let model: ScriptedModelServer;
  let node: ChildProcess | undefined;
  let out = "";
  let err = "";
  let url = "";

  before(async () => {
    dir = tempDir("pinned-cli");
    const bin = join(dir, "bin");
    const home = join(dir, "home");
    for (const d of [bin, join(dir, "ws"), join(dir, "agent-home")]) mkdirSync(d, { recursive: true });
    mkdirSync(home, { mode: 0o700 });
    // node itself (bin/warden.cjs is run by it, and so are Node CLIs), and the system's tools.
    symlinkSync(process.execPath, join(bin, "node"));
    const path = [bin, "/usr/bin", "/bin"].join(delimiter);
    assert.equal(findCommand("claude", { PATH: path }, dir, join(dir, "no-pinned-bin")), undefined, "the test's PATH must hold no claude of its own");
    model = await ScriptedModelServer.start({ script: { turns: [] } });
    writeFileSync(
      join(home, "warden.json"),
      JSON.stringify({ providers: { claude: { model: { baseUrl: model.url, apiKeyEnv: KEY_VAR, name: "scripted-model", retries: 0 } } }, logLevel: "warn" }),
      { mode: 0o600 },
    );
    node = spawn(process.execPath, [join(repo, "bin", "warden.cjs"), "serve", "--home", home, "--listen", "127.0.0.1:0", "--workspace", `main=${join(dir, "ws")}`], {
      cwd: dir,
      env: { PATH: path, HOME: join(dir, "agent-home"), WARDEN_TOKEN: TOKEN, [KEY_VAR]: "sk-scripted", TMPDIR: process.env.TMPDIR ?? "/tmp" },
      stdio: ["ignore", "pipe", "pipe"],
    });
    node.stdout!.setEncoding("utf8").on("data", (s: string) => (out += s));
    node.stderr!.setEncoding("utf8").on("data", (s: string) => (err += s));
    url = await waitFor(`node bin/warden.cjs serve to print the URL it listens on (stdout: ${out}; stderr: ${err})`, () => /listening on (http:\S+)/.exec(out)?.[1], READY_MS);
  });
  after(async () => {
    if (node !== undefined && node.exitCode === null) {
      const exited = new Promise((done) => node!.once("exit", done));
      node.kill("SIGTERM");
      await exited;
    }
    await model?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it("runs the pinned claude for a provider configured with a model endpoint only", async () => {
    model.load({ turns: [{ text: "Answered by the pinned CLI." }] });
    const run = await warden(["invoke", "--id", randomUUID(), "--provider", "claude", "--wait", "120", "--json", "--", "hello"], { env: { WARDEN_URL: url, WARDEN_TOKEN: TOKEN } });
    assert.equal(run.code, 0, run.stdout + run.stderr + err);
    const view = JSON.parse(run.stdout) as { status: string; result: { answer?: string } };
    assert.equal(view.result.answer, "Answered by the pinned CLI.");
    assert.equal(model.requests.length, 1);
  });
});

describe("findCommand: a path, then the package's node_modules/.bin, then PATH", () => {
  it("prefers the pinned directory to PATH for a bare name, and takes a path as it is", () => {
    const dir = tempDir("find-command");
    try {
      for (const d of ["pinned", "path"]) {
        mkdirSync(join(dir, d));
        writeFileSync(join(dir, d, "tool"), "#!/bin/sh\n", { mode: 0o700 });
      }
      const env = { PATH: join(dir, "path") };
      assert.equal(findCommand("tool", env, dir, join(dir, "pinned")), join(dir, "pinned", "tool"));
      assert.equal(findCommand("tool", env, dir, join(dir, "nowhere")), join(dir, "path", "tool"));
      assert.equal(findCommand("tool", { PATH: "" }, dir, join(dir, "nowhere")), undefined);
      assert.equal(findCommand(join(dir, "path", "tool"), env, dir, join(dir, "pinned")), join(dir, "path", "tool"));
      assert.equal(findCommand("path/tool", env, dir, join(dir, "pinned")), join(dir, "path", "tool"));
      // A command the operator named (`--provider x=tool`): PATH alone, the pinned one is not chosen.
      assert.equal(findCommand("tool", env, dir, null), join(dir, "path", "tool"));
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
