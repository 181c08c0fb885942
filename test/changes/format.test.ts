import { test, describe } from "node:test";
import assert from "node:assert/strict";
import { canonicalJson } from "../../src/core/canonical.js";
import { EMPTY_SHA256, sha256Digest } from "../../src/core/digest.js";
import { WardenError } from "../../src/core/errors.js";
import {
  checkBlob,
  parseManifest,
  runChangesEvent,
  serializeManifest,
  RUN_CHANGES_EVENT_BYTES,
  type ChangeSetManifest,
  type ChangedFile,
} from "../../src/changes/format.js";
import { validateEvent } from "../../src/journal/schema.js";
import { DEFAULT_LIMITS } from "../../src/core/limits.js";

const BASE = "0".repeat(40);
const OID = "1".repeat(40);

function added(path: string, content: string): ChangedFile {
  return {
    path, old_path: null, status: "added", old_mode: null, new_mode: "100644", old_oid: null, new_oid: OID,
    old_sha256: null, new_sha256: sha256Digest(content), old_size: null, new_size: Buffer.byteLength(content),
    binary: false, lines_added: 1, lines_deleted: 0, symlink_target: null,
  };
}

function manifest(files: ChangedFile[]): ChangeSetManifest {
  return { v: 1, base: BASE, files, patch: { sha256: EMPTY_SHA256, size: 0 } };
}

function code(error: unknown): string {
  assert.ok(error instanceof WardenError, String(error));
  return error.code;
}

describe("change set format", () => {
  test("DESIGN.md's vector: the empty change set's bytes and digest", () => {
    const { bytes, digest } = serializeManifest(manifest([]));
    assert.equal(
      bytes.toString("utf8"),
      `{"base":"${BASE}","files":[],"patch":{"sha256":"${EMPTY_SHA256}","size":0},"v":1}`,
    );
    assert.equal(digest, "sha256:1aaeb61e4ad9dc0f0063cf457f35bd37e8ec6f8bcbc6d84462ad2c6a0de0e97b");
    assert.deepEqual(parseManifest(bytes, digest), manifest([]));
  });

  test("a stored manifest round-trips; one changed byte is refused by digest", () => {
    const m = manifest([added("a.txt", "x\n"), added("b/c.txt", "y\n")]);
    const { bytes, digest } = serializeManifest(m);
    assert.deepEqual(parseManifest(bytes, digest), m);
    const tampered = Buffer.from(bytes);
    tampered[tampered.indexOf("a.txt")] = "z".charCodeAt(0);
    assert.throws(() => parseManifest(tampered, digest), (e) => code(e) === "change-set-digest-mismatch");
  });

  test("bytes that hash right but break the format are refused, naming the rule", () => {
    const cases: [string, unknown][] = [
      ["unknown field", { ...manifest([]), extra: 1 }],
      ["out of order", manifest([added("b", "1"), added("a", "2")])],
      ["repeated path", manifest([added("a", "1"), added("a", "2")])],
      ["into .git", manifest([added(".GIT/config", "1")])],
      ["dot-dot", manifest([added("a/../b", "1")])],
      ["absolute", manifest([added("/etc/passwd", "1")])],
      ["old side on an add", manifest([{ ...added("a", "1"), old_mode: "100644" }])],
      ["rename without old_path", manifest([{ ...added("a", "1"), status: "renamed" }])],
      ["symlink target not its blob", manifest([{ ...added("l", "t"), new_mode: "120000", symlink_target: "u" }])],
      ["line counts on binary", manifest([{ ...added("a", "1"), binary: true }])],
    ];
    for (const [what, value] of cases) {
      const bytes = Buffer.from(canonicalJson(value));
      assert.throws(() => parseManifest(bytes, sha256Digest(bytes)), (e) => code(e) === "change-set-malformed", what);
    }
    const spaced = Buffer.from(JSON.stringify(manifest([]), null, 1));
    assert.throws(() => parseManifest(spaced, sha256Digest(spaced)), /canonical/);
    const dup = Buffer.from(`{"base":"${BASE}","base":"${BASE}","files":[],"patch":{"sha256":"${EMPTY_SHA256}","size":0},"v":1}`);
    assert.throws(() => parseManifest(dup, sha256Digest(dup)), /twice/);
  });

  test("a blob is checked against its digest and size", () => {
    checkBlob(Buffer.from("x\n"), sha256Digest("x\n"), 2);
    assert.throws(() => checkBlob(Buffer.from("y\n"), sha256Digest("x\n"), 2), (e) => code(e) === "change-set-blob-tampered");
  });

  test("run.changes: states no changes, passes the journal schema, cuts a long list but keeps the total", () => {
    const empty = serializeManifest(manifest([]));
    const ev = runChangesEvent(manifest([]), empty.digest);
    assert.equal(ev.no_changes, true);
    assert.deepEqual(ev.files, []);
    validateEvent(ev, DEFAULT_LIMITS);

    const many = Array.from({ length: 3000 }, (_, i) => added(`dir/file-${String(i).padStart(5, "0")}.txt`, String(i)));
    const big = manifest(many);
    const cut = runChangesEvent(big, serializeManifest(big).digest);
    assert.equal(cut.files_total, 3000);
    assert.ok(cut.files.length > 0 && cut.files.length < 3000);
    assert.ok(Buffer.byteLength(canonicalJson(cut)) <= RUN_CHANGES_EVENT_BYTES);
    assert.equal(cut.files[cut.files.length - 1]!.path, many[cut.files.length - 1]!.path);
    validateEvent(cut, DEFAULT_LIMITS);
    assert.throws(() => validateEvent({ ...ev, no_changes: false }, DEFAULT_LIMITS), /no_changes/);
  });
});
