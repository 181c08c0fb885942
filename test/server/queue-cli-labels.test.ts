/**
 * CLI versions as queue labels (DESIGN.md "Queued invocations"): a node reads, once at start, the
 * version of each provider's CLI from the npm package whose executable it is (the pinned CLIs),
 * and offers it as the label `provider.<name>.version`. A submission that requires a version no
 * node has waits, and expires at its deadline, never run; one that requires the node's runs.
 */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as path from "node:path";
import { randomUUID } from "node:crypto";
import { createRequire } from "node:module";
import { OPERATOR, OBSERVER, json, openTestNode } from "../support/app-node.js";
import { fixtureAgents } from "../support/node.js";
import { tempDir } from "../support/temp.js";
import { waitFor } from "../support/wait.js";
import { cliVersionOf } from "../../src/providers/cli-version.js";
import { PINNED_BIN_DIR } from "../../src/runner/command-path.js";

const VERSION = "9.8.7-fixture.1";

/** An npm package as `npm install` lays one out, whose `bin` is a wrapper of the fixture claude. */
function fixturePackage(root: string): string {
  const pkg = path.join(root, "node_modules", "fixture-claude");
  fs.mkdirSync(path.join(pkg, "bin"), { recursive: true });
  fs.writeFileSync(path.join(pkg, "package.json"), JSON.stringify({ name: "fixture-claude", version: VERSION, bin: { claude: "bin/claude" } }));
  const bin = path.join(pkg, "bin", "claude");
  fs.writeFileSync(bin, `#!/bin/sh\nexec ${JSON.stringify(process.execPath)} ${JSON.stringify(path.join(fixtureAgents, "claude.mjs"))} "$@"\n`, { mode: 0o755 });
  // Linked as npm links it: the node finds the link and reads the package it points into.
  fs.mkdirSync(path.join(root, "node_modules", ".bin"));
  fs.symlinkSync("../fixture-claude/bin/claude", path.join(root, "node_modules", ".bin", "claude"));
  return path.join(root, "node_modules", ".bin", "claude");
}

describe("CLI versions as queue labels", () => {
  it("the version read is the package's that installed the executable: the pinned CLIs', and none for a script outside a package's bin", () => {
    const require = createRequire(import.meta.url);
    for (const [bin, pkg] of [["claude", "@anthropic-ai/claude-code"], ["codex", "@openai/codex"]] as const) {
      const declared = (require(`${pkg}/package.json`) as { version: string }).version;
      assert.equal(cliVersionOf(path.join(PINNED_BIN_DIR!, bin)), declared, bin);
    }
    // Under warden's own package, but not one of its bins.
    assert.equal(cliVersionOf(path.join(fixtureAgents, "claude.mjs")), undefined);
    assert.equal(cliVersionOf(path.join(fixtureAgents, "no-such-agent")), undefined);
  });

  it("a run requiring a CLI version no node has stays queued and expires at its deadline; one requiring the node's version runs", async (t) => {
    const root = tempDir("queue-cli-labels");
    const node = await openTestNode(root, { warden: { providers: { claude: { command: fixturePackage(root) } }, queue: { slots: 2 } } });
    t.after(async () => {
      await node.close();
      fs.rmSync(root, { recursive: true, force: true });
    });
    const submit = (key: string, body: Record<string, unknown>) =>
      node.app.inject({ method: "POST", url: "/v1/invocations", headers: { ...OPERATOR, "idempotency-key": key, prefer: "respond-async" }, payload: body });
    const view = async (key: string): Promise<Record<string, unknown>> => json((await node.app.inject({ url: `/v1/invocations/api:alice/${key}`, headers: OBSERVER })).payload);
    const until = (key: string, status: string) =>
      waitFor(`invocation ${key} to become ${status}`, async () => {
        const v = await view(key);
        return v.status === status ? v : undefined;
      });

    const other = randomUUID();
    assert.equal((await submit(other, { provider: "claude", prompt: "wants another CLI", deadline_s: 2, labels: { "provider.claude.version": "0.0.1" } })).statusCode, 202);
    const matching = randomUUID();
    assert.equal((await submit(matching, { provider: "claude", prompt: "wants this CLI", labels: { "provider.claude.version": VERSION } })).statusCode, 202);
    await until(matching, "recorded");
    // Still waiting while the matching one ran and ended: no node offers 0.0.1.
    assert.equal((await view(other)).status, "queued");
    await until(other, "expired");
    const starts = fs.existsSync(path.join(root, "starts.log")) ? fs.readFileSync(path.join(root, "starts.log"), "utf8") : "";
    assert.ok(!starts.includes("wants another CLI"), "the run wanting another CLI version never started");
    assert.ok(starts.includes("wants this CLI"), `the matching run started: ${starts}`);
  });
});
