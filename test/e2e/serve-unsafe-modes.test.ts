/**
 * `warden serve` on a home an operator made by hand under umask 022 (issue 27: the home 0755 and
 * warden.json 0644 took two restarts, one unsafe-storage-mode each): one start names every path
 * that is not private, in one line, and changes nothing.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { chmodSync, mkdirSync, readdirSync, rmSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { warden } from "../support/node.js";
import { tempDir } from "../support/temp.js";

describe("serve: every unsafe mode of the home at once", () => {
  let dir: string;
  let home: string;

  before(() => {
    dir = tempDir("unsafe-modes");
    home = join(dir, "home");
    mkdirSync(home);
    chmodSync(home, 0o755);
    writeFileSync(join(home, "warden.json"), JSON.stringify({ logLevel: "warn" }));
    chmodSync(join(home, "warden.json"), 0o644);
    writeFileSync(join(home, "tokens.json"), JSON.stringify({ tokens: [] }));
    chmodSync(join(home, "tokens.json"), 0o640);
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  const serve = () => warden(["serve", "--home", home, "--listen", "127.0.0.1:0"]);

  it("names the home and each file in one error, and leaves them as they were", async () => {
    const run = await serve();
    assert.equal(run.code, 1, run.stdout + run.stderr);
    const lines = run.stderr.split("\n").filter(Boolean);
    assert.equal(lines.length, 1, run.stderr);
    assert.match(lines[0]!, /^warden: unsafe storage at .*\(unsafe-storage-mode\)$/);
    assert.ok(lines[0]!.includes(`${home}: mode 755 grants group/other access (want 700)`), lines[0]);
    assert.ok(lines[0]!.includes(`at ${join(home, "warden.json")}: mode 644 grants group/other access (want 600)`), lines[0]);
    assert.ok(lines[0]!.includes(`at ${join(home, "tokens.json")}: mode 640 grants group/other access (want 600)`), lines[0]);
    assert.deepEqual(readdirSync(home).sort(), ["tokens.json", "warden.json"]);
    assert.equal(statSync(home).mode & 0o777, 0o755);
    assert.equal(statSync(join(home, "warden.json")).mode & 0o777, 0o644);

    // One fixed: the one left is named alone.
    chmodSync(home, 0o700);
    chmodSync(join(home, "tokens.json"), 0o600);
    const again = await serve();
    assert.equal(again.code, 1);
    assert.equal(again.stderr, `warden: unsafe storage at ${join(home, "warden.json")}: mode 644 grants group/other access (want 600) (unsafe-storage-mode)\n`);
  });

  it("problems of different kinds: one line names each with its code (unsafe-storage-several)", async () => {
    const other = join(dir, "other");
    mkdirSync(other, { mode: 0o700 });
    writeFileSync(join(other, "warden.json"), "{}", { mode: 0o644 });
    chmodSync(join(other, "warden.json"), 0o644);
    writeFileSync(join(dir, "elsewhere"), "x", { mode: 0o600 });
    symlinkSync(join(dir, "elsewhere"), join(other, "token"));
    const run = await warden(["serve", "--home", other, "--listen", "127.0.0.1:0"]);
    assert.equal(run.code, 1);
    assert.equal(
      run.stderr,
      `warden: unsafe storage at ${join(other, "warden.json")}: mode 644 grants group/other access (want 600) (unsafe-storage-mode); ` +
        `at ${join(other, "token")}: is a symbolic link (unsafe-storage-symlink) (unsafe-storage-several)\n`,
    );
  });
});
