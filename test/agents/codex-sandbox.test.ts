/**
 * Codex's own sandbox failing to start must fail the run visibly. The real pinned Codex, against
 * the scripted model, with Debian's bubblewrap and a CODEX_HOME under the temporary directory (as
 * before every run had its own TMPDIR): Codex refuses to create its sandbox helper there, runs the
 * scripted shell call through `bwrap`, which cannot find the helper, and then answers and exits 0.
 * What it prints is read as the runner reads it (events.ts, run-answer.ts): an error
 * `provider-sandbox-failed`, so the run is recorded failed. Where bubblewrap is missing Codex
 * runs commands another way and there is nothing to reproduce: the test says so and skips.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { existsSync, mkdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ScriptedModelServer } from "../../src/scripted-model/index.js";
import { codexConfigToml } from "../../src/providers/codex-config.js";
import { eventReader, stderrReader } from "../../src/runner/events.js";
import { RunAnswer } from "../../src/runner/run-answer.js";
import { repo } from "../support/node.js";
import { tempDir } from "../support/temp.js";

const cli = join(repo, "node_modules", ".bin", "codex");
const bwrap = ["/usr/bin/bwrap", "/bin/bwrap"].find((p) => existsSync(p));
const skip = !existsSync(cli) ? `${cli} is not installed` : bwrap === undefined ? "bubblewrap is not installed: codex's sandbox is not bwrap here" : false;

function run(args: readonly string[], cwd: string, env: NodeJS.ProcessEnv): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(cli, [...args], { cwd, env, stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d: Buffer) => void (stdout += d.toString("utf8")));
    child.stderr.on("data", (d: Buffer) => void (stderr += d.toString("utf8")));
    child.once("error", reject);
    child.once("close", (code) => resolve({ code, stdout, stderr }));
  });
}

describe("real codex whose own sandbox cannot start", { skip }, () => {
  const root = tempDir("codex-sandbox");
  let model: ScriptedModelServer;

  before(async () => {
    model = await ScriptedModelServer.start({ script: { turns: [] } });
  });
  after(async () => {
    await model.close();
    rmSync(root, { recursive: true, force: true });
  });

  it("exits 0 with an answer, and is read as provider-sandbox-failed: never a success", async () => {
    // The temporary directory Codex checks is TMPDIR's; this test's root is inside it.
    assert.ok(root.startsWith(tmpdir()), `${root} is not under ${tmpdir()}`);
    const workspace = join(root, "workspace");
    const codexHome = join(root, "codex-home");
    mkdirSync(workspace, { recursive: true });
    mkdirSync(codexHome, { recursive: true });
    writeFileSync(join(codexHome, "config.toml"), codexConfigToml({ model: { baseUrl: `${model.url}/v1`, apiKeyEnv: "SCRIPTED_KEY", name: "scripted-model", retries: 1 } }));
    model.load({ turns: [{ tool: { name: "exec_command", input: { cmd: "echo hi > out.txt" } } }, { text: "Wrote out.txt." }] });
    const ran = await run(["exec", "--json", "--skip-git-repo-check", "--sandbox", "workspace-write", "write the file"], workspace, {
      PATH: process.env.PATH ?? "/usr/bin:/bin",
      HOME: root,
      TMPDIR: tmpdir(),
      CODEX_HOME: codexHome,
      SCRIPTED_KEY: "sk-scripted-not-a-secret",
    });
    // What made the failure silent: Codex itself reports success.
    assert.equal(ran.code, 0, ran.stderr);
    assert.equal(existsSync(join(workspace, "out.txt")), false, "the command ran: codex's sandbox started after all");
    // Both streams, as the runner reads them: codex does not always print the failed command's
    // item on stdout, but always says on stderr that its sandbox helper is missing.
    const read = eventReader("codex-jsonl")!;
    const readErr = stderrReader("codex-jsonl")!;
    const answer = new RunAnswer();
    for (const line of ran.stdout.split("\n")) read(line).forEach((e) => answer.take(e));
    for (const line of ran.stderr.split("\n")) readErr(line).forEach((e) => answer.take(e));
    assert.equal(answer.fields().answer, "Wrote out.txt.");
    const error = answer.errorDetail();
    assert.equal(error?.code, "provider-sandbox-failed", ran.stdout + ran.stderr);
    assert.match(error?.message ?? "", /bwrap: |could not create PATH aliases/);
  });
});
