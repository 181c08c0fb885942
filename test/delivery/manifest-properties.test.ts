import { test } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import { WardenError } from "../../src/core/errors.js";
import {
  COMPONENT_KINDS,
  COMPONENT_SCOPES,
  compareUtf8,
  manifestDigestOf,
  type Manifest,
} from "../../src/delivery/manifest-types.js";
import { parseManifest } from "../../src/delivery/manifest.js";
import { pathFoldKey } from "../../src/delivery/paths.js";
import { redigest, type RawManifest } from "./manifest-fixtures.js";

const hex64 = fc.stringMatching(/^[0-9a-f]{64}$/);
const identifier = fc.stringMatching(/^[!-.0-[\]-~]{1,24}$/); // graphic ASCII without '/' and '\'
// Files always carry an extension and directories never do, so no file is another's parent.
const pathArb = fc
  .tuple(
    fc.constantFrom("", "docs/", "skills/review/", "\u00E4/", "\u65E5\u672C/", "\u{1F600}/"),
    fc.stringMatching(/^[a-z0-9_-]{1,10}$/),
    fc.constantFrom(".md", ".txt", ".json"),
  )
  .map(([dir, stem, ext]) => dir + stem + ext);

const manifestArb = fc
  .record({
    bundle_id: identifier,
    revision: identifier,
    bundle_digest: hex64.map((h) => `sha256:${h}`),
    components: fc
      .uniqueArray(
        fc.record({
          kind: fc.constantFrom(...COMPONENT_KINDS),
          scope: fc.constantFrom(...COMPONENT_SCOPES),
          relative_path: pathArb,
          blob: fc.record({ digest: hex64.map((h) => `sha256:${h}`), byte_len: fc.integer({ min: 1, max: 1 << 20 }) }),
        }),
        { selector: (c) => pathFoldKey(c.relative_path), minLength: 1, maxLength: 10 },
      )
      .map((cs) => cs.sort((a, b) => compareUtf8(a.relative_path, b.relative_path))),
  })
  .map((body) => redigest({ ...body, manifest_digest: "" } as unknown as RawManifest));

/** The same JSON value with the keys of every object in another order (driven by `order`). */
function reorderKeys(value: unknown, order: readonly number[], depth = 0): unknown {
  if (Array.isArray(value)) return value.map((v, i) => reorderKeys(v, order, depth + i + 1));
  if (typeof value !== "object" || value === null) return value;
  const entries = Object.entries(value);
  const keyed = entries.map((e, i) => ({ e, rank: order[(depth * 7 + i) % Math.max(order.length, 1)] ?? i }));
  keyed.sort((a, b) => a.rank - b.rank);
  return Object.fromEntries(keyed.map(({ e: [k, v] }) => [k, reorderKeys(v, order, depth + 1)]));
}

test("property: the manifest digest does not depend on the JSON key order of the input", () => {
  fc.assert(
    fc.property(manifestArb, fc.array(fc.nat(1000), { minLength: 1, maxLength: 16 }), (raw, order) => {
      const original = parseManifest(raw);
      const shuffledText = JSON.stringify(reorderKeys(raw, order));
      const shuffled = parseManifest(JSON.parse(shuffledText));
      assert.equal(shuffled.manifest_digest, original.manifest_digest);
      assert.deepEqual(shuffled, original);
    }),
    { numRuns: 200, seed: 11 },
  );
});

type Mutation = (m: RawManifest, i: number) => void;
function flipHex(digest: unknown): string {
  const text = String(digest);
  const last = text.at(-1) === "0" ? "1" : "0";
  return text.slice(0, -1) + last;
}
const MUTATIONS: Record<string, Mutation> = {
  bundle_id: (m) => (m.bundle_id = `${String(m.bundle_id).slice(0, 100)}x`),
  revision: (m) => (m.revision = `${String(m.revision).slice(0, 100)}x`),
  bundle_digest: (m) => (m.bundle_digest = flipHex(m.bundle_digest)),
  kind: (m, i) => {
    const c = m.components[i]!;
    c.kind = COMPONENT_KINDS[(COMPONENT_KINDS.indexOf(c.kind as never) + 1) % COMPONENT_KINDS.length];
  },
  scope: (m, i) => {
    const c = m.components[i]!;
    c.scope = c.scope === "session" ? "workspace" : "session";
  },
  // Only the last path can grow at its end and stay sorted and collision-free.
  path: (m) => {
    const c = m.components.at(-1)!;
    c.relative_path = `${String(c.relative_path)}z`;
  },
  blob_digest: (m, i) => (m.components[i]!.blob.digest = flipHex(m.components[i]!.blob.digest)),
  byte_len: (m, i) => (m.components[i]!.blob.byte_len = Number(m.components[i]!.blob.byte_len) - 1 || 2),
};

test("property: changing any field changes the manifest digest, and the old digest is refused", () => {
  fc.assert(
    fc.property(manifestArb, fc.constantFrom(...Object.keys(MUTATIONS)), fc.nat(), (raw, field, pick) => {
      const original = parseManifest(raw);
      const changed = JSON.parse(JSON.stringify(raw)) as RawManifest;
      MUTATIONS[field]!(changed, pick % changed.components.length);
      const stale = { ...changed, manifest_digest: original.manifest_digest };
      assert.throws(
        () => parseManifest(stale),
        (e: unknown) => e instanceof WardenError && e.code === "manifest-digest-mismatch",
      );
      const fresh = parseManifest(redigest(changed));
      assert.notEqual(fresh.manifest_digest, original.manifest_digest, `changing ${field} kept the digest`);
      assert.equal(fresh.manifest_digest, manifestDigestOf(fresh as Omit<Manifest, "manifest_digest">));
    }),
    { numRuns: 400, seed: 5 },
  );
});
