import { test, describe, before, after } from "node:test";
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import {
  ensurePrivateDirSync,
  checkPrivateDirSync,
  openPrivateFile,
  readPrivateFile,
  readPrivateFileSync,
  publishNewFile,
  publishNewFileSync,
  auditPrivateTreeSync,
  createPrivateFile,
  FileLock,
} from "../../src/storage/index.js";
import { UnsafeStorageError, LimitError } from "../../src/core/errors.js";

const isRoot = typeof process.geteuid === "function" && process.geteuid() === 0;

/** Snapshot of a tree (names, modes, sizes, link targets, contents) to prove nothing changed. */
function snapshot(root: string): string {
  const out: string[] = [];
  const walk = (dir: string): void => {
    for (const name of fs.readdirSync(dir).sort()) {
      const p = path.join(dir, name);
      const st = fs.lstatSync(p);
      const rel = path.relative(root, p);
      if (st.isSymbolicLink()) out.push(`${rel} -> ${fs.readlinkSync(p)}`);
      else if (st.isDirectory()) {
        out.push(`${rel}/ ${(st.mode & 0o7777).toString(8)} ${st.uid}`);
        walk(p);
      } else out.push(`${rel} ${(st.mode & 0o7777).toString(8)} ${st.uid} ${st.nlink} ${fs.readFileSync(p, "hex")}`);
    }
  };
  walk(root);
  return out.join("\n");
}

let base: string;
before(() => {
  base = fs.mkdtempSync(path.join(os.tmpdir(), "warden-storage-"));
});
after(() => {
  fs.rmSync(base, { recursive: true, force: true });
});

function freshRoot(label: string): string {
  const root = path.join(base, label);
  ensurePrivateDirSync(root, { create: true });
  return root;
}

function assertUnsafe(fn: () => unknown, code: string, pathIncludes: string): void {
  assert.throws(fn, (error: unknown) => {
    assert.ok(error instanceof UnsafeStorageError, `expected UnsafeStorageError, got ${String(error)}`);
    assert.equal(error.code, code);
    assert.ok(error.path.includes(pathIncludes), `error names ${error.path}, expected ${pathIncludes}`);
    assert.ok(error.message.includes(error.path));
    return true;
  });
}

async function assertUnsafeAsync(fn: () => Promise<unknown>, code: string, pathIncludes: string): Promise<void> {
  await assert.rejects(fn, (error: unknown) => {
    assert.ok(error instanceof UnsafeStorageError, `expected UnsafeStorageError, got ${String(error)}`);
    assert.equal(error.code, code);
    assert.ok(error.path.includes(pathIncludes));
    return true;
  });
}

describe("private directories", () => {
  test("created 0700 regardless of umask, and validated", () => {
    const old = process.umask(0o022);
    try {
      const dir = path.join(base, "made");
      ensurePrivateDirSync(dir, { create: true });
      assert.equal(fs.statSync(dir).mode & 0o777, 0o700);
      checkPrivateDirSync(dir);
    } finally {
      process.umask(old);
    }
  });

  test("a 0755 directory is refused and left 0755", () => {
    const dir = path.join(base, "loose");
    fs.mkdirSync(dir, { mode: 0o755 });
    fs.chmodSync(dir, 0o755);
    assertUnsafe(() => ensurePrivateDirSync(dir, { create: true }), "unsafe-storage-mode", dir);
    assert.equal(fs.statSync(dir).mode & 0o777, 0o755);
  });

  test("a symlinked directory is refused, the link and its target untouched", () => {
    const target = freshRoot("real-target");
    const link = path.join(base, "linked-dir");
    fs.symlinkSync(target, link);
    assertUnsafe(() => ensurePrivateDirSync(link, { create: true }), "unsafe-storage-symlink", link);
    assert.equal(fs.readlinkSync(link), target);
  });

  test("a directory owned by another user is refused", { skip: !isRoot && "chown needs root" }, () => {
    const dir = path.join(base, "foreign-dir");
    fs.mkdirSync(dir, { mode: 0o700 });
    fs.chownSync(dir, 65534, 65534);
    assertUnsafe(() => checkPrivateDirSync(dir), "unsafe-storage-owner", dir);
    assert.equal(fs.statSync(dir).uid, 65534);
  });
});

describe("private files", () => {
  test("a valid private file opens and reads", async () => {
    const root = freshRoot("valid");
    const file = path.join(root, "ok");
    assert.equal(await publishNewFile(file, "hello"), true);
    assert.equal(fs.statSync(file).mode & 0o777, 0o600);
    assert.equal((await readPrivateFile(file, 100)).toString(), "hello");
  });

  test("a planted symlink is refused (O_NOFOLLOW) and neither link nor target changes", async () => {
    const root = freshRoot("symlink");
    const target = path.join(root, "secret");
    fs.writeFileSync(target, "do not touch", { mode: 0o600 });
    const link = path.join(root, "state");
    fs.symlinkSync(target, link);
    const before = snapshot(root);
    await assertUnsafeAsync(() => openPrivateFile(link, "readwrite"), "unsafe-storage-symlink", link);
    assertUnsafe(() => readPrivateFileSync(link, 100), "unsafe-storage-symlink", link);
    await assertUnsafeAsync(() => createPrivateFile(link), "unsafe-storage-symlink", link);
    assert.equal(snapshot(root), before);
  });

  test("a hard link is refused and left in place", async () => {
    const root = freshRoot("hardlink");
    const file = path.join(root, "state");
    fs.writeFileSync(file, "x", { mode: 0o600 });
    fs.linkSync(file, path.join(root, "second-name"));
    const before = snapshot(root);
    await assertUnsafeAsync(() => readPrivateFile(file, 100), "unsafe-storage-hard-link", file);
    assert.equal(snapshot(root), before);
  });

  test("a 0644 file is refused and keeps its mode", async () => {
    const root = freshRoot("mode");
    const file = path.join(root, "state");
    fs.writeFileSync(file, "x");
    fs.chmodSync(file, 0o644);
    const before = snapshot(root);
    await assertUnsafeAsync(() => readPrivateFile(file, 100), "unsafe-storage-mode", file);
    assert.equal(snapshot(root), before);
  });

  test("a file owned by another user is refused", { skip: !isRoot && "chown needs root" }, async () => {
    const root = freshRoot("owner");
    const file = path.join(root, "state");
    fs.writeFileSync(file, "x", { mode: 0o600 });
    fs.chownSync(file, 65534, 65534);
    const before = snapshot(root);
    await assertUnsafeAsync(() => readPrivateFile(file, 100), "unsafe-storage-owner", file);
    assert.equal(snapshot(root), before);
  });

  test("a fifo where a file should be is refused without blocking", async () => {
    const root = freshRoot("fifo");
    const fifo = path.join(root, "state");
    const { execFileSync } = await import("node:child_process");
    execFileSync("mkfifo", ["-m", "600", fifo]);
    // openPrivateFile opens read-only non-blocking? A FIFO open blocks without a writer, so the
    // auditor (lstat-based) is what must catch it before any open.
    assertUnsafe(() => auditPrivateTreeSync(root), "unsafe-storage-not-regular", fifo);
  });

  test("a file over its size bound is refused with a limit error", async () => {
    const root = freshRoot("size");
    const file = path.join(root, "big");
    await publishNewFile(file, Buffer.alloc(101));
    await assert.rejects(() => readPrivateFile(file, 100), (e: unknown) => e instanceof LimitError && e.code === "file-too-large");
  });
});

describe("durable create-new publication", () => {
  test("never overwrites an existing target and leaves no temp file", async () => {
    const root = freshRoot("publish");
    const file = path.join(root, "record");
    assert.equal(await publishNewFile(file, "first"), true);
    assert.equal(await publishNewFile(file, "second"), false);
    assert.equal(publishNewFileSync(file, "third"), false);
    assert.equal(fs.readFileSync(file, "utf8"), "first");
    assert.deepEqual(fs.readdirSync(root), ["record"]);
    assert.equal(fs.statSync(file).nlink, 1);
  });

  test("concurrent publishers of one name: exactly one wins", async () => {
    const root = freshRoot("race");
    const file = path.join(root, "record");
    const results = await Promise.all(Array.from({ length: 16 }, (_, i) => publishNewFile(file, `v${i}`)));
    assert.equal(results.filter(Boolean).length, 1);
    const winner = results.indexOf(true);
    assert.equal(fs.readFileSync(file, "utf8"), `v${winner}`);
    assert.deepEqual(fs.readdirSync(root), ["record"]);
  });

  test("publishing through a symlinked target name is refused and the link target is untouched", async () => {
    const root = freshRoot("publish-link");
    const outside = path.join(base, "outside-target");
    fs.writeFileSync(outside, "outside", { mode: 0o600 });
    const link = path.join(root, "record");
    fs.symlinkSync(outside, link);
    assert.equal(await publishNewFile(link, "attack"), false);
    assert.equal(fs.readFileSync(outside, "utf8"), "outside");
    assert.equal(fs.readlinkSync(link), outside);
  });
});

describe("tree audit", () => {
  test("names the first offender and changes nothing", () => {
    const root = freshRoot("audit");
    ensurePrivateDirSync(path.join(root, "sub"), { create: true });
    fs.writeFileSync(path.join(root, "sub", "good"), "g", { mode: 0o600 });
    fs.writeFileSync(path.join(root, "sub", "loose"), "l", { mode: 0o644 });
    fs.chmodSync(path.join(root, "sub", "loose"), 0o644);
    const before = snapshot(root);
    assertUnsafe(() => auditPrivateTreeSync(root), "unsafe-storage-mode", "loose");
    assert.equal(snapshot(root), before);
  });

  test("an entry another process removes mid-audit is skipped, not an error", () => {
    const root = freshRoot("audit-vanishing");
    for (const name of ["a.lock", "b.lock"]) fs.writeFileSync(path.join(root, name), "", { mode: 0o600 });
    const seen: string[] = [];
    // Whichever entry the walk reaches first removes the other, as a concurrent opener renaming its
    // pending lock file would, after readdir already listed it.
    auditPrivateTreeSync(root, (rel) => {
      seen.push(rel);
      for (const other of ["a.lock", "b.lock"]) if (other !== rel) fs.rmSync(path.join(root, other), { force: true });
      return undefined;
    });
    assert.equal(seen.length, 1);
  });

  test("refuses names the owner does not recognise", () => {
    const root = freshRoot("audit-names");
    fs.writeFileSync(path.join(root, "stray"), "s", { mode: 0o600 });
    assertUnsafe(
      () => auditPrivateTreeSync(root, (rel) => (rel === "stray" ? "not a name warden writes" : undefined)),
      "unsafe-storage-name",
      "stray",
    );
  });
});

describe("flock", () => {
  test("exclusive, visible to probes, released on release()", () => {
    const root = freshRoot("lock");
    const p = path.join(root, "owner.lock");
    const a = FileLock.tryAcquire(p);
    assert.ok(a);
    assert.equal(FileLock.tryAcquire(p), undefined);
    assert.equal(FileLock.isFree(p), false);
    a.release();
    assert.equal(FileLock.isFree(p), true);
    const b = FileLock.tryAcquire(p);
    assert.ok(b);
    b.release();
  });

  test("a dead process releases its lock (kill -9)", async () => {
    const root = freshRoot("lock-dead");
    const p = path.join(root, "owner.lock");
    const { spawn } = await import("node:child_process");
    const lockModule = path.resolve("src/storage/lock.ts");
    const script = `import { FileLock } from ${JSON.stringify(lockModule)};
      const l = FileLock.tryAcquire(${JSON.stringify(p)}); process.stdout.write(l ? "held\\n" : "busy\\n");
      setInterval(() => {}, 1000);`;
    const child = spawn(process.execPath, ["--import", "tsx", "--input-type=module", "-e", script], { stdio: ["ignore", "pipe", "inherit"] });
    const first = await new Promise<string>((resolve) => child.stdout.once("data", (d: Buffer) => resolve(d.toString())));
    assert.equal(first.trim(), "held");
    assert.equal(FileLock.isFree(p), false);
    assert.equal(FileLock.tryAcquire(p), undefined);
    child.kill("SIGKILL");
    await new Promise((resolve) => child.once("exit", resolve));
    assert.equal(FileLock.isFree(p), true);
  });

  test("a symlinked lock file is refused", () => {
    const root = freshRoot("lock-link");
    const target = path.join(root, "real");
    fs.writeFileSync(target, "", { mode: 0o600 });
    const p = path.join(root, "owner.lock");
    fs.symlinkSync(target, p);
    assert.throws(() => FileLock.tryAcquire(p), (e: unknown) => e instanceof UnsafeStorageError && e.code === "unsafe-storage-symlink");
  });
});
