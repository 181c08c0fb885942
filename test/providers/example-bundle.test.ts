/**
 * examples/review-bundle materializes for every provider its README claims, and
 * `GET /v1/bundles/{id}/{rev}/providers` (what the console shows) says for each provider exactly
 * what a materialization answers: the files it writes, or the refusal's code.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as path from "node:path";
import { fileURLToPath } from "node:url";
import { compileDirectory } from "../../src/delivery/compile/directory.js";
import { PROVIDER_NAMES } from "../../src/providers/types.js";
import type { ProviderPlans } from "../../src/client/wire.js";
import { OPERATOR, OBSERVER, json, openTestNode, pushThroughApp, type TestNode } from "../support/app-node.js";
import { tempDir } from "../support/temp.js";

const EXAMPLE = fileURLToPath(new URL("../../examples/review-bundle/", import.meta.url));

/** Every file under `dir`, relative, sorted. */
function filesUnder(dir: string, prefix = ""): string[] {
  return fs
    .readdirSync(path.join(dir, prefix), { withFileTypes: true })
    .flatMap((e) => (e.isDirectory() ? filesUnder(dir, path.join(prefix, e.name)) : [path.join(prefix, e.name)]))
    .sort();
}

describe("examples/review-bundle", () => {
  let root: string;
  let node: TestNode;
  let revision: string;
  before(async () => {
    root = tempDir("example-bundle");
    node = await openTestNode(root);
    const compiled = await compileDirectory(EXAMPLE, { bundleId: "review-bundle", revision: "r1" });
    revision = (await pushThroughApp(node.app, compiled)).revision as string;
  });
  after(async () => {
    await node.close();
    fs.rmSync(root, { recursive: true, force: true });
  });

  it("materializes for each provider its README claims; the providers answer matches each materialization", async () => {
    const claimed = /^Materializes for: (.+)\.$/m.exec(fs.readFileSync(path.join(EXAMPLE, "README.md"), "utf8"))?.[1]?.split(", ");
    assert.deepEqual(claimed, ["claude", "codex"], "the example's README names the providers it is for");

    const answer = await node.app.inject({ url: `/v1/bundles/review-bundle/${revision}/providers`, headers: OBSERVER });
    assert.equal(answer.statusCode, 200, answer.payload);
    const plans = (json(answer.payload) as unknown as ProviderPlans).providers;
    assert.deepEqual(plans.map((p) => p.provider), [...PROVIDER_NAMES]);
    assert.deepEqual(plans.filter((p) => p.materializes).map((p) => p.provider), claimed);

    for (const plan of plans) {
      const made = await node.app.inject({ method: "POST", url: `/v1/bundles/review-bundle/${revision}/materializations`, headers: OPERATOR, payload: { provider: plan.provider } });
      if (!plan.materializes) {
        assert.equal(made.statusCode, 422, `${plan.provider}: ${made.payload}`);
        assert.equal(json(made.payload).code, plan.code, `${plan.provider}: the refusal the console shows is the one a materialization answers`);
        continue;
      }
      assert.equal(made.statusCode, 201, `${plan.provider}: ${made.payload}`);
      const tree = json(made.payload).root as string;
      // The planned files are exactly the files on disk.
      assert.deepEqual(filesUnder(tree), plan.files.map((f) => f.target).sort(), plan.provider);
      for (const f of plan.files) {
        if ("path" in f) assert.deepEqual(fs.readFileSync(path.join(tree, f.target)), fs.readFileSync(path.join(EXAMPLE, f.path)), f.target);
      }
      const session = json(made.payload).session as string;
      assert.equal((await node.app.inject({ method: "DELETE", url: `/v1/materializations/${session}`, headers: OPERATOR })).statusCode, 204);
    }
    const codex = plans.find((p) => p.provider === "codex");
    assert.ok(codex?.materializes);
    const config = codex.files.find((f) => f.target === "home/config.toml");
    assert.ok(config !== undefined && "generated" in config, "codex gets a generated config.toml");
    assert.ok(!codex.files.some((f) => "path" in f && (f.path === "README.md" || f.path === ".claude-plugin/plugin.json")), "codex leaves the README and the plugin manifest out");
    const kimi = plans.find((p) => p.provider === "kimi");
    assert.equal(kimi?.materializes === false ? kimi.code : undefined, "kimi-mcp-unsupported");
  });

  it("an unknown revision is a 404, not three refusals", async () => {
    const answer = await node.app.inject({ url: "/v1/bundles/review-bundle/000000000000/providers", headers: OBSERVER });
    assert.equal(answer.statusCode, 404, answer.payload);
  });
});
