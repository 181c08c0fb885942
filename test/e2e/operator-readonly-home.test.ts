/**
 * `warden serve --home D` where D cannot be created because its file system is read-only (a
 * container with a read-only root file system, a home on the wrong mount): the start is refused
 * naming the read-only file system, not "no such file", which sends an operator looking for a
 * missing path. The file system is a tmpfs mounted read-only in a user and mount namespace of its
 * own (`unshare -rm`), so no privilege is needed and nothing outside the test sees it.
 */
import { after, describe, it } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import { cliEntry } from "../support/node.js";
import { READY_MS } from "../support/wait.js";
import { tempDir } from "../support/temp.js";

const SCRIPT = `
mount -t tmpfs -o ro,size=1m none "$1" || exit 90
"$2" --import tsx "$3" serve --home "$4" --listen 127.0.0.1:0
`;

function serveOnReadOnly(mountPoint: string, home: string): { status: number | null; stderr: string } {
  const run = spawnSync("unshare", ["-rm", "bash", "-c", SCRIPT, "serve-ro", mountPoint, process.execPath, cliEntry, home], {
    encoding: "utf8",
    timeout: READY_MS,
    env: { ...process.env, WARDEN_HOME: "", WARDEN_LOG_LEVEL: "warn" },
  });
  return { status: run.status, stderr: run.stderr };
}

describe("operator: a home on a read-only file system", () => {
  const scratch = tempDir("operator-ro");
  after(() => fs.rmSync(scratch, { recursive: true, force: true }));

  for (const [label, sub] of [
    ["the home itself", "home"],
    ["the home and a parent", "srv/warden/home"],
  ] as const) {
    it(`is refused naming the read-only file system when ${label} must be created`, (t) => {
      const mountPoint = fs.mkdtempSync(`${scratch}/mnt-`);
      const run = serveOnReadOnly(mountPoint, `${mountPoint}/${sub}`);
      if (run.status === 90) {
        t.skip("cannot mount a tmpfs in a user namespace here");
        return;
      }
      assert.equal(run.status, 1, run.stderr);
      const lines = run.stderr.trimEnd().split("\n");
      assert.equal(lines.length, 1, run.stderr);
      assert.match(lines[0]!, /^warden: .*read-only file system.*\(erofs\)$/i);
      assert.doesNotMatch(lines[0]!, /no such file/);
    });
  }
});
