/**
 * G11 on a disk an agent filled: the node's home and its workspace share a real file system (a
 * 16 MiB tmpfs in a user and mount namespace of the test's own, `unshare -rm`), a run's agent
 * (children/audit-agent.cjs, "fill-disk") fills it, and the node (children/full-home-node.ts)
 * is asked for more work. A new run is refused before anything is claimed (`507
 * capacity-exhausted`) while the disk has less room than `limits.runFreeBytes`, the queue's
 * runs wait instead of being taken, and both go on once there is room. The same holds for an
 * agent that takes every inode (`limits.runFreeFiles`).
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as path from "node:path";
import { fileURLToPath } from "node:url";
import { fixtureCommand } from "./audit-fixture.js";
import { tempDir } from "../support/temp.js";
import { ownMountsAvailable, runWithOwnMounts } from "../support/own-mounts.js";

const CHILD = fileURLToPath(new URL("./children/full-home-node.ts", import.meta.url));

test("a node whose disk an agent filled refuses new runs before their claim, holds its queue, and goes on once there is room", { skip: ownMountsAvailable ? false : "unshare -rm (user and mount namespaces) is not available here" }, async (t) => {
  const root = tempDir("runner-full-home", (fn) => t.after(fn));
  const wrapper = fixtureCommand(root);
  const disk = path.join(root, "disk");
  fs.mkdirSync(disk);
  const { status, stdout, stderr } = await runWithOwnMounts("full-home", 'mount -t tmpfs -o size=16m none "$1" || exit 90; exec "$2" --import tsx "$3" "$1" "$4" "$5"', [disk, process.execPath, CHILD, wrapper, "bytes"]);
  assert.equal(status, 0, stderr);
  const r = JSON.parse(stdout) as Record<string, unknown>;

  // The fill took the disk (what the end of the run freed aside). Whether the run's end could
  // still be recorded is the disk's last pages' to say (a write into space a file already has
  // needs no more): recorded, or unresolved; either way its journal verifies up to where the
  // disk stopped it, with no torn line.
  assert.ok((r.available_after_fill as number) < 64 * 1024, JSON.stringify(r));
  assert.ok(r.filled_reads === "unresolved" || r.filled_reads === "recorded", JSON.stringify(r));
  const journal = r.filled_journal as { ok: boolean; incomplete_tail: boolean };
  assert.deepEqual({ ok: journal.ok, incomplete_tail: journal.incomplete_tail }, { ok: true, incomplete_tail: false });

  // A new run: refused before its claim, in words that say what to do; its id stays free.
  const refused = r.refused as { code: string; status: number; message: string };
  assert.equal(refused.code, "capacity-exhausted");
  assert.equal(refused.status, 507);
  assert.match(refused.message, /^the node's disk has 0\.0 MiB available, less than the 4\.0 MiB a run needs to record itself \(limits\.runFreeBytes\); nothing was claimed/);
  assert.equal(r.refused_claimed, false);
  assert.equal((r.submit_full as { code: string }).code, "capacity-exhausted");

  // 2 MiB of room: still short of a run's 4 MiB. A submission is stored and waits: no claim.
  assert.equal(r.available_short, 2 * 1024 * 1024);
  assert.equal((r.refused_short as { code: string }).code, "capacity-exhausted");
  assert.equal(r.queued_while_short, "queued");
  assert.equal(r.queued_claimed_while_short, false);

  // Room again: the queued run is taken and recorded, and a new run is too.
  assert.equal(r.queued_after, "recorded");
  assert.equal(r.after, "recorded");
  // The namespace's mount went with it: the directory underneath was never written.
  assert.deepEqual(fs.readdirSync(disk), []);
});

test("a node whose inodes an agent took refuses new runs before their claim, and goes on once its files are gone", { skip: ownMountsAvailable ? false : "unshare -rm (user and mount namespaces) is not available here" }, async (t) => {
  const root = tempDir("runner-full-home", (fn) => t.after(fn));
  const wrapper = fixtureCommand(root);
  const disk = path.join(root, "disk");
  fs.mkdirSync(disk);
  // 400 inodes, of which the node's home takes some: the agent takes the rest, bytes stay free.
  const { status, stdout, stderr } = await runWithOwnMounts("full-home-files", 'mount -t tmpfs -o size=16m,nr_inodes=400 none "$1" || exit 90; exec "$2" --import tsx "$3" "$1" "$4" files', [disk, process.execPath, CHILD, wrapper]);
  assert.equal(status, 0, stderr);
  const r = JSON.parse(stdout) as { filled: string; free_files: number; refused: { code: string; status: number; message: string }; after: string };
  assert.ok(r.free_files < 64, JSON.stringify(r));
  assert.equal(r.refused.code, "capacity-exhausted");
  assert.equal(r.refused.status, 507);
  assert.match(r.refused.message, /^the node's disk has \d+ free inodes \(files\), fewer than the 64 a run needs to record itself \(limits\.runFreeFiles\); nothing was claimed/);
  assert.equal(r.after, "recorded");
  assert.deepEqual(fs.readdirSync(disk), []);
});
