/**
 * Reading the end of a run's captured output (output-files.ts) on real files: a window cut to
 * whole lines, a window with no line break kept as it is, broken UTF-8 replaced, and no read
 * outside the output directory (a run id that is not a UUID, a planted symlink, a file another
 * process could read) — each refused with its own code.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { randomUUID } from "node:crypto";
import { isWardenError } from "../../src/core/errors.js";
import { outputPath, readOutputTail } from "../../src/runner/output-files.js";

function outputsDir(t: { after: (fn: () => void) => void }): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "warden-output-files-"));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  return dir;
}

async function codeOf(promise: Promise<unknown>): Promise<string> {
  try {
    await promise;
  } catch (error) {
    assert.ok(isWardenError(error), String(error));
    return error.code;
  }
  assert.fail("expected a refusal");
}

test("the end of a stream, from the first whole line inside the window", async (t) => {
  const dir = outputsDir(t);
  const run = randomUUID();
  fs.writeFileSync(outputPath(dir, run, "stderr"), "first line\nsecond line\nthird, unfinished", { mode: 0o600 });
  assert.deepEqual(await readOutputTail(dir, run, "stderr", 1000), { stream: "stderr", size: 40, offset: 0, text: "first line\nsecond line\nthird, unfinished" });
  // 25 bytes from the end start inside "second line": it is dropped, the unfinished last line kept.
  assert.deepEqual(await readOutputTail(dir, run, "stderr", 25), { stream: "stderr", size: 40, offset: 23, text: "third, unfinished" });
  // A window inside one long line is shown as it is (there is no line start to cut at).
  assert.deepEqual(await readOutputTail(dir, run, "stderr", 10), { stream: "stderr", size: 40, offset: 30, text: "unfinished" });
  // A window that starts a line keeps that line whole.
  assert.deepEqual(await readOutputTail(dir, run, "stderr", 29), { stream: "stderr", size: 40, offset: 11, text: "second line\nthird, unfinished" });
  assert.deepEqual(await readOutputTail(dir, run, "stderr", 30), { stream: "stderr", size: 40, offset: 11, text: "second line\nthird, unfinished" });
});

test("broken UTF-8 at the window's edge is replaced, not refused", async (t) => {
  const dir = outputsDir(t);
  const run = randomUUID();
  fs.writeFileSync(outputPath(dir, run, "stdout"), Buffer.concat([Buffer.from("é"), Buffer.from("\nok\n")]), { mode: 0o600 });
  const tail = await readOutputTail(dir, run, "stdout", 5);
  assert.equal(tail.text, "ok\n");
  const whole = await readOutputTail(dir, run, "stdout", 6);
  assert.equal(whole.text, "é\nok\n");
  fs.writeFileSync(outputPath(dir, run, "stderr"), Buffer.from([0xff, 0x41]), { mode: 0o600 });
  assert.equal((await readOutputTail(dir, run, "stderr", 100)).text, "\ufffdA");
});

test("no read outside the output directory", async (t) => {
  const dir = outputsDir(t);
  assert.equal(await codeOf(readOutputTail(dir, "../token", "stdout", 100)), "run-id-invalid");
  assert.equal(await codeOf(readOutputTail(dir, randomUUID(), "stdout", 100)), "run-output-not-found");
  const secret = path.join(dir, "..", `warden-secret-${randomUUID()}`);
  fs.writeFileSync(secret, "secret\n", { mode: 0o600 });
  t.after(() => fs.rmSync(secret, { force: true }));
  const planted = randomUUID();
  fs.symlinkSync(secret, outputPath(dir, planted, "stdout"));
  assert.equal(await codeOf(readOutputTail(dir, planted, "stdout", 100)), "unsafe-storage-symlink");
  const open = randomUUID();
  fs.writeFileSync(outputPath(dir, open, "stdout"), "readable by all\n", { mode: 0o644 });
  assert.match(await codeOf(readOutputTail(dir, open, "stdout", 100)), /^unsafe-storage/);
});
