/**
 * The text stage and commit records store for a manifest: RFC 8785 canonical JSON, byte for byte
 * what the generic serializer (canonicalJson) writes, however the manifest was obtained.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { canonicalJson } from "../../src/core/canonical.js";
import { isWardenError } from "../../src/core/errors.js";
import { storedManifestText } from "../../src/delivery/manifest-record.js";
import type { Manifest } from "../../src/delivery/manifest-types.js";
import { parseManifest } from "../../src/delivery/manifest.js";
import { buildManifest, bytesOf, skillManifest } from "./store-harness.js";

test("a manifest's stored text is its canonical JSON, byte for byte", () => {
  const manifests: Manifest[] = [
    skillManifest().manifest,
    buildManifest(
      [
        // Non-ASCII and astral characters, punctuation (a quote in the bundle id), an empty file.
        { path: "data/ümlaut-ß.txt", content: "x" },
        { path: "data/日本語/ファイル.md", content: bytesOf(1, 40) },
        { path: "data/emoji-😀-𝄞.bin", content: bytesOf(2, 300) },
        { path: "data/it's (1) [x] {y} #z.txt", content: "q" },
        { path: "data/zero.bin", content: "" },
        { path: "docs/Ω/ﬁle", content: bytesOf(3, 7) },
      ],
      'bundle"with-quotes_&-dashes',
      "2026-12-07T09:00Z",
    ).manifest,
  ];
  for (const manifest of manifests) {
    const text = storedManifestText(manifest);
    assert.equal(text, canonicalJson(manifest));
    // A manifest read back (the catalog's, after a restart) is a plain parsed object: the same text.
    assert.equal(storedManifestText(JSON.parse(text) as Manifest), text);
    assert.deepEqual(parseManifest(JSON.parse(text)), manifest);
  }
});

test("a stored manifest with more fields than it is digested over keeps them, as canonicalJson does", () => {
  const { manifest } = skillManifest();
  const copy = (): Record<string, unknown> & { components: Record<string, unknown>[] } => JSON.parse(JSON.stringify(manifest));
  const onTop = copy();
  onTop.note = "edited in";
  const inComponent = copy();
  inComponent.components[0]!.zz = 1;
  const inBlob = copy();
  (inBlob.components[1]!.blob as Record<string, unknown>).mode = 1;
  for (const [edited, field] of [[onTop, '"note":"edited in"'], [inComponent, '"zz":1'], [inBlob, '"mode":1']] as const) {
    const text = storedManifestText(edited as unknown as Manifest);
    assert.equal(text, canonicalJson(edited));
    assert.ok(text.includes(field), `${field} is kept`);
  }
});

test("a lone surrogate is refused as canonicalJson refuses it", () => {
  const { manifest } = skillManifest();
  const broken = { ...manifest, bundle_id: "bad\ud800id" } as Manifest;
  assert.throws(
    () => storedManifestText(broken),
    (error: unknown) => isWardenError(error) && error.code === "invalid-json",
  );
});
