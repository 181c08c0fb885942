import { test } from "node:test";
import assert from "node:assert/strict";
import { ConflictError, UnsafeStorageError } from "../../src/core/errors.js";

test("withDetails: the same failure (class, code, status, message, cause, own members) with details added, the original untouched", () => {
  const cause = new Error("underneath");
  const original = new ConflictError("chunk-out-of-order", "expected offset 4", { details: { expected_offset: 4 }, cause });
  const framed = original.withDetails({ frame: 2, digest: "sha256:ab" });
  assert.ok(framed instanceof ConflictError);
  assert.notEqual(framed, original);
  assert.deepEqual([framed.code, framed.status, framed.message, framed.name, framed.cause], [original.code, 409, "expected offset 4", "ConflictError", cause]);
  assert.equal(framed.stack, original.stack);
  assert.deepEqual(framed.details, { expected_offset: 4, frame: 2, digest: "sha256:ab" });
  assert.deepEqual(original.details, { expected_offset: 4 });
  assert.deepEqual(framed.toJSON().details, framed.details);

  const unsafe = new UnsafeStorageError("unsafe-storage-mode", "/x", "mode 755");
  const more = unsafe.withDetails({ frame: 0 });
  assert.ok(more instanceof UnsafeStorageError);
  assert.equal(more.path, "/x");
  assert.deepEqual(more.details, { path: "/x", rule: "mode 755", frame: 0 });
});
