/**
 * On Debian and Ubuntu (user-private groups, pam_umask with
 * USERGROUPS_ENAB: umask 002) every directory a user makes is group-writable, its group being the
 * user's own private group that nobody else is in. `warden serve`'s default home is ./.warden, so
 * starting it in such a checkout was refused as unsafe-storage-ancestor-writable, though no other
 * user can write there (Debian's OpenSSH accepts this case for StrictModes for the same reason).
 * A group-writable directory whose group has other users stays refused.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { checkAncestorsSync } from "../../src/storage/secure-fs.js";

const root = process.geteuid?.() === 0;

test("a home under a group-writable directory of the owner's private group is accepted", { skip: !root && "needs root to pick the group" }, (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "warden-review-upg-"));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const checkout = path.join(dir, "checkout");
  fs.mkdirSync(checkout);
  fs.chownSync(checkout, 0, 0); // root's own group: root is its only user here
  fs.chmodSync(checkout, 0o775);
  assert.doesNotThrow(() => checkAncestorsSync(path.join(checkout, ".warden")));
});

test("a home under a group-writable directory whose group another user is in is refused", { skip: !root && "needs root to pick the group" }, (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "warden-review-upg-"));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const shared = path.join(dir, "shared");
  fs.mkdirSync(shared);
  fs.chownSync(shared, 0, 1); // the group of user daemon (uid 1)
  fs.chmodSync(shared, 0o775);
  assert.throws(() => checkAncestorsSync(path.join(shared, ".warden")), { code: "unsafe-storage-ancestor-writable" });
});
