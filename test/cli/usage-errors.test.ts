/**
 * Failures that need no node, as a script meets them (DESIGN.md "CLI", README): every failure is
 * one line on stderr in the form `warden: <message> (<code>)` with exit 1, and with `--json` the
 * same code as JSON on stdout — usage errors commander detects and file-system errors included.
 */
import { after, describe, it } from "node:test";
import assert from "node:assert/strict";
import { generateKeyPairSync } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { spawn } from "node:child_process";
import { cleanEnv, cliCommand, repo, warden as wardenProcess, type CliRun } from "../support/node.js";
import { wardenInProcess } from "../support/cli.js";

const dir = mkdtempSync(join(tmpdir(), "warden-cli-usage-"));
const missing = join(dir, "missing.json");
const keyFile = join(dir, "node.pub");
const jwk = generateKeyPairSync("ed25519").publicKey.export({ format: "jwk" });
writeFileSync(keyFile, Buffer.from(jwk.x!, "base64url").toString("base64"));

const warden = (args: readonly string[], env: Record<string, string> = {}): Promise<CliRun> => wardenInProcess(args, { env: { WARDEN_HOME: join(dir, "home"), ...env }, cwd: dir });

function assertOneLine(run: CliRun, code: string): void {
  assert.equal(run.code, 1, `exit code; stdout: ${run.stdout} stderr: ${run.stderr}`);
  const lines = run.stderr.trimEnd().split("\n");
  assert.equal(lines.length, 1, `one line on stderr, got: ${run.stderr}`);
  assert.match(lines[0]!, new RegExp(`^warden: \\S.* \\(${code}\\)$`));
  assert.doesNotMatch(run.stderr, /\n\s+at |^error: /m);
}

function jsonError(run: CliRun): { code: string; detail: string } {
  return (JSON.parse(run.stdout) as { error: { code: string; detail: string } }).error;
}

describe("warden CLI: failures without a node", () => {
  after(() => rmSync(dir, { recursive: true, force: true }));

  it("usage errors read `warden: <message> (<code>)`, not commander's `error: …`", async () => {
    const cases: [string[], string, RegExp][] = [
      [["push", "x", "--bogus"], "unknown-option", /unknown option '--bogus'/],
      [["push"], "missing-argument", /missing required argument 'dir'/],
      [["bogus"], "unknown-command", /unknown command 'bogus'/],
      [["reconcile", "api:operator", "0c4b0d52-7d4e-4f8a-9d36-1b2c3d4e5f60"], "missing-mandatory-option-value", /required option '--review <file>' not specified/],
      [["materialize", "b", "--provider", "gemini"], "invalid-argument", /--provider must be one of claude, codex, kimi/],
      [["push", "x", "--jsn"], "unknown-option", /unknown option '--jsn' \(Did you mean --json\?\)/],
    ];
    for (const [args, code, message] of cases) {
      const run = await warden(args);
      assertOneLine(run, code);
      assert.match(run.stderr, message);
      assert.equal(run.stdout, "", "nothing on stdout without --json");
    }
  });

  it("with --json a usage error is also JSON on stdout; a --json after `--` is prompt text", async () => {
    const run = await warden(["invocations", "--status", "done", "--json"]);
    assertOneLine(run, "invalid-argument");
    assert.equal(jsonError(run).code, "invalid-argument");
    assert.match(jsonError(run).detail, /--status must be one of/);
    const prompt = await warden(["invoke", "--provider", "claude", "--", "--json"]);
    assertOneLine(prompt, "missing-mandatory-option-value");
    assert.equal(prompt.stdout, "");
  });

  it("a file that is not there names its path and the code file-not-found, as text and as JSON, journal verify too", async () => {
    const review = await warden(["reconcile", "api:operator", "0c4b0d52-7d4e-4f8a-9d36-1b2c3d4e5f60", "--review", missing, "--json"]);
    assertOneLine(review, "file-not-found");
    assert.ok(review.stderr.includes(`${missing}: no such file`));
    assert.deepEqual(jsonError(review), { code: "file-not-found", detail: `${missing}: no such file` });
    const journal = await warden(["journal", "verify", missing, "--key", keyFile, "--json"]);
    assertOneLine(journal, "file-not-found");
    assert.deepEqual(jsonError(journal), { code: "file-not-found", detail: `${missing}: no such file` });
    const key = await warden(["journal", "verify", missing, "--key", join(dir, "missing.pub")]);
    assertOneLine(key, "file-not-found");
  });

  it("journal verify --json answers a refusal as JSON like every other command", async () => {
    const run = await warden(["journal", "verify", dir, "--json"]);
    assertOneLine(run, "no-trusted-keys");
    assert.equal(jsonError(run).code, "no-trusted-keys");
  });

  it("a node URL that is not http(s) is refused with node-url-invalid", async () => {
    const [flag, env] = await Promise.all([warden(["bundles", "--url", "ftp://127.0.0.1:7420"]), warden(["bundles"], { WARDEN_URL: "file:///tmp/x", WARDEN_TOKEN: "t" })]);
    assertOneLine(flag, "node-url-invalid");
    assert.match(flag.stderr, /--url: "ftp:\/\/127\.0\.0\.1:7420" is not an http\(s\) URL/);
    assertOneLine(env, "node-url-invalid");
    assert.match(env.stderr, /WARDEN_URL/);
  });

  it("help of a command group shows how to reach its default subcommand's options; the list order is the node's", async () => {
    const [invocations, bundles, list] = await Promise.all([warden(["invocations", "--help"]), warden(["bundles", "--help"]), warden(["invocations", "list", "--help"])]);
    assert.equal(invocations.code, 0);
    assert.match(invocations.stdout, /warden invocations \[--status S\].*\[--json\]/);
    assert.equal(bundles.code, 0);
    assert.match(bundles.stdout, /warden bundles \[--json\]/);
    // The node pages by (scope, id) (the claim index), not by time.
    assert.doesNotMatch(list.stdout, /newest/);
    assert.match(list.stdout, /scope and id/);
  });

  it("as a process: a usage error exits 1 with the one line", async () => {
    const run = await wardenProcess(["push", "--bogus"]);
    assertOneLine(run, "unknown-option");
  });

  it("as a process: a reader that closes stdout first costs no stack trace; the exit code stays the command's", async () => {
    const child = spawn(process.execPath, [...cliCommand, "push", "--help"], { cwd: repo, env: cleanEnv(), stdio: ["ignore", "pipe", "pipe"] });
    // Closed before the CLI has even loaded: every write it makes to stdout meets EPIPE.
    child.stdout.destroy();
    let stderr = "";
    child.stderr.setEncoding("utf8").on("data", (s: string) => (stderr += s));
    const code = await new Promise<number | null>((done) => child.once("close", (c) => done(c)));
    assert.equal(stderr, "", "nothing on stderr");
    assert.equal(code, 0, "help was asked for and given");
  });
});
