import { test } from "node:test";
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { LimitError, ValidationError, WardenError } from "../../src/core/errors.js";
import { sha256Digest } from "../../src/core/digest.js";
import { DEFAULT_LIMITS, UNITS, resolveLimits } from "../../src/core/limits.js";
import { bundleDigestOf, manifestDigestOf, receiptOf, type Manifest } from "../../src/delivery/manifest-types.js";
import { createManifest, parseManifest } from "../../src/delivery/manifest.js";
import {
  buildManifest,
  fakeDigest,
  rawOf,
  rawWithPaths,
  redigest,
  reviewToolsFiles,
  type RawManifest,
} from "./manifest-fixtures.js";

// ---- an independent encoder of DESIGN.md's manifest digest layout, written byte by byte ----
const KIND_TAGS: Record<string, number> = {
  skill: 1, "plugin-manifest": 2, prompt: 3, instructions: 4, "agent-definition": 5,
  command: 6, file: 7, template: 8, "mcp-declaration": 9,
};
const SCOPE_TAGS: Record<string, number> = { workspace: 1, session: 2 };
function u32(n: number): number[] {
  return [(n >>> 24) & 255, (n >>> 16) & 255, (n >>> 8) & 255, n & 255];
}
function u64(n: number): number[] {
  return [...u32(Math.floor(n / 2 ** 32)), ...u32(n >>> 0)];
}
function lp(text: string): number[] {
  const b = [...new TextEncoder().encode(text)];
  return [...u32(b.length), ...b];
}
function handEncodedDigest(m: Omit<Manifest, "manifest_digest">): string {
  const bytes = [...new TextEncoder().encode("g4a-delivery-manifest-v2"), 0];
  bytes.push(...lp(m.bundle_id), ...lp(m.revision), ...lp(m.bundle_digest), ...u32(m.components.length));
  for (const c of m.components) {
    bytes.push(
      KIND_TAGS[c.kind]!,
      SCOPE_TAGS[c.scope]!,
      ...lp(c.relative_path),
      ...lp(c.blob.digest),
      ...u64(c.blob.byte_len),
    );
  }
  return `sha256:${createHash("sha256").update(Uint8Array.from(bytes)).digest("hex")}`;
}

const VECTOR_BLOB = "sha256:452b7b642e325cb2b5b20ac28536ada8b0ad312217a98ab7ff23330603b63126";
const VECTOR_BUNDLE = "sha256:ba71773aa731bdc2e460cbde965db223f9fa8d499a1b97acc8ceeb376dcc432a";
const vectorComponent = {
  kind: "agent-definition",
  scope: "workspace",
  relative_path: "definition.md",
  blob: { digest: VECTOR_BLOB, byte_len: 7 },
} as const;
const vectorBody = {
  bundle_id: "review-tools",
  revision: "r1",
  bundle_digest: VECTOR_BUNDLE,
  components: [vectorComponent],
} as const;
// Computed once with handEncodedDigest above and pinned: a change of layout must show here.
const VECTOR_MANIFEST = "sha256:4e77a5f5324e4b9fb5550532941bdacc8819005a186a571991ddec21982e8db3";
const WIDE_MANIFEST = "sha256:90cd799bfe7421d34da5c020338776f1c1313cef2b36589287d99eac7b0f4139";

/** Asserts `fn` throws exactly a `cls` with `code` (and the given details), nothing else. */
function assertRefused(
  fn: () => unknown,
  code: string,
  details: Record<string, unknown> = {},
  cls: typeof ValidationError | typeof LimitError = ValidationError,
): void {
  assert.throws(fn, (error: unknown) => {
    assert.ok(error instanceof WardenError, `expected a WardenError, got ${String(error)}`);
    assert.equal(error.code, code, `wrong code; message: ${error.message}`);
    assert.ok(error instanceof cls, `expected ${cls.name}, got ${error.name}`);
    for (const [k, v] of Object.entries(details)) assert.equal(error.details[k], v, `details.${k}`);
    return true;
  });
}

test("DESIGN.md vector: blob and bundle digests of definition.md = \"review\\n\"", () => {
  const content = new TextEncoder().encode("review\n");
  assert.equal(sha256Digest(content), VECTOR_BLOB);
  assert.equal(bundleDigestOf([{ path: "definition.md", content }]), VECTOR_BUNDLE);
});

test("manifest digest: the pinned fixture, the hand encoder and manifestDigestOf agree", () => {
  assert.equal(handEncodedDigest(vectorBody), VECTOR_MANIFEST);
  assert.equal(manifestDigestOf(vectorBody), VECTOR_MANIFEST);
  // Non-ASCII path, a byte_len above 2^32 (the u64's high word) and the last kind tag.
  const wide = {
    ...vectorBody,
    components: [
      vectorComponent,
      { kind: "mcp-declaration", scope: "session", relative_path: "日本/ä.md", blob: { digest: `sha256:${"0f".repeat(32)}`, byte_len: 2 ** 40 + 5 } },
    ],
  } as const;
  assert.equal(handEncodedDigest(wide), WIDE_MANIFEST);
  assert.equal(manifestDigestOf(wide), WIDE_MANIFEST);
});

test("parseManifest accepts the vector manifest; kind and scope change the manifest digest, not the bundle digest", () => {
  const parsed = parseManifest({ ...vectorBody, manifest_digest: VECTOR_MANIFEST }, DEFAULT_LIMITS);
  assert.equal(parsed.manifest_digest, VECTOR_MANIFEST);
  assert.deepEqual(parsed.components[0], vectorComponent);
  const session = createManifest({ ...vectorBody, components: [{ ...vectorComponent, kind: "instructions", scope: "session" }] });
  assert.equal(session.bundle_digest, parsed.bundle_digest);
  assert.notEqual(session.manifest_digest, parsed.manifest_digest);
  assert.equal(session.manifest_digest, handEncodedDigest(session));
});

test("parseManifest returns a frozen copy holding only the known fields", () => {
  const { manifest } = buildManifest(reviewToolsFiles());
  const raw = rawOf(manifest);
  const parsed = parseManifest(raw);
  assert.deepEqual(JSON.parse(JSON.stringify(parsed)), raw);
  assert.ok(Object.isFrozen(parsed) && Object.isFrozen(parsed.components) && Object.isFrozen(parsed.components[0]!.blob));
  raw.components[0]!.relative_path = "changed.md";
  assert.equal(parsed.components[0]!.relative_path, ".claude-plugin/plugin.json");
});

test("receipt lists each blob once, sorted by digest", () => {
  const { manifest } = buildManifest([
    { path: "a.md", content: "same" },
    { path: "b.md", content: "same" },
    { path: "c.md", content: "other" },
  ]);
  const receipt = receiptOf(parseManifest(rawOf(manifest)));
  assert.equal(receipt.blobs.length, 2);
  assert.ok(receipt.blobs[0]!.digest < receipt.blobs[1]!.digest);
});

test("sorting is by UTF-8 bytes: U+FF61 before U+1F600 (UTF-16 order says the opposite)", () => {
  const utf8Order = ["\uFF61.md", "\u{1F600}.md"];
  assert.ok(utf8Order[1]! < utf8Order[0]!, "JS string order is UTF-16 order");
  parseManifest(rawWithPaths(utf8Order));
  assertRefused(() => parseManifest(rawWithPaths([...utf8Order].reverse())), "manifest-components-unsorted", {
    component: 1,
    path: "\uFF61.md",
  });
});

// ---- bad inputs: one rule each, its own code, nothing else thrown ----

function withPath(path: string): () => Manifest {
  return () => parseManifest(rawWithPaths([path]));
}

const pathCases: Array<[string, string]> = [
  ["../escape.md", "manifest-path-traversal"],
  ["docs/../../escape.md", "manifest-path-traversal"],
  ["..", "manifest-path-traversal"],
  ["docs/./a.md", "manifest-path-dot-segment"],
  ["/etc/passwd", "manifest-path-absolute"],
  ["docs/", "manifest-path-trailing-slash"],
  ["docs\\a.md", "manifest-path-backslash"],
  ["C:\\x.md", "manifest-path-backslash"],
  ["C:/x.md", "manifest-path-reserved-char"],
  ["docs//a.md", "manifest-path-empty-segment"],
  ["a\u0001b.md", "manifest-path-control-char"],
  ["a\nb.md", "manifest-path-control-char"],
  ["a\u007fb.md", "manifest-path-control-char"],
  ["a\u0085b.md", "manifest-path-control-char"],
  ["what?.md", "manifest-path-reserved-char"],
  ['say"hi".md', "manifest-path-reserved-char"],
  ["a|b", "manifest-path-reserved-char"],
  ["a*b", "manifest-path-reserved-char"],
  ["<a>", "manifest-path-reserved-char"],
  ["docs./a.md", "manifest-path-trailing-dot-or-space"],
  ["a.md ", "manifest-path-trailing-dot-or-space"],
  ["con.txt", "manifest-path-device-name"],
  ["docs/Lpt9.md", "manifest-path-device-name"],
  ["aux", "manifest-path-device-name"],
  ["NUL.tar.gz", "manifest-path-device-name"],
  ["com1", "manifest-path-device-name"],
  ["prn .md", "manifest-path-device-name"],
  ["", "manifest-path-length"],
  ["a".repeat(513), "manifest-path-length"],
  ["ä".repeat(257), "manifest-path-length"], // 514 bytes, 257 UTF-16 units
  ["bad\uD800.md", "manifest-path-encoding"],
  ["bad\uDC00x.md", "manifest-path-encoding"],
];

for (const [path, code] of pathCases) {
  test(`path ${JSON.stringify(path.length > 40 ? `${path.slice(0, 12)}…(${path.length})` : path)} → ${code}`, () => {
    assertRefused(withPath(path), code, { component: 0, field: "relative_path" });
  });
}

test("paths at the limits and near the rules are accepted", () => {
  // 512 bytes in all, no segment over 255 (a file name's limit).
  for (const path of [`${"a".repeat(255)}/${"a".repeat(254)}/a`, `${"ä".repeat(127)}a/${"ä".repeat(127)}a`, "a".repeat(255), "console.md", "com10.md", "lpt.md", ".hidden", "a b/c d.md", "x..y.md", "con-notes.md", "nulls/x.md"]) {
    parseManifest(rawWithPaths([path]));
  }
});

test("a segment over 255 UTF-8 bytes is refused with its own code, however short the path", () => {
  for (const path of ["a".repeat(256), `docs/${"ä".repeat(128)}`, `${"a".repeat(300)}/x.md`]) {
    assert.throws(() => parseManifest(rawWithPaths([path])), (e: unknown) => (e as { code?: string }).code === "manifest-path-segment-too-long");
  }
});

test("case collisions after Unicode lower-casing are refused (ASCII, Ä/ä, NFC/NFD)", () => {
  for (const pair of [["README.md", "readme.md"], ["Docs/A.md", "docs/a.md"], ["\u00C4.md", "\u00E4.md"], ["e\u0301.md", "\u00E9.md"], ["\u00E5.md", "\u212B.md"]]) {
    assertRefused(
      () => parseManifest(rawWithPaths(pair)),
      "manifest-path-case-collision",
      { component: 1, path: pair[1] },
    );
  }
});

test("a path that is also a parent directory of another path is refused", () => {
  assertRefused(
    () => parseManifest(rawWithPaths(["docs", "docs/a.md"])),
    "manifest-path-file-dir-conflict",
    { component: 1 },
  );
  assertRefused(() => parseManifest(rawWithPaths(["Docs", "docs/a.md"])), "manifest-path-file-dir-conflict");
});

test("duplicate and unsorted paths have their own codes", () => {
  assertRefused(() => parseManifest(rawWithPaths(["a.md", "a.md"])), "manifest-path-duplicate", { component: 1 });
  assertRefused(() => parseManifest(rawWithPaths(["b.md", "a.md"])), "manifest-components-unsorted", { component: 1 });
});

test("component count: 0 refused, 128 accepted, 129 refused as a limit", () => {
  assertRefused(() => parseManifest(rawWithPaths([])), "manifest-components-empty");
  const names = (n: number) => Array.from({ length: n }, (_, i) => `files/${String(i).padStart(3, "0")}`);
  parseManifest(rawWithPaths(names(128)));
  assertRefused(() => parseManifest(rawWithPaths(names(129))), "manifest-too-many-components", {}, LimitError);
  assertRefused(
    () => parseManifest(rawWithPaths(names(3)), resolveLimits({ bundleComponents: 2 })),
    "manifest-too-many-components",
    {},
    LimitError,
  );
});

test("file size: 1 MiB accepted, 1 MiB + 1 refused; total over 32 MiB refused", () => {
  parseManifest(rawWithPaths(["big.bin"], UNITS.MiB));
  assertRefused(() => parseManifest(rawWithPaths(["big.bin"], UNITS.MiB + 1)), "manifest-file-too-large", {
    component: 0,
    field: "blob.byte_len",
  }, LimitError);
  // gate4agent's overflow scenario: 33 files of the maximum size.
  const paths = Array.from({ length: 33 }, (_, i) => `files/${String(i).padStart(3, "0")}`);
  assertRefused(
    () => parseManifest(rawWithPaths(paths, UNITS.MiB)),
    "manifest-bundle-too-large",
    { component: 32 },
    LimitError,
  );
});

function mutated(mutate: (raw: RawManifest) => void, recompute = true): () => Manifest {
  return () => {
    const raw = rawOf(buildManifest(reviewToolsFiles()).manifest);
    mutate(raw);
    return parseManifest(recompute ? redigest(raw) : raw);
  };
}

test("digests: wrong length, uppercase hex, wrong prefix → manifest-digest-invalid", () => {
  const bad = [`sha256:${"a".repeat(63)}`, `sha256:${"a".repeat(65)}`, `sha256:${"A".repeat(64)}`, `sha512:${"a".repeat(64)}`, "a".repeat(64)];
  for (const d of bad) {
    assertRefused(mutated((r) => (r.components[2]!.blob.digest = d)), "manifest-digest-invalid", {
      component: 2,
      field: "blob.digest",
    });
    assertRefused(mutated((r) => (r.bundle_digest = d)), "manifest-digest-invalid", { field: "bundle_digest" });
    assertRefused(
      mutated((r) => (r.manifest_digest = d), false),
      "manifest-digest-invalid",
      { field: "manifest_digest" },
    );
  }
});

test("kind and scope must be known", () => {
  assertRefused(
    mutated((r) => (r.components[1]!.kind = "script")),
    "manifest-kind-unknown",
    { component: 1, field: "kind" },
  );
  assertRefused(mutated((r) => (r.components[1]!.kind = "Skill")), "manifest-kind-unknown");
  assertRefused(
    mutated((r) => (r.components[1]!.scope = "global")),
    "manifest-scope-unknown",
    { component: 1, field: "scope" },
  );
});

test("unknown fields are refused at the top level, in a component and in a blob", () => {
  assertRefused(mutated((r) => (r.extra = 1)), "manifest-unknown-field", { field: "extra" });
  assertRefused(
    mutated((r) => (r.components[3]!.mode = 0o755)),
    "manifest-unknown-field",
    { component: 3, field: "mode" },
  );
  assertRefused(mutated((r) => (r.components[3]!.blob.algo = "sha256")), "manifest-unknown-field", {
    component: 3,
    field: "blob.algo",
  });
  // JSON.parse makes "__proto__" an own key; it must be refused like any other unknown key.
  const own = (r: RawManifest) => Object.defineProperty(r.components[0]!, "__proto__", { value: { x: 1 }, enumerable: true });
  assertRefused(mutated(own), "manifest-unknown-field", { component: 0, field: "__proto__" });
  assertRefused(() => parseManifest(JSON.parse('{"__proto__": {}}')), "manifest-unknown-field", { field: "__proto__" });
});

test("missing fields and wrong JSON types have their own codes", () => {
  assertRefused(mutated((r) => delete r.revision), "manifest-missing-field", { field: "revision" });
  assertRefused(mutated((r) => delete r.components[0]!.blob.byte_len), "manifest-missing-field", {
    component: 0,
    field: "blob.byte_len",
  });
  assertRefused(
    mutated((r) => (r.components[0]!.blob.byte_len = "70")),
    "manifest-field-type",
    { field: "blob.byte_len" },
  );
  assertRefused(mutated((r) => (r.components[0]!.kind = 7)), "manifest-field-type", { field: "kind" });
  assertRefused(
    mutated((r) => (r.components[0]!.relative_path = ["a"])),
    "manifest-field-type",
    { field: "relative_path" },
  );
  assertRefused(
    mutated((r) => (r.components[0]!.blob = null as unknown as Record<string, unknown>)),
    "manifest-field-type",
  );
  assertRefused(mutated((r) => (r.components = {} as unknown as RawManifest["components"])), "manifest-field-type", {
    field: "components",
  });
  assertRefused(mutated((r) => (r.bundle_id = 5)), "manifest-field-type", { field: "bundle_id" });
  for (const input of [null, [], "manifest", 1, new Date()]) {
    assertRefused(() => parseManifest(input), "manifest-not-object");
  }
});

test("byte_len must be a non-negative safe integer", () => {
  for (const n of [-1, 1.5, 2 ** 53, Number.NaN]) {
    assertRefused(mutated((r) => (r.components[0]!.blob.byte_len = n)), "manifest-byte-len-invalid", { component: 0 });
  }
});

test("an empty blob must carry the digest of zero bytes", () => {
  const ok = rawWithPaths(["empty.md"], 0);
  ok.components[0]!.blob.digest = sha256Digest(new Uint8Array(0));
  assert.equal(parseManifest(redigest(ok)).components[0]!.blob.byte_len, 0);
  assertRefused(() => parseManifest(rawWithPaths(["empty.md"], 0)), "manifest-empty-blob-digest", { component: 0 });
});

test("one digest declared with two lengths is refused", () => {
  const raw = rawWithPaths(["a.md", "b.md"]);
  raw.components[1]!.blob.digest = raw.components[0]!.blob.digest as string;
  raw.components[1]!.blob.byte_len = 8;
  assertRefused(() => parseManifest(redigest(raw)), "manifest-blob-length-conflict", { component: 1, path: "b.md" });
  raw.components[1]!.blob.byte_len = 7; // same digest, same length: deduplicated, fine
  parseManifest(redigest(raw));
});

test("bundle_id and revision: 1–128 printable ASCII bytes without separators", () => {
  const ids: Array<[unknown, string]> = [
    ["", "manifest-identifier-length"],
    ["x".repeat(129), "manifest-identifier-length"],
    ["a\u0007b", "manifest-identifier-character"],
    ["review tools", "manifest-identifier-character"],
    ["révision", "manifest-identifier-character"],
    ["a/b", "manifest-identifier-separator"],
    ["a\\b", "manifest-identifier-separator"],
  ];
  for (const [value, code] of ids) {
    assertRefused(mutated((r) => (r.bundle_id = value)), code, { field: "bundle_id" });
    assertRefused(mutated((r) => (r.revision = value)), code, { field: "revision" });
  }
  parseManifest(redigest(Object.assign(rawWithPaths(["a.md"]), { bundle_id: "bundle.h3a-review", revision: "x".repeat(128) })));
});

test("a manifest_digest that does not match the content is refused (422)", () => {
  const raw = rawOf(buildManifest(reviewToolsFiles()).manifest);
  raw.components[0]!.scope = "workspace"; // changed without recomputing the digest
  assertRefused(() => parseManifest(raw), "manifest-digest-mismatch", { field: "manifest_digest" });
  try {
    parseManifest(raw);
  } catch (error) {
    assert.equal((error as WardenError).status, 422);
  }
  assertRefused(mutated((r) => (r.manifest_digest = fakeDigest("x")), false), "manifest-digest-mismatch");
});

test("createManifest validates its parts by the same rules", () => {
  const body = { ...vectorBody, components: [{ ...vectorComponent, relative_path: "../x.md" }] };
  assertRefused(() => createManifest(body), "manifest-path-traversal", { component: 0 });
  assertRefused(
    () => createManifest({ ...vectorBody, components: [{ ...vectorComponent, blob: { digest: VECTOR_BLOB, byte_len: -1 } }] }),
    "manifest-byte-len-invalid",
  );
  assert.equal(createManifest(vectorBody).manifest_digest, VECTOR_MANIFEST);
});
