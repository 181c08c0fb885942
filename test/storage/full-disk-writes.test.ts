/**
 * An agent can fill the disk its workspace shares with the node's home (the workspace is on the
 * node's disk, and a confined agent writes there freely: session 25 did it with the real Claude
 * Code). The node's own writers then meet a full disk mid-run, on a real file system: a 1 MiB tmpfs
 * mounted in a user and mount namespace of its own (`unshare -rm`), so no privilege is needed and
 * nothing outside the test sees it. The child (children/full-disk-writes.ts) fills it and reports.
 */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import * as fs from "node:fs";
import { fileURLToPath } from "node:url";
import { tempDir } from "../support/temp.js";
import { ownMountsAvailable, runWithOwnMounts } from "../support/own-mounts.js";

const CHILD = fileURLToPath(new URL("./children/full-disk-writes.ts", import.meta.url));

interface Report {
  journal: { room: number; before: number; after: number; refused: string; again: string; ok: boolean; entries: number; incomplete_tail: boolean; first_error: string | null };
  capture: { summary: { sha256?: string; bytes?: number; stored_bytes?: number; store_error?: string; thrown?: string }; printed_sha256: string; stored_bytes: number; stored_is_prefix: boolean };
}

describe("the node's writers on a disk an agent filled", { skip: ownMountsAvailable ? false : "unshare -rm (user and mount namespaces) is not available here" }, () => {
  let report: Report;

  it("the child fills a tmpfs of its own and reports what the writers left", async (t) => {
    const mountpoint = tempDir("full-disk-writes", (fn) => t.after(fn));
    const { status, stdout, stderr } = await runWithOwnMounts("full-disk-writes", 'mount -t tmpfs -o size=1m none "$1" || exit 90; exec "$2" --import tsx "$3" "$1"', [mountpoint, process.execPath, CHILD]);
    assert.equal(status, 0, stderr);
    report = JSON.parse(stdout) as Report;
    // The namespace's mount went with it: the directory underneath was never written.
    assert.deepEqual(fs.readdirSync(mountpoint), []);
  });

  it("a journal line the disk took only part of is cut back: the journal ends at its last whole line and verifies", () => {
    const j = report.journal;
    // The line (over 6,000 bytes) is longer than what the journal's last page had left.
    assert.ok(j.room > 0 && j.room < 6000, JSON.stringify(j));
    assert.equal(j.refused, "journal-append-failed");
    assert.equal(j.after, j.before, "the part the disk took is gone again: no torn line");
    assert.deepEqual({ ok: j.ok, entries: j.entries, incomplete_tail: j.incomplete_tail, first_error: j.first_error }, { ok: true, entries: 1, incomplete_tail: false, first_error: null });
    // Nothing is written after a line that failed, even once there is room.
    assert.equal(j.again, "journal-writer-failed");
  });

  it("an output the disk refuses ends the file, not the capture: the digest is of every byte and the summary says why the file stopped", () => {
    const c = report.capture;
    assert.equal(c.summary.thrown, undefined, `the capture failed: ${JSON.stringify(c.summary)}`);
    assert.equal(c.summary.sha256, c.printed_sha256);
    assert.equal(c.summary.bytes, 256 * 1024);
    assert.equal(c.summary.store_error, "ENOSPC");
    assert.equal(c.summary.stored_bytes, c.stored_bytes, "stored_bytes is what the file holds");
    assert.ok(c.stored_bytes < 256 * 1024);
    assert.equal(c.stored_is_prefix, true);
  });
});
