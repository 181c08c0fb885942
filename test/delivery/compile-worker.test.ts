/**
 * The compile's blob digests on a worker thread (src/core/off-thread-hash.ts), beside the bundle
 * digest on the calling thread, both over one slab of shared memory: the same manifest as hashing
 * inline; each file's contents its own bytes, and the worker handed exactly each file's range; a
 * file changing while the worker holds earlier files is still refused; a worker that dies, or
 * cannot hash, leaves its digests to be taken inline (the bytes never left); and a process that
 * compiled with the worker exits once done (the worker does not keep it alive).
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { pathToFileURL } from "node:url";
import { Worker } from "node:worker_threads";
import { sha256Digest } from "../../src/core/digest.js";
import { IntegrityError } from "../../src/core/errors.js";
import { HASH_WORKER_URL, MIN_OFF_THREAD_BYTES, OffThreadHasher, WORKER_WORTH_BYTES } from "../../src/core/off-thread-hash.js";
import { compileDirectory, type CompileOptions } from "../../src/delivery/compile/directory.js";
import { bundleDigestOf } from "../../src/delivery/manifest-types.js";
import { writeRandomBundle } from "../client/bundle-gen.js";
import { tsWorker } from "../invocations/fixtures/ts-worker.js";
import { repo } from "../support/node.js";
import { runToExit as runChildToExit } from "../support/run-to-exit.js";

const scratch = fs.mkdtempSync(path.join(os.tmpdir(), "warden-compile-worker-"));
after(() => fs.rmSync(scratch, { recursive: true, force: true }));
let counter = 0;

/** Enough files, each big enough for the worker, that the compile starts one. */
const FILES = 24;
const FILE_BYTES = 256 * 1024;
assert.ok(FILES * FILE_BYTES >= WORKER_WORTH_BYTES && FILE_BYTES >= MIN_OFF_THREAD_BYTES);

function tree(): string {
  const dir = path.join(scratch, `tree-${++counter}`);
  writeRandomBundle(dir, FILES, FILE_BYTES);
  return dir;
}

const OPTIONS: CompileOptions = { bundleId: "worker", revision: "r1", keepContents: true };

/** A hasher whose worker is up (waited for, not timed: its start is not what is tested). */
async function upHasher(spawnWorker: () => Worker = () => tsWorker(HASH_WORKER_URL)): Promise<OffThreadHasher> {
  const hasher = new OffThreadHasher({ spawn: spawnWorker });
  hasher.expect(WORKER_WORTH_BYTES);
  assert.equal(await hasher.started(), true, "the hashing worker did not come up");
  return hasher;
}

/** The digests the compile must produce, computed independently from the files on disk. */
function assertDigestsOf(dir: string, compiled: Awaited<ReturnType<typeof compileDirectory>>): void {
  const files = compiled.files.map((f) => ({ path: f.component.relative_path, content: fs.readFileSync(f.absolutePath) }));
  assert.equal(compiled.manifest.bundle_digest, bundleDigestOf(files));
  compiled.files.forEach((f, i) => {
    assert.equal(f.component.blob.digest, sha256Digest(files[i]!.content), f.component.relative_path);
    assert.deepEqual(compiled.contents?.get(f.component.relative_path), files[i]!.content, `contents of ${f.component.relative_path}`);
  });
  assert.ok(dir.length > 0);
}

describe("the compile's blob digests on a worker thread", () => {
  let hasher: OffThreadHasher;
  before(async () => {
    hasher = await upHasher();
  });
  after(() => hasher.close());

  it("gives the manifest hashing inline gives, with the worker doing most of the hashing", async () => {
    const dir = tree();
    const inline = await compileDirectory(dir, { ...OPTIONS, hasher: new OffThreadHasher({ spawn: undefined }) });
    const before = hasher.hashedInWorker;
    const compiled = await compileDirectory(dir, { ...OPTIONS, hasher });
    assert.deepEqual(compiled.manifest, inline.manifest);
    assertDigestsOf(dir, compiled);
    assert.ok(hasher.hashedInWorker > before, `no blob was hashed by the worker (${hasher.hashedInline} inline)`);
  });

  it("reads every file into one slab of shared memory, and hands the worker exactly each file's range of it", async () => {
    const jobs: { buffer: unknown; offset: number; length: number }[] = [];
    const watched = await upHasher(() => {
      const worker = tsWorker(HASH_WORKER_URL);
      const post = worker.postMessage.bind(worker);
      worker.postMessage = (job: { buffer: unknown; offset: number; length: number }) => {
        jobs.push(job);
        post(job);
      };
      return worker;
    });
    try {
      const dir = tree();
      const compiled = await compileDirectory(dir, { ...OPTIONS, hasher: watched });
      assertDigestsOf(dir, compiled);
      const contents = compiled.files.map((f) => compiled.contents!.get(f.component.relative_path)!);
      const slab = contents[0]!.buffer;
      assert.ok(slab instanceof SharedArrayBuffer, "the contents are views on shared memory");
      let end = 0;
      for (const [i, bytes] of contents.entries()) {
        assert.equal(bytes.buffer, slab, `file ${i} is in the compile's one slab`);
        assert.ok(bytes.byteOffset >= end, `file ${i} starts after the one before it ends`);
        end = bytes.byteOffset + bytes.byteLength;
      }
      assert.ok(jobs.length > 0, "the worker was handed no file");
      assert.equal(jobs.length, watched.hashedInWorker);
      const ranges = new Set(contents.map((bytes) => `${bytes.byteOffset}+${bytes.byteLength}`));
      for (const job of jobs) {
        assert.equal(job.buffer, slab, "the worker hashes the slab in place");
        assert.ok(ranges.has(`${job.offset}+${job.length}`), `the worker was handed [${job.offset}, +${job.length}), which is no file's range`);
      }
      assert.equal(new Set(jobs.map((j) => j.offset)).size, jobs.length, "no file was handed twice");
    } finally {
      await watched.close();
    }
  });

  it("still refuses a file that changes while the worker holds earlier files, and keeps working", async () => {
    const dir = tree();
    const last = `data/f${String(FILES - 1).padStart(4, "0")}.bin`;
    const before = hasher.hashedInWorker;
    await assert.rejects(
      compileDirectory(dir, {
        ...OPTIONS,
        hasher,
        hooks: {
          beforeRead: ({ relativePath, absolutePath }) => {
            if (relativePath === last) fs.appendFileSync(absolutePath, "appended while read\n");
          },
        },
      }),
      (e: unknown) => e instanceof IntegrityError && e.code === "compile-file-changed" && e.details.path === last,
    );
    assert.ok(hasher.hashedInWorker > before, "the worker held no earlier file when the last one changed");
    // The files compile once nothing changes them, with the same worker.
    assertDigestsOf(dir, await compileDirectory(dir, { ...OPTIONS, hasher }));
  });

  it("hashes a view on memory that is not shared on the calling thread, and the next shared one in the worker", async () => {
    const own = Buffer.alloc(MIN_OFF_THREAD_BYTES, 7);
    const inline = hasher.hashedInline;
    assert.equal(await hasher.digest(own), sha256Digest(Buffer.alloc(MIN_OFF_THREAD_BYTES, 7)));
    assert.equal(hasher.hashedInline, inline + 1);
    assert.deepEqual(own, Buffer.alloc(MIN_OFF_THREAD_BYTES, 7), "the caller's bytes are left as they were");
    const inWorker = hasher.hashedInWorker;
    const shared = new Uint8Array(new SharedArrayBuffer(MIN_OFF_THREAD_BYTES + 2), 1, MIN_OFF_THREAD_BYTES).fill(8);
    assert.equal(await hasher.digest(shared), sha256Digest(Buffer.alloc(MIN_OFF_THREAD_BYTES, 8)));
    assert.equal(hasher.hashedInWorker, inWorker + 1);
    assert.equal(shared.byteLength, MIN_OFF_THREAD_BYTES, "the caller keeps its view");
  });
});

describe("a hashing worker that fails", () => {
  it("dies holding bytes: they are still here, so the compile hashes them inline, and so does the next one", async () => {
    const dying = await upHasher(
      () =>
        new Worker(
          `const { parentPort } = require("node:worker_threads");
           parentPort.on("message", () => process.exit(3));
           parentPort.postMessage({ ready: true });`,
          { eval: true },
        ),
    );
    const dir = tree();
    assertDigestsOf(dir, await compileDirectory(dir, { ...OPTIONS, hasher: dying }));
    assert.equal(dying.online, false, "the worker died");
    assert.equal(dying.hashedInline, FILES, "every file was hashed inline, those the worker held among them");
    const inlineBefore = dying.hashedInline;
    assertDigestsOf(dir, await compileDirectory(dir, { ...OPTIONS, hasher: dying }));
    assert.equal(dying.hashedInline - inlineBefore, FILES, "after the worker died, every file is hashed inline");
    assert.equal(dying.hashedInWorker, 0);
  });

  it("answers a job undigested: it is digested inline, correctly", async () => {
    const refusing = await upHasher(
      () =>
        new Worker(
          `const { parentPort } = require("node:worker_threads");
           parentPort.on("message", (job) => parentPort.postMessage({ id: job.id, message: "no" }));
           parentPort.postMessage({ ready: true });`,
          { eval: true },
        ),
    );
    try {
      const dir = tree();
      assertDigestsOf(dir, await compileDirectory(dir, { ...OPTIONS, hasher: refusing }));
      assert.equal(refusing.hashedInWorker, 0);
    } finally {
      await refusing.close();
    }
  });
});

const DIST = path.join(repo, "dist", "src");
const NEEDS_BUILD = { skip: !fs.existsSync(path.join(DIST, "core", "hash-worker.js")) && "needs `npm run build`" };

/**
 * Runs `body` as an ES module in a fresh process on the compiled code (as the CLI runs it: the
 * worker starts by default; from source it would not), with `hasher` the process-wide hasher,
 * and returns the JSON line it prints; the process must then exit by itself.
 */
async function runToExit(body: string): Promise<Record<string, unknown>> {
  const run = await runChildToExit(
    scratch,
    `const { compileDirectory } = await import(${JSON.stringify(pathToFileURL(path.join(DIST, "delivery", "compile", "directory.js")).href)});
     const { sharedOffThreadHasher, WORKER_WORTH_BYTES } = await import(${JSON.stringify(pathToFileURL(path.join(DIST, "core", "off-thread-hash.js")).href)});
     const hasher = sharedOffThreadHasher();
     ${body}`,
    "the hashing worker",
  );
  assert.equal(run.code, 0, `the process failed: ${run.stderr}`);
  assert.ok(run.line !== undefined, `the process printed nothing: ${run.stderr}`);
  return run.line as Record<string, unknown>;
}

describe("a process that started the hashing worker", () => {
  it("exits once its compile is done, after the worker hashed for it", NEEDS_BUILD, async () => {
    const dir = tree();
    const result = await runToExit(`
      hasher.expect(WORKER_WORTH_BYTES);
      if (!(await hasher.started())) throw new Error("the hashing worker did not start");
      const compiled = await compileDirectory(${JSON.stringify(dir)}, { bundleId: "exit", revision: "r1" });
      console.log(JSON.stringify({ inWorker: hasher.hashedInWorker, digest: compiled.manifest.bundle_digest }));
    `);
    assert.ok(Number(result.inWorker) > 0, "the worker hashed nothing: this would not show it keeping the process alive");
    const inline = await compileDirectory(dir, { bundleId: "exit", revision: "r1", hasher: new OffThreadHasher({ spawn: undefined }) });
    assert.equal(result.digest, inline.manifest.bundle_digest);
  });

  it("exits when the worker was started but never given a job (a small compile's CLI, done before it was up)", NEEDS_BUILD, async () => {
    const result = await runToExit(`
      hasher.expect(WORKER_WORTH_BYTES);
      console.log(JSON.stringify({ online: hasher.online, inWorker: hasher.hashedInWorker }));
    `);
    assert.deepEqual(result, { online: false, inWorker: 0 });
  });
});
