/**
 * What an agent inherits from the node that launches it (DESIGN.md G12: agents never see the
 * node's credentials). The node's own environment holds its bearer tokens and, on a fleet, the
 * database URL (with its password, as the README advises: `WARDEN_POSTGRES_URL` or `PGPASSWORD`
 * rather than the command line). That database holds the fleet's private signing keys and every
 * claim: an agent holding it could forge journals and reopen ids. And no descriptor of the
 * node's state (SQLite files, locks, keys) may stay open in the agent.
 *
 * Nor any other variable of the node: the environment is built from an allowlist, so what the
 * operator's shell exported (a cloud key, an SSH agent socket) never reaches an agent either.
 *
 * The node is opened with its default agent environment (no `agentEnv`) and its default
 * confinement, and the agent is a real `/bin/sh` that writes its environment and its open
 * descriptors to files in its workspace.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { randomUUID } from "node:crypto";
import { openWarden, type Warden } from "../../src/warden/facade.js";

const SECRETS = {
  WARDEN_TOKEN: "operator-secret-0b6f1c2a9d",
  WARDEN_OBSERVER_TOKEN: "observer-secret-5e7a3c1f80",
  WARDEN_POSTGRES_URL: "postgresql://warden:url-password-4d2b9e@db.invalid:5432/warden",
  PGPASSWORD: "pg-password-c81f0a6e3b",
  AWS_SECRET_ACCESS_KEY: "aws-secret-77d1e0b5a9",
  SSH_AUTH_SOCK: "/run/user/0/ssh-agent-3f9c1d",
} as const;

const PROBE = 'env > "$1.env"; for fd in /proc/$$/fd/*; do echo "${fd##*/} $(readlink "$fd")"; done > "$1.fds"';

describe("security: the environment and descriptors an agent inherits", () => {
  let root: string;
  let home: string;
  let warden: Warden;
  const saved: Record<string, string | undefined> = {};

  before(async () => {
    root = fs.mkdtempSync(path.join(os.tmpdir(), "warden-security-env-"));
    home = path.join(root, "home");
    fs.mkdirSync(path.join(root, "ws"));
    for (const [name, value] of Object.entries(SECRETS)) {
      saved[name] = process.env[name];
      process.env[name] = value;
    }
    try {
      warden = await openWarden({
        home,
        workspaces: { main: path.join(root, "ws") },
        providers: { kimi: { command: "/bin/sh", promptArgs: ["-c", PROBE, "--", "{prompt}"] } },
      });
    } finally {
      for (const [name, value] of Object.entries(saved)) {
        if (value === undefined) delete process.env[name];
        else process.env[name] = value;
      }
    }
  });
  after(async () => {
    await warden?.close();
    fs.rmSync(root, { recursive: true, force: true });
  });

  it("holds none of the node's credentials and no descriptor of its state", async () => {
    const out = path.join(root, "ws", "probe");
    const outcome = await warden.invoke("test", randomUUID(), { provider: "kimi", prompt: out, workspace: "main" });
    assert.equal(outcome.status, "recorded", JSON.stringify(outcome));
    const env = fs.readFileSync(`${out}.env`, "utf8");
    assert.match(env, /^WARDEN_AGENT_OF=/m, "the probe ran with the node's agent environment");
    assert.match(env, /^PATH=/m);
    assert.match(env, /^HOME=/m);
    assert.doesNotMatch(env, new RegExp(`^HOME=${process.env.HOME ?? "/root"}$`, "m"), "the agent got the node user's home");
    for (const [name, secret] of Object.entries(SECRETS)) {
      assert.ok(!env.includes(secret), `the agent inherited ${name}`);
    }
    const fds = fs.readFileSync(`${out}.fds`, "utf8").trim().split("\n");
    assert.ok(fds.length >= 3, fds.join("\n"));
    const intoHome = fds.filter((line) => line.includes(home));
    assert.deepEqual(intoHome, [], "the agent holds descriptors of the node's state directory");
  });
});
