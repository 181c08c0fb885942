/**
 * G7's durability order of create-new publication, pinned by a mutation audit: a published file's
 * bytes are synced before its link(2) into place, and its directory is fsynced after. The calls
 * are observed on the real node:fs functions (each still runs): a crash cannot be simulated
 * in-process, but the order of the syscalls that make a crash harmless can be checked.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { createRequire, syncBuiltinESMExports } from "node:module";
import { sha256Digest } from "../../src/core/digest.js";
import { EmbeddedBlobStore } from "../../src/backends/embedded/delivery/delivery-blob-store.js";
import { DeliveryLayout } from "../../src/backends/embedded/delivery/delivery-layout.js";
import { ensurePrivateDirSync, publishNewFile } from "../../src/storage/secure-fs.js";

const require = createRequire(import.meta.url);
const fsModule = require("node:fs") as typeof import("node:fs");
const fspModule = require("node:fs/promises") as typeof import("node:fs/promises");

function pathOfFd(fd: number): string {
  return fs.readlinkSync(`/proc/self/fd/${fd}`);
}

/**
 * Runs `body` while recording, in order, every file sync (`sync <path>`) and link (`link <to>`)
 * made through node:fs, with `dir` stripped from the paths.
 */
async function recordDurability(dir: string, body: () => Promise<void>): Promise<string[]> {
  const events: string[] = [];
  const rel = (p: string): string => path.relative(dir, p) || ".";
  const probe = await fspModule.open(dir, fs.constants.O_RDONLY | fs.constants.O_DIRECTORY);
  const handleProto = Object.getPrototypeOf(probe) as { sync: () => Promise<void>; datasync: () => Promise<void> };
  await probe.close();
  const real = {
    fsync: fsModule.fsync,
    fdatasync: fsModule.fdatasync,
    fsyncSync: fsModule.fsyncSync,
    fdatasyncSync: fsModule.fdatasyncSync,
    link: fspModule.link,
    linkSync: fsModule.linkSync,
    handleSync: handleProto.sync,
    handleDatasync: handleProto.datasync,
  };
  const note = (fd: number): void => void events.push(`sync ${rel(pathOfFd(fd))}`);
  fsModule.fsync = ((fd: number, cb: fs.NoParamCallback) => (note(fd), real.fsync(fd, cb))) as typeof fs.fsync;
  fsModule.fdatasync = ((fd: number, cb: fs.NoParamCallback) => (note(fd), real.fdatasync(fd, cb))) as typeof fs.fdatasync;
  fsModule.fsyncSync = (fd: number) => (note(fd), real.fsyncSync(fd));
  fsModule.fdatasyncSync = (fd: number) => (note(fd), real.fdatasyncSync(fd));
  fspModule.link = async (from: fs.PathLike, to: fs.PathLike) => (events.push(`link ${rel(String(to))}`), real.link(from, to));
  fsModule.linkSync = (from: fs.PathLike, to: fs.PathLike) => (events.push(`link ${rel(String(to))}`), real.linkSync(from, to));
  handleProto.sync = function (this: { fd: number }) {
    note(this.fd);
    return real.handleSync.call(this);
  };
  handleProto.datasync = function (this: { fd: number }) {
    note(this.fd);
    return real.handleDatasync.call(this);
  };
  syncBuiltinESMExports();
  try {
    await body();
  } finally {
    Object.assign(fsModule, { fsync: real.fsync, fdatasync: real.fdatasync, fsyncSync: real.fsyncSync, fdatasyncSync: real.fdatasyncSync, linkSync: real.linkSync });
    fspModule.link = real.link;
    handleProto.sync = real.handleSync;
    handleProto.datasync = real.handleDatasync;
    syncBuiltinESMExports();
  }
  return events;
}

/** The temp file's sync, then its link to `target`, then the fsync of `target`'s directory. */
function assertPublishedDurably(events: readonly string[], target: string): void {
  const link = events.indexOf(`link ${target}`);
  assert.ok(link >= 0, `linked to ${target}: ${events.join(", ")}`);
  const tempSync = events.findIndex((e, i) => i < link && /^sync .*\.tmp-/.test(e));
  assert.ok(tempSync >= 0, `the temp file is synced before its link: ${events.join(", ")}`);
  const dir = path.dirname(target);
  assert.ok(events.slice(link + 1).includes(`sync ${dir}`), `${dir} is fsynced after the link: ${events.join(", ")}`);
}

test("publishNewFile syncs the temp file before linking it and fsyncs the directory after", async (t) => {
  const root = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), "warden-publish-")));
  t.after(() => fs.rmSync(root, { recursive: true, force: true }));
  const dir = path.join(root, "d");
  ensurePrivateDirSync(dir, { create: true });
  const events = await recordDurability(root, async () => {
    assert.equal(await publishNewFile(path.join(dir, "record.json"), "{}\n"), true);
  });
  assertPublishedDurably(events, "d/record.json");
});

test("a blob put into the embedded store is synced before its link and its shard fsynced after", async (t) => {
  const home = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), "warden-publish-")));
  t.after(() => fs.rmSync(home, { recursive: true, force: true }));
  const layout = new DeliveryLayout(home);
  ensurePrivateDirSync(layout.blobsDir, { create: true, recursive: true });
  const store = new EmbeddedBlobStore(layout);
  const bytes = new TextEncoder().encode("a blob that must survive a power loss once published");
  const ref = { digest: sha256Digest(bytes), byte_len: bytes.byteLength };
  const events = await recordDurability(home, async () => {
    assert.equal(await store.put(ref, bytes), true);
  });
  assertPublishedDurably(events, path.relative(home, layout.blobPath(ref.digest)));
});
