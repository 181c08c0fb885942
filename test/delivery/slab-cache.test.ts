/**
 * The compile's memory kept for the next compile (src/delivery/compile/slab-cache.ts): a slab is
 * reused only once it was given back, and given back only when nothing can touch it any more — by
 * a compile that hands out no contents, by a push once the node answered all of it; never by a
 * compile or a push that failed. A compile into reused memory reads exactly its own files' bytes,
 * and a push of them is committed by a real node, which verifies every byte (G8). A kept slab lets
 * go after its time and never holds a process open.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { pathToFileURL } from "node:url";
import { sha256Digest } from "../../src/core/digest.js";
import { IntegrityError, ValidationError } from "../../src/core/errors.js";
import { compileDirectory, type CompileOptions } from "../../src/delivery/compile/directory.js";
import { SlabCache, sharedSlabCache } from "../../src/delivery/compile/slab-cache.js";
import { bundleDigestOf } from "../../src/delivery/manifest-types.js";
import { WardenClient, WardenHttpError } from "../../src/client/index.js";
import { writeRandomBundle } from "../client/bundle-gen.js";
import { removeHome, repo, startNode, type NodeProcess } from "../support/node.js";
import { runToExit } from "../support/run-to-exit.js";

const scratch = fs.mkdtempSync(path.join(os.tmpdir(), "warden-slab-cache-"));
after(() => fs.rmSync(scratch, { recursive: true, force: true }));
let counter = 0;

const FILES = 12;
const FILE_BYTES = 64 * 1024;
/** What slotsOf lays FILES files of FILE_BYTES out in: each file's size and its spare byte. */
const SLAB_BYTES = FILES * (FILE_BYTES + 1);

function tree(files = FILES, fileBytes = FILE_BYTES): string {
  const dir = path.join(scratch, `tree-${++counter}`);
  writeRandomBundle(dir, files, fileBytes);
  return dir;
}

const OPTIONS: CompileOptions = { bundleId: "slab", revision: "r1" };

/** Every digest and every byte of `compiled` checked against the files on disk, read independently. */
function assertOwnBytes(compiled: Awaited<ReturnType<typeof compileDirectory>>): void {
  const files = compiled.files.map((f) => ({ path: f.component.relative_path, content: fs.readFileSync(f.absolutePath) }));
  assert.equal(compiled.manifest.bundle_digest, bundleDigestOf(files));
  compiled.files.forEach((f, i) => {
    assert.equal(f.component.blob.digest, sha256Digest(files[i]!.content), f.component.relative_path);
    if (compiled.contents !== undefined) assert.deepEqual(Buffer.from(compiled.contents.get(f.component.relative_path)!), files[i]!.content);
  });
}

describe("SlabCache", () => {
  it("hands a given-back slab to the next take that fits, once, and keeps the larger of two", () => {
    const cache = new SlabCache();
    const first = cache.take(100);
    assert.equal(first.byteLength, 100);
    assert.equal(cache.keptBytes, 0);
    cache.give(first);
    assert.equal(cache.keptBytes, 100);
    assert.equal(cache.take(60), first, "a smaller need is served by the kept slab");
    assert.equal(cache.keptBytes, 0, "a taken slab is no longer kept");
    assert.notEqual(cache.take(60), first, "nor handed out twice");
    cache.give(first);
    const larger = cache.take(200);
    assert.notEqual(larger, first, "a need the kept slab cannot hold gets new memory");
    assert.equal(larger.byteLength, 200);
    assert.equal(cache.keptBytes, 100, "and the smaller one stays kept");
    cache.give(larger);
    assert.equal(cache.keptBytes, 200);
    cache.give(new SharedArrayBuffer(50));
    assert.equal(cache.keptBytes, 200, "a smaller slab does not displace a larger one");
    assert.equal(cache.take(150), larger);
  });

  it("lets a kept slab go once nothing took it for its keeping time", async () => {
    const cache = new SlabCache({ keepMs: 20 });
    cache.give(new SharedArrayBuffer(64));
    assert.equal(cache.keptBytes, 64);
    // Readiness, not a budget: the timer fires whenever the machine gets to it.
    const kept = (): number => cache.keptBytes; // read afresh each time round
    while (kept() !== 0) await new Promise((tick) => setTimeout(tick, 5));
    assert.equal(cache.take(64).byteLength, 64);
  });
});

describe("a compile with a slab cache", () => {
  it("that keeps no contents gives its slab back, and the next compile reads its own bytes into it", async () => {
    const cache = new SlabCache();
    const first = await compileDirectory(tree(), { ...OPTIONS, slabs: cache });
    assertOwnBytes(first);
    assert.equal(first.slab, undefined, "no contents, no slab handed out");
    assert.equal(cache.keptBytes, SLAB_BYTES);
    const kept = cache.take(0);
    cache.give(kept);
    // Different bytes into the same memory: every digest and byte is the new tree's.
    const second = await compileDirectory(tree(), { ...OPTIONS, slabs: cache, keepContents: true });
    assert.equal(second.slab, kept, "the second compile read into the kept slab");
    assert.equal(cache.keptBytes, 0, "a slab whose contents are handed out is not kept");
    assertOwnBytes(second);
    // A smaller tree fits the same memory; its views cover exactly its own files.
    cache.give(second.slab!);
    const small = await compileDirectory(tree(3, 1000), { ...OPTIONS, slabs: cache, keepContents: true });
    assert.equal(small.slab, kept);
    assertOwnBytes(small);
    for (const bytes of small.contents!.values()) assert.equal(bytes.byteLength, 1000);
  });

  it("that fails reading never gives its slab back; one refused before reading leaves the kept slab kept", async () => {
    const cache = new SlabCache();
    cache.give(new SharedArrayBuffer(SLAB_BYTES));
    // Refused before a byte is read: the kept slab is not taken.
    await assert.rejects(
      compileDirectory(tree(), { ...OPTIONS, slabs: cache, kinds: { "no/such/file.md": "file" } }),
      (e: unknown) => e instanceof ValidationError && e.code === "compile-kind-override-unknown-path",
    );
    assert.equal(cache.keptBytes, SLAB_BYTES);
    const dir = tree();
    const last = `data/f${String(FILES - 1).padStart(4, "0")}.bin`;
    await assert.rejects(
      compileDirectory(dir, {
        ...OPTIONS,
        slabs: cache,
        hooks: { beforeRead: ({ relativePath, absolutePath }) => void (relativePath === last && fs.appendFileSync(absolutePath, "grew\n")) },
      }),
      (e: unknown) => e instanceof IntegrityError && e.code === "compile-file-changed",
    );
    assert.equal(cache.keptBytes, 0, "a compile that failed after taking the slab gave it back (its reads ahead may still land in it)");
  });
});

describe("push through the process-wide slab cache, against a real node", () => {
  let node: NodeProcess;
  let client: WardenClient;
  before(async () => {
    node = await startNode({});
    client = new WardenClient({ url: node.url, token: node.token });
  });
  after(async () => {
    client?.close();
    await node?.stop();
    removeHome(node);
  });

  it("gives the slab back after a committed push; the next push reads into it and the node commits its bytes", async () => {
    const cache = sharedSlabCache();
    while (cache.keptBytes !== 0) cache.take(0); // empty whatever an earlier case left
    const first = await client.push(tree(), { bundleId: "slab-push", revision: "r1" });
    assert.equal(first.alreadyCommitted, false);
    assert.equal(cache.keptBytes, SLAB_BYTES, "the committed push gave its slab back");
    const kept = cache.take(0);
    cache.give(kept);
    // The node verifies each blob's digest as it arrives and the bundle digest at commit: a byte
    // of the first push left in the reused memory would fail the second push.
    const dir = tree();
    const second = await client.push(dir, { bundleId: "slab-push", revision: "r2" });
    assert.equal(second.bytesSent, FILES * FILE_BYTES);
    const files = fs.readdirSync(path.join(dir, "data")).sort().map((name) => ({ path: `data/${name}`, content: fs.readFileSync(path.join(dir, "data", name)) }));
    assert.equal(second.receipt.bundle_digest, bundleDigestOf(files));
    assert.equal(cache.take(0), kept, "the second push read into the kept slab and gave it back");
  });

  it("keeps the slab of a push that failed out of the cache", async () => {
    const cache = sharedSlabCache();
    while (cache.keptBytes !== 0) cache.take(0);
    cache.give(new SharedArrayBuffer(SLAB_BYTES));
    const refused = new WardenClient({ url: node.url, token: "not-the-token", retries: 0 });
    try {
      await assert.rejects(refused.push(tree(), { bundleId: "slab-push", revision: "r3" }), (e: unknown) => e instanceof WardenHttpError && e.status === 401);
    } finally {
      refused.close();
    }
    assert.equal(cache.keptBytes, 0, "the failed push's compile took the kept slab and did not give it back");
  });
});

const DIST = path.join(repo, "dist", "src");
const NEEDS_BUILD = { skip: !fs.existsSync(path.join(DIST, "delivery", "compile", "slab-cache.js")) && "needs `npm run build`" };

describe("a process holding a kept slab", () => {
  it("exits by itself: the keeping timer does not hold it open", NEEDS_BUILD, async () => {
    const dir = tree();
    const run = await runToExit(
      scratch,
      `const { compileDirectory } = await import(${JSON.stringify(pathToFileURL(path.join(DIST, "delivery", "compile", "directory.js")).href)});
       const { SlabCache } = await import(${JSON.stringify(pathToFileURL(path.join(DIST, "delivery", "compile", "slab-cache.js")).href)});
       // Kept far longer than the exit is waited for: a timer that held the process would show.
       const slabs = new SlabCache({ keepMs: 3_600_000 });
       await compileDirectory(${JSON.stringify(dir)}, { bundleId: "exit", revision: "r1", slabs });
       console.log(JSON.stringify({ kept: slabs.keptBytes }));`,
      "the kept slab's timer",
    );
    assert.equal(run.code, 0, `the process failed: ${run.stderr}`);
    assert.deepEqual(run.line, { kept: SLAB_BYTES });
  });
});
