/**
 * What the docs say about Node.js versions and the pinned provider CLIs is what package.json and
 * the installed packages say (issue 27: docs/development.md named Claude Code 2.1.197 while
 * package.json pinned 2.1.328, which declares Node >= 22 while the README said >= 20).
 */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { openSync, readFileSync, readSync, closeSync, realpathSync } from "node:fs";
import { join } from "node:path";
import { repo } from "../support/node.js";

interface Pkg {
  version: string;
  engines?: { node?: string };
  devDependencies?: Record<string, string>;
}

const read = (path: string): string => readFileSync(join(repo, path), "utf8");
const pkg = (path: string): Pkg => JSON.parse(read(path)) as Pkg;
const warden = pkg("package.json");
const CLAUDE = "@anthropic-ai/claude-code";
const CODEX = "@openai/codex";

function firstBytes(path: string, n: number): Buffer {
  const fd = openSync(path, "r");
  try {
    const buf = Buffer.alloc(n);
    readSync(fd, buf, 0, n, 0);
    return buf;
  } finally {
    closeSync(fd);
  }
}

describe("docs: Node.js versions and the pinned CLIs", () => {
  const minimum = /^>=(\d+)$/.exec(warden.engines?.node ?? "")?.[1];

  it("the README and docs/development.md name the Node.js range package.json declares, and this Node is in it", () => {
    assert.ok(minimum !== undefined, `package.json engines.node is ${JSON.stringify(warden.engines?.node)}, not ">=N"`);
    assert.ok(read("README.md").includes(`Node.js ≥ ${minimum}`), `README.md does not say Node.js ≥ ${minimum}`);
    const dev = read("docs/development.md");
    assert.ok(dev.includes(`Node.js ${minimum} or later`) && dev.includes(`supports Node.js ${minimum} and later`), "docs/development.md does not name the range");
    assert.ok(dev.includes(`"engines": {"node": "${warden.engines!.node}"}`));
    assert.ok(Number(process.versions.node.split(".")[0]) >= Number(minimum), `the tests run on Node ${process.versions.node}, outside the range`);
  });

  it("the docs name each CLI's pinned version, installed as pinned, with the Node range it declares", () => {
    const dev = read("docs/development.md");
    const providers = read("docs/providers.md");
    for (const [name, label] of [[CLAUDE, "Claude Code"], [CODEX, "Codex"]] as const) {
      const pinned = warden.devDependencies?.[name];
      assert.ok(pinned !== undefined && /^\d+\.\d+\.\d+$/.test(pinned), `${name} is pinned exactly in devDependencies (${pinned})`);
      const installed = pkg(join("node_modules", name, "package.json"));
      assert.equal(installed.version, pinned, `node_modules holds ${name} ${installed.version}: run npm ci`);
      assert.ok(dev.includes(`\`${name}\` (${pinned})`), `docs/development.md does not name ${name} (${pinned})`);
      assert.ok(dev.includes(`${label} ${pinned} declares \`"node": "${installed.engines?.node}"\``), `docs/development.md does not give ${label}'s declared range ${installed.engines?.node}`);
      assert.ok(providers.includes(`${label} ${pinned}`), `docs/providers.md does not name ${label} ${pinned}`);
    }
    // No other version of either CLI is named anywhere in the docs.
    for (const file of ["README.md", "docs/development.md", "docs/providers.md", "docs/DESIGN.md"]) {
      for (const m of read(file).matchAll(/(Claude Code|Codex|claude-code`|codex`) \(?(\d+\.\d+\.\d+)/g)) {
        const name = m[1]!.startsWith("Claude") || m[1]!.startsWith("claude") ? CLAUDE : CODEX;
        assert.equal(m[2], warden.devDependencies?.[name], `${file} names ${m[0]}`);
      }
    }
  });

  it("the pinned claude is a native executable (why its Node >= 22 does not bind warden) and codex a Node launcher", () => {
    const claude = realpathSync(join(repo, "node_modules", ".bin", "claude"));
    assert.deepEqual([...firstBytes(claude, 4)], [0x7f, 0x45, 0x4c, 0x46], `${claude} is not an ELF executable`);
    const codex = realpathSync(join(repo, "node_modules", ".bin", "codex"));
    assert.match(firstBytes(codex, 64).toString("utf8"), /^#!\/usr\/bin\/env node\n/);
  });
});
