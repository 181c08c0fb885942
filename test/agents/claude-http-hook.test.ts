/**
 * Claude Code's HTTP pre-tool hook as warden writes it (src/policy/hook.ts) must fail CLOSED: when
 * the node's decision endpoint cannot be reached, or answers anything but a 2xx, the tool call must
 * not run (Claude Code's default for a failed HTTP hook is to let the call go ahead). The real
 * pinned CLI against the scripted model, with the run home warden writes for a governed run.
 */
import { after, describe, it } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { existsSync, mkdirSync, rmSync } from "node:fs";
import * as http from "node:http";
import * as net from "node:net";
import { join } from "node:path";
import { ScriptedModelServer } from "../../src/scripted-model/index.js";
import { RunHomes } from "../../src/providers/run-home.js";
import { DEFAULT_PROVIDER_PROFILES } from "../../src/providers/profiles.js";
import { repo } from "../support/node.js";
import { tempDir } from "../support/temp.js";

const cli = join(repo, "node_modules", ".bin", "claude");
const skip = existsSync(cli) ? false : `${cli} is not installed`;
const WAIT_MS = 120_000;

/** A port nothing listens on: bound, then closed. */
async function closedPort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

describe("claude's HTTP pre-tool hook fails closed", { skip }, () => {
  const root = tempDir("http-hook");
  after(() => rmSync(root, { recursive: true, force: true }));

  async function runWithHook(name: string, url: string): Promise<{ ran: boolean; output: string }> {
    const workspace = join(root, name);
    mkdirSync(workspace);
    const model = await ScriptedModelServer.start({
      script: { turns: [{ tool: { name: "Bash", input: { command: "echo ran > marker.txt", description: "mark" } } }, { text: "Done." }] },
    });
    try {
      const homes = new RunHomes(join(root, `${name}-homes`));
      const profile = DEFAULT_PROVIDER_PROFILES.claude;
      const home = await homes.create({ run: name, provider: "claude", profile, workspace, trusted: false, preToolHttpHook: { url } });
      const args = [...home.args, ...profile.permissions.full.args, "-p", "--output-format", "stream-json", "--verbose", "--", "mark the workspace"];
      const env = { PATH: process.env.PATH ?? "/usr/bin:/bin", ...home.env, ...profile.env, ...profile.permissions.full.env, ANTHROPIC_BASE_URL: model.url, ANTHROPIC_API_KEY: "sk-scripted-not-a-secret", ANTHROPIC_MODEL: "scripted-model", CLAUDE_CODE_MAX_RETRIES: "1" };
      const child = spawn(cli, args, { cwd: workspace, env, stdio: ["ignore", "pipe", "pipe"] });
      const chunks: Buffer[] = [];
      child.stdout.on("data", (c: Buffer) => chunks.push(c));
      child.stderr.on("data", (c: Buffer) => chunks.push(c));
      const timer = setTimeout(() => child.kill("SIGKILL"), WAIT_MS);
      const code = await new Promise<number | null>((resolve) => child.on("exit", resolve));
      clearTimeout(timer);
      const output = Buffer.concat(chunks).toString("utf8");
      assert.notEqual(code, null, `claude did not end within ${WAIT_MS / 1000} s:\n${output.slice(-2000)}`);
      // The model was asked again after the call: the CLI got past the hook's answer, whatever it was.
      assert.ok(model.requests.length >= 2, `the model saw ${model.requests.length} request(s):\n${output.slice(-2000)}`);
      return { ran: existsSync(join(workspace, "marker.txt")), output };
    } finally {
      await model.close();
    }
  }

  it("an endpoint nobody listens on: the call does not run", async () => {
    const { ran, output } = await runWithHook("unreachable", `http://127.0.0.1:${await closedPort()}/v1/decide`);
    assert.equal(ran, false, `the call ran with its decision point unreachable:\n${output.slice(-2000)}`);
  });

  it("an endpoint answering 500 (or a wrong token's 401): the call does not run; an empty 200 lets it run", async () => {
    let status = 500;
    const server = http.createServer((req, res) => {
      req.resume();
      req.on("end", () => res.writeHead(status).end(""));
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const url = `http://127.0.0.1:${(server.address() as net.AddressInfo).port}/v1/decide`;
    try {
      const refused = await runWithHook("status-500", url);
      assert.equal(refused.ran, false, `the call ran on a 500:\n${refused.output.slice(-2000)}`);
      status = 200;
      // The control: the same hook answering allow lets the call run, so the two above were the hook's doing.
      const allowed = await runWithHook("status-200", url);
      assert.equal(allowed.ran, true, `the call did not run on an allow:\n${allowed.output.slice(-2000)}`);
    } finally {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  });
});
