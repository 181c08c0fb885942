/**
 * Codex's pre-tool command hook as warden writes it (src/policy/hook.ts) must fail CLOSED. Codex
 * 0.171 has no `onFailure`: it blocks a call only on exit code 2 (or a deny printed on exit 0),
 * and runs it on any other exit, on output it cannot read, and when the hook outlives its timeout.
 * So every failure of the hook (no socket, a reply that is not a decision, a connection that dies,
 * a decision point that never answers) must end in exit 2. The real pinned Codex against the
 * scripted model, with the hook command warden writes into a governed run's CODEX_HOME.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { existsSync, mkdirSync, rmSync, writeFileSync } from "node:fs";
import * as http from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { stringify } from "smol-toml";
import { ScriptedModelServer } from "../../src/scripted-model/index.js";
import { codexConfigToml } from "../../src/providers/codex-config.js";
import { CODEX_HOOK_TRUST_ARGS, hookCommand } from "../../src/policy/hook.js";
import { repo } from "../support/node.js";
import { tempDir } from "../support/temp.js";

const cli = join(repo, "node_modules", ".bin", "codex");
const skip = existsSync(cli) ? false : `${cli} is not installed`;
const WAIT_MS = 120_000;
/** The hook's own deadline in the hang case, and Codex's (longer) timeout for it: both short, so the case takes seconds. */
const HOOK_DEADLINE_MS = 2_000;
const CODEX_TIMEOUT_S = 20;

type Answer = (req: http.IncomingMessage, res: http.ServerResponse) => void;

describe("codex's command pre-tool hook fails closed", { skip }, () => {
  const root = tempDir("codex-hook-closed");
  let model: ScriptedModelServer;
  before(async () => {
    model = await ScriptedModelServer.start({ script: { turns: [] } });
  });
  after(async () => {
    await model.close();
    rmSync(root, { recursive: true, force: true });
  });

  /** A decision point on a Unix socket answering every request with `answer`. */
  async function decisionPoint(name: string, answer: Answer): Promise<{ path: string; close: () => Promise<void> }> {
    const path = join(root, `${name}.sock`);
    const server = http.createServer((req, res) => {
      req.resume();
      req.on("end", () => answer(req, res));
    });
    await new Promise<void>((resolve) => server.listen(path, resolve));
    return {
      path,
      close: async () => {
        server.closeAllConnections();
        await new Promise<void>((resolve) => server.close(() => resolve()));
      },
    };
  }

  /** One codex run whose model asks for one shell command; whether the command ran. */
  async function runWithHook(name: string, socket: string, deadlineMs?: number): Promise<{ ran: boolean; output: string }> {
    const workspace = join(root, name);
    const codexHome = join(root, `${name}-home`);
    mkdirSync(workspace, { recursive: true });
    mkdirSync(codexHome, { recursive: true });
    const command = deadlineMs === undefined ? hookCommand(process.execPath, socket) : hookCommand(process.execPath, socket, deadlineMs);
    const hooks = { PreToolUse: [{ matcher: "*", hooks: [{ type: "command", command, timeout: CODEX_TIMEOUT_S }] }] };
    const config = codexConfigToml({ model: { baseUrl: `${model.url}/v1`, apiKeyEnv: "SCRIPTED_KEY", name: "scripted-model", retries: 1 } });
    writeFileSync(join(codexHome, "config.toml"), `${stringify({ web_search: "disabled" })}\n${config}\n${stringify({ hooks })}\n`);
    const from = model.requests.length;
    model.load({ turns: [{ tool: { name: "exec_command", input: { cmd: "echo ran > marker.txt" } } }, { text: "Done." }] });
    // Codex's own sandbox off: nothing but the hook stands between the model and the command.
    const args = ["exec", "--json", "--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox", ...CODEX_HOOK_TRUST_ARGS, "--", "mark the workspace"];
    const env = { PATH: process.env.PATH ?? "/usr/bin:/bin", HOME: root, TMPDIR: tmpdir(), CODEX_HOME: codexHome, SCRIPTED_KEY: "sk-scripted-not-a-secret" };
    const child = spawn(cli, args, { cwd: workspace, env, stdio: ["ignore", "pipe", "pipe"] });
    const chunks: Buffer[] = [];
    child.stdout.on("data", (c: Buffer) => chunks.push(c));
    child.stderr.on("data", (c: Buffer) => chunks.push(c));
    const timer = setTimeout(() => child.kill("SIGKILL"), WAIT_MS);
    const code = await new Promise<number | null>((resolve) => child.on("close", resolve));
    clearTimeout(timer);
    const output = Buffer.concat(chunks).toString("utf8");
    assert.notEqual(code, null, `codex did not end within ${WAIT_MS / 1000} s:\n${output.slice(-2000)}`);
    // The model was asked again after the call: the CLI got past the hook, whatever it answered.
    assert.ok(model.requests.length - from >= 2, `the model saw ${model.requests.length - from} request(s):\n${output.slice(-2000)}`);
    return { ran: existsSync(join(workspace, "marker.txt")), output };
  }

  it("no socket: the call does not run", async () => {
    const { ran, output } = await runWithHook("absent", join(root, "nobody.sock"));
    assert.equal(ran, false, `the call ran with its decision socket absent:\n${output.slice(-2000)}`);
  });

  const notDecisions: Record<string, Answer> = {
    "garbage": (_req, res) => res.writeHead(200).end("this is not a decision {"),
    "an allow in JSON": (_req, res) => res.writeHead(200).end(JSON.stringify({ hookSpecificOutput: { hookEventName: "PreToolUse", permissionDecision: "allow" } })),
    "a deny with no reason": (_req, res) => res.writeHead(200).end(JSON.stringify({ hookSpecificOutput: { hookEventName: "PreToolUse", permissionDecision: "deny" } })),
    "a reply cut short": (_req, res) => {
      res.writeHead(200, { "content-length": "1000" });
      res.write("{");
      res.socket?.destroy();
    },
  };
  for (const [name, answer] of Object.entries(notDecisions)) {
    it(`a 200 with ${name}: the call does not run`, async () => {
      const slug = name.replace(/[^a-z]+/g, "-");
      const point = await decisionPoint(slug, answer);
      try {
        const { ran, output } = await runWithHook(slug, point.path);
        assert.equal(ran, false, `the call ran on a decision point answering ${name}:\n${output.slice(-2000)}`);
      } finally {
        await point.close();
      }
    });
  }

  it("the control: an empty 200 (allow) lets the call run, so the refusals here are the hook's doing", async () => {
    const allow = await decisionPoint("allow", (_req, res) => res.writeHead(200).end(""));
    try {
      const { ran, output } = await runWithHook("allow", allow.path);
      assert.equal(ran, true, `the call did not run on an allow:\n${output.slice(-2000)}`);
    } finally {
      await allow.close();
    }
  });

  it("a decision point that never answers: the hook gives up before codex does, and the call does not run", async () => {
    const point = await decisionPoint("silent", () => undefined);
    try {
      const { ran, output } = await runWithHook("silent", point.path, HOOK_DEADLINE_MS);
      assert.equal(ran, false, `the call ran when its decision point never answered:\n${output.slice(-2000)}`);
    } finally {
      await point.close();
    }
  });
});
