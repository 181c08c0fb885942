/**
 * A provider the node was not configured for never launches (issue 27: on the walkthrough's node,
 * only `claude` configured, `invoke --provider codex` started the real pinned Codex with no key,
 * which retried until shutdown). Here a `codex` is on the agents' PATH — the fixture, so a
 * regression shows as a start in its starts file instead of a CLI retrying a model forever.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { existsSync, mkdirSync, readFileSync, rmSync, symlinkSync } from "node:fs";
import { randomUUID } from "node:crypto";
import { delimiter, join } from "node:path";
import { fixtureAgents, httpCall, removeHome, startNode, warden, type NodeProcess } from "../support/node.js";
import { tempDir } from "../support/temp.js";

const TOKEN = "not-configured-operator-token-0123456789abcdef";

describe("a provider the node was not configured for", () => {
  let dir: string;
  let node: NodeProcess;
  let startsFile: string;
  const cliEnv = (): Record<string, string> => ({ WARDEN_URL: node.url, WARDEN_TOKEN: TOKEN });

  before(async () => {
    dir = tempDir("not-configured");
    const bin = join(dir, "bin");
    mkdirSync(bin);
    symlinkSync(join(fixtureAgents, "codex.mjs"), join(bin, "codex"));
    mkdirSync(join(dir, "ws"));
    startsFile = join(dir, "starts.log");
    node = await startNode({
      args: ["--provider", `claude=${join(fixtureAgents, "claude.mjs")}`, "--workspace", `main=${join(dir, "ws")}`, "--log-level", "warn"],
      // Whatever the machine running the tests holds: no key of codex's own.
      env: { WARDEN_TOKEN: TOKEN, PATH: `${bin}${delimiter}${process.env.PATH ?? ""}`, WARDEN_FIXTURE_STARTS: startsFile, CODEX_API_KEY: "", OPENAI_API_KEY: "" },
    });
  });
  after(async () => {
    await node?.stop();
    removeHome(node);
    rmSync(dir, { recursive: true, force: true });
  });

  it("is refused before the claim with provider-not-configured, saying what to configure; the configured one runs", async () => {
    const id = randomUUID();
    const run = await warden(["invoke", "--id", id, "--provider", "codex", "--wait", "60", "--", "hello"], { env: cliEnv() });
    assert.equal(run.code, 1, run.stdout + run.stderr);
    assert.match(run.stderr, /^warden: codex: this node is not configured for codex: .*providers\.codex\.model.*--provider codex=COMMAND.*CODEX_API_KEY or OPENAI_API_KEY.* \(provider-not-configured\)\n$/);
    const http = await httpCall(node.url, TOKEN, "POST", "/v1/invocations", { headers: { "idempotency-key": randomUUID() }, body: { provider: "codex", prompt: "hello" } });
    assert.equal(http.status, 503, http.text);
    assert.equal(http.body.code, "provider-not-configured");
    // Nothing claimed, nothing started: the id is free for once the operator configures codex.
    const shown = await httpCall(node.url, TOKEN, "GET", `/v1/invocations/api:operator/${id}`);
    assert.equal(shown.status, 404, shown.text);
    assert.equal(existsSync(startsFile) ? readFileSync(startsFile, "utf8") : "", "", "an agent was started");

    const claude = await warden(["invoke", "--id", randomUUID(), "--provider", "claude", "--wait", "60", "--", "hello"], { env: cliEnv() });
    assert.equal(claude.code, 0, claude.stdout + claude.stderr);
    assert.equal(readFileSync(startsFile, "utf8").split("\n").filter(Boolean).length, 1);
  });
});
