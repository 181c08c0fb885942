/**
 * Inside an unprivileged user namespace (bubblewrap, Flatpak,
 * `unshare -r`, a rootless container with host directories mounted) the host's root is not
 * mapped, so `/` and `/tmp` show the overflow uid (65534) as their owner; checkAncestorsSync
 * refused every home there as unsafe-storage-ancestor-owner. Needs root here (to become an
 * unprivileged user with setpriv) and unshare; skipped otherwise.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import * as fs from "node:fs";
import { execFileSync, spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import { buildSync } from "esbuild";

const SECURE_FS = fileURLToPath(new URL("../../src/storage/secure-fs.ts", import.meta.url));
const AS_NOBODY = ["--reuid=65534", "--regid=65534", "--clear-groups"];

function usable(): boolean {
  if (process.geteuid?.() !== 0) return false;
  return spawnSync("setpriv", [...AS_NOBODY, "unshare", "-r", "true"]).status === 0;
}

test("a home of ours inside a user namespace is not refused for the host root's / and /tmp", { skip: !usable() && "needs root, setpriv and unshare" }, (t) => {
  const dir = `/tmp/warden-review-userns-${process.pid}`;
  execFileSync("setpriv", [...AS_NOBODY, "mkdir", "-m", "700", dir]);
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  // The unprivileged user may not reach the checkout (a clone under /root): it runs the module
  // bundled into its own directory (esbuild, which tsx brings), with no tsx and no repository.
  const bundle = `${dir}/secure-fs.mjs`;
  buildSync({ entryPoints: [SECURE_FS], bundle: true, platform: "node", format: "esm", outfile: bundle, logLevel: "silent" });
  const script =
    `const { checkAncestorsSync } = await import(${JSON.stringify(bundle)});` +
    `try { checkAncestorsSync(${JSON.stringify(`${dir}/.warden`)}); console.log("accepted"); } catch (e) { console.log(e.code, e.message); }`;
  const out = execFileSync("setpriv", [...AS_NOBODY, "unshare", "-r", process.execPath, "--input-type=module", "-e", script], {
    cwd: dir,
    env: { ...process.env, HOME: dir },
    encoding: "utf8",
  }).trim();
  assert.equal(out, "accepted");
});
