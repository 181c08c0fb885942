/**
 * The compile digest cache (src/delivery/compile/digest-cache.ts): a second compile of an unchanged
 * tree takes every blob digest and the bundle digest from the cache and produces the same manifest;
 * a file rewritten with its size and mtime put back (what `touch -r` or rsync -t leave) is hashed
 * again, because its ctime moved; a file written moments before its read is never remembered.
 */
import { after, describe, it } from "node:test";
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { sha256Digest } from "../../src/core/digest.js";
import { compileDirectory, type CompileOptions } from "../../src/delivery/compile/directory.js";
import { DigestCache } from "../../src/delivery/compile/digest-cache.js";
import { bundleDigestOf } from "../../src/delivery/manifest-types.js";
import { compileForPush } from "../../src/client/push.js";
import { writeRandomBundle } from "../client/bundle-gen.js";

const scratch = fs.mkdtempSync(path.join(os.tmpdir(), "warden-digest-cache-"));
after(() => fs.rmSync(scratch, { recursive: true, force: true }));
let counter = 0;

function tree(files = 6): string {
  const dir = path.join(scratch, `tree-${++counter}`);
  writeRandomBundle(dir, files, 4096);
  return dir;
}

/** A clock a minute ahead: every file of the test counts as old enough to be remembered. */
const LATER = (): bigint => BigInt(Date.now() + 60_000) * 1_000_000n;

function options(cache: DigestCache): CompileOptions {
  return { bundleId: "cached", revision: "r1", keepContents: true, digestCache: cache };
}

describe("the compile digest cache", () => {
  it("reuses every digest of an unchanged tree and builds the same manifest", async () => {
    const dir = tree();
    const cache = new DigestCache({ nowNs: LATER });
    const first = await compileDirectory(dir, options(cache));
    assert.equal(cache.misses, 6);
    assert.equal(cache.hits, 0);
    const second = await compileDirectory(dir, options(cache));
    assert.equal(cache.hits, 6, "every file's digest came from the cache");
    assert.deepEqual(second.manifest, first.manifest);
    // And they are the digests of the bytes.
    const files = second.files.map((f) => ({ path: f.component.relative_path, content: fs.readFileSync(f.absolutePath) }));
    assert.equal(second.manifest.bundle_digest, bundleDigestOf(files));
    second.files.forEach((f, i) => assert.equal(f.component.blob.digest, sha256Digest(files[i]!.content)));
  });

  it("hashes again a file rewritten with the same size and its mtime put back (its ctime moved)", async () => {
    const dir = tree();
    const target = path.join(dir, "data", "f0002.bin");
    // A whole second, so that putting it back later restores it to the nanosecond.
    const WHEN = 1_700_000_000;
    fs.utimesSync(target, WHEN, WHEN);
    const cache = new DigestCache({ nowNs: LATER });
    const first = await compileDirectory(dir, options(cache));
    const before = fs.statSync(target, { bigint: true });
    const changed = fs.readFileSync(target);
    changed[100] = (changed[100]! + 1) % 256;
    // ctime has a clock tick's granularity: wait until a rewrite is sure to get a later one.
    const deadline = Date.now() + 50;
    while (Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 5));
    fs.writeFileSync(target, changed);
    fs.utimesSync(target, WHEN, WHEN);
    const now = fs.statSync(target, { bigint: true });
    assert.equal(now.mtimeNs, before.mtimeNs, "the mtime is back where it was, to the nanosecond");
    assert.equal(now.size, before.size);
    assert.equal(now.ino, before.ino);
    assert.notEqual(now.ctimeNs, before.ctimeNs);

    const second = await compileDirectory(dir, options(cache));
    const blob = second.files.find((f) => f.component.relative_path === "data/f0002.bin")!.component.blob;
    assert.equal(blob.digest, sha256Digest(changed), "the rewritten file's digest is its new content's");
    assert.notEqual(second.manifest.bundle_digest, first.manifest.bundle_digest);
    const files = second.files.map((f) => ({ path: f.component.relative_path, content: fs.readFileSync(f.absolutePath) }));
    assert.equal(second.manifest.bundle_digest, bundleDigestOf(files));
    assert.equal(cache.hits, 5, "the five untouched files were reused");
  });

  it("does not remember a file whose times are too recent to tell a later write apart", async () => {
    const dir = tree(3);
    const cache = new DigestCache(); // the real clock: the files were written just now
    await compileDirectory(dir, options(cache));
    await compileDirectory(dir, options(cache));
    assert.equal(cache.hits, 0);
    assert.equal(cache.misses, 6);
  });

  it("push's compile uses the cache it is given", async () => {
    const dir = tree(4);
    const cache = new DigestCache({ nowNs: LATER });
    const first = await compileForPush(dir, { digestCache: cache });
    const second = await compileForPush(dir, { digestCache: cache });
    assert.equal(cache.hits, 4);
    assert.deepEqual(second.manifest, first.manifest);
    const uncached = await compileForPush(dir, { digestCache: false });
    assert.deepEqual(uncached.manifest, first.manifest);
    assert.equal(cache.hits, 4, "digestCache: false leaves the cache alone");
  });
});
